package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

type lifecycleData struct {
	Entity, RecordID, Trigger string
	Revision                  int64
	Values                    map[string]any
	Request                   *struct {
		ProposalVersion, WorkflowRevision                int64
		Transition, FromState, ToState, DeduplicationKey string
		Stage, EffectDigest                              *string
	}
}

// A request's submission is delivered as a lifecycle event with its request
// member; its application runs the local tengo handler and its applied
// patch fires the target's record hook.
func TestLifecycleEventsAndLocalHandlers(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}}, nil)
	rcv := newReceiver(t)
	cfg := deployment(t, "testdata/eventrequests", storetest.NewDatabase(t), is.HostAuthentication(),
		"instanceId: test-1\neventDestinations:\n  receiver:\n    url: "+rcv.srv.URL+"/hooks/registry\n    hmacSha256KeyRef: secret:file/webhook-key\n    classificationCeiling: internal\n    network: loopback\n")
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg.Path()), "secrets", "webhook-key"), eventKey, 0o600); err != nil {
		t.Fatal(err)
	}
	h, srv := serve(t, cfg)
	runWorkers(t, h)
	c := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	v := verifier(t, h)
	v.Source = "urn:engine:registry:families:instance:test-1"

	childLoc, _ := c.create(t, "children", `{"name":"Bo"}`)
	childID := filepath.Base(childLoc)
	loc, tag := c.create(t, "address-changes", `{"childId":"`+childID+`","address":"Elm 3"}`)
	if code, b := c.act(t, loc+"/actions/submit", tag, "k1", `{"actorReference":"a"}`); code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}
	d := verify(t, v, rcv.wait(t, 1, 10*time.Second)[0])
	var data lifecycleData
	if err := json.Unmarshal(d.Event.Data, &data); err != nil {
		t.Fatal(err)
	}
	r := data.Request
	if d.Type != "address-change-submitted-v1" || data.Trigger != "request_lifecycle" || data.Entity != "address_change" || data.RecordID != filepath.Base(loc) || r == nil {
		t.Fatalf("lifecycle event %s %s", d.Type, d.Event.Data)
	}
	if r.Transition != "submit" || r.FromState != "draft" || r.ToState != "submitted" || r.ProposalVersion != 1 || r.WorkflowRevision != data.Revision ||
		r.Stage != nil || r.EffectDigest == nil || !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(*r.EffectDigest) ||
		!regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(r.DeduplicationKey) {
		t.Fatalf("request member %s", d.Event.Data)
	}
	if fmt.Sprint(data.Values) != "map[childId:"+childID+"]" {
		t.Fatalf("values %v: the request fields projected", data.Values)
	}

	got, tag := c.read(t, loc)
	ap := got.Data.Request.action("apply_request")
	if ap == nil {
		t.Fatalf("apply not offered: %+v", got.Data.Request)
	}
	body := fmt.Sprintf(`{"actorReference":"a","proposalVersion":%d,"effectDigest":"%s"}`, ap.ProposalVersion, ap.EffectDigest)
	if code, b := c.act(t, ap.Href, tag, "k2", body); code != 200 {
		t.Fatalf("apply: %d %s", code, b)
	}
	// The applied patch of the child: a record event in the apply's transaction.
	d = verify(t, v, rcv.wait(t, 2, 10*time.Second)[1])
	if d.Type != "child-moved-v1" || string(d.Event.Data) == "" {
		t.Fatalf("after apply: %s", d.Type)
	}
	// The apply transition: run by the local tengo handler.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ds, err := h.Store().ListDeliveries(context.Background(), "", 10)
		if err != nil {
			t.Fatal(err)
		}
		var local *store.DeliverySummary
		for i := range ds {
			if ds[i].Hook == "address-change-applied" {
				local = &ds[i]
			}
		}
		if local != nil && local.State == store.DeliveryDelivered && local.Handler == "tengo" && !local.PayloadAvailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("local handler delivery: %+v", local)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if rcv.count() != 2 {
		t.Fatalf("%d webhook deliveries, want 2 (the local handler's event is not sent)", rcv.count())
	}
}

// A local handler's delivery runs only under the module digest and package
// revision it was captured with: after the handler changed, it fails for
// good without running.
func TestLocalHandlerRunsOnlyUnderItsCapturedDigest(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}}, nil)
	rcv := newReceiver(t)
	dsn := storetest.NewDatabase(t)
	dest := "instanceId: test-1\neventDestinations:\n  receiver:\n    url: " + rcv.srv.URL + "/hooks/registry\n    hmacSha256KeyRef: secret:file/webhook-key\n    classificationCeiling: internal\n    network: loopback\n"
	open := func(project string) *config.Config {
		cfg := deployment(t, project, dsn, is.HostAuthentication(), dest)
		if err := os.WriteFile(filepath.Join(filepath.Dir(cfg.Path()), "secrets", "webhook-key"), eventKey, 0o600); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := open("testdata/eventrequests")
	h, srv := serve(t, cfg) // no workers: the deliveries stay pending
	c := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	childLoc, _ := c.create(t, "children", `{"name":"Bo"}`)
	loc, tag := c.create(t, "address-changes", `{"childId":"`+filepath.Base(childLoc)+`","address":"Elm 3"}`)
	if code, b := c.act(t, loc+"/actions/submit", tag, "k1", `{"actorReference":"a"}`); code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}
	got, tag := c.read(t, loc)
	ap := got.Data.Request.action("apply_request")
	if code, b := c.act(t, ap.Href, tag, "k2", fmt.Sprintf(`{"actorReference":"a","proposalVersion":%d,"effectDigest":"%s"}`, ap.ProposalVersion, ap.EffectDigest)); code != 200 {
		t.Fatalf("apply: %d %s", code, b)
	}
	h.Close()

	// The same project with the handler changed: another digest, another package.
	changed := t.TempDir()
	if err := os.CopyFS(changed, os.DirFS("testdata/eventrequests")); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(changed, "scripts", "applied.tengo")
	b, _ := os.ReadFile(script)
	os.WriteFile(script, append(b, []byte("// changed after capture\n")...), 0o644)
	cfg2 := open(changed)
	h2, _ := serve(t, cfg2)
	runWorkers(t, h2)
	var local store.DeliverySummary
	deadline := time.Now().Add(15 * time.Second)
	for {
		ds, err := h2.Store().ListDeliveries(context.Background(), "", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Hook == "address-change-applied" {
				local = d
			}
		}
		if local.State == store.DeliveryFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("local delivery %+v, want failed", local)
		}
		time.Sleep(50 * time.Millisecond)
	}
	atts, _ := h2.Store().DeliveryAttempts(context.Background(), local.DeliveryID)
	if len(atts) != 1 || atts[0].Failure != "module_unbound" || local.PayloadAvailable {
		t.Fatalf("attempts %+v, delivery %+v", atts, local)
	}
	// The url deliveries captured under the first package are still sent:
	// their bodies were fixed at capture.
	rcv.wait(t, 2, 10*time.Second)
}

// The same apply event handled by the example hook handler built to
// WebAssembly (examples/plugins/hook/wasm).
func TestWASMLocalHandler(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/eventrequests")); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(dir, "registry.yaml")
	b, _ := os.ReadFile(reg)
	yaml := strings.Replace(string(b), "handler: {kind: tengo, script: scripts/applied.tengo}", "handler: {kind: wasm, module: plugins/hook.wasm}", 1)
	if yaml == string(b) {
		t.Fatal("the tengo handler line moved")
	}
	os.WriteFile(reg, []byte(yaml), 0o644)
	build := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", filepath.Join(dir, "plugins", "hook.wasm"), "../examples/plugins/hook/wasm")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the WebAssembly hook handler: %v\n%s", err, out)
	}
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}}, nil)
	rcv := newReceiver(t)
	cfg := deployment(t, dir, storetest.NewDatabase(t), is.HostAuthentication(),
		"instanceId: test-1\neventDestinations:\n  receiver:\n    url: "+rcv.srv.URL+"/hooks/registry\n    hmacSha256KeyRef: secret:file/webhook-key\n    classificationCeiling: internal\n    network: loopback\n")
	os.WriteFile(filepath.Join(filepath.Dir(cfg.Path()), "secrets", "webhook-key"), eventKey, 0o600)
	h, srv := serve(t, cfg)
	runWorkers(t, h)
	c := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	childLoc, _ := c.create(t, "children", `{"name":"Bo"}`)
	loc, tag := c.create(t, "address-changes", `{"childId":"`+filepath.Base(childLoc)+`","address":"Elm 3"}`)
	if code, b := c.act(t, loc+"/actions/submit", tag, "k1", `{"actorReference":"a"}`); code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}
	got, tag := c.read(t, loc)
	ap := got.Data.Request.action("apply_request")
	if code, b := c.act(t, ap.Href, tag, "k2", fmt.Sprintf(`{"actorReference":"a","proposalVersion":%d,"effectDigest":"%s"}`, ap.ProposalVersion, ap.EffectDigest)); code != 200 {
		t.Fatalf("apply: %d %s", code, b)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ds, err := h.Store().ListDeliveries(context.Background(), "", 10)
		if err != nil {
			t.Fatal(err)
		}
		var local store.DeliverySummary
		for _, d := range ds {
			if d.Hook == "address-change-applied" {
				local = d
			}
		}
		if local.State == store.DeliveryDelivered && local.Handler == "wasm" && local.Attempt == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("wasm handler delivery %+v", local)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
