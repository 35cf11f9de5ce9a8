package host_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/internal/binarytest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// requestProject copies testdata/requests and adds the example planner: its
// tengo script (scripts/planner.tengo) and its WebAssembly build
// (plugins/planner.wasm), as an author would.
func requestProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/requests")); err != nil {
		t.Fatal(err)
	}
	binarytest.AddExamplePlanner(t, dir)
	return dir
}

// addClient registers a second standard client ("colleague") with the
// given scopes in a dev issuer's folder, so that two principals can act.
func addClient(t *testing.T, scopes string) func(dir string) {
	return func(dir string) {
		priv, pub := issuertest.GenerateKey(t, "ES256")
		privJSON, _ := priv.MarshalJSON()
		pubJSON, _ := pub.MarshalJSON()
		if err := os.WriteFile(filepath.Join(dir, "client-keys", "colleague.jwk"), privJSON, 0o600); err != nil {
			t.Fatal(err)
		}
		reg := fmt.Sprintf("clientId: colleague\nprincipal: service:colleague\nauthorization:\n  scopes: [%s]\n  claims:\n    purpose: local-development\nkeys:\n  - %s\n", scopes, pubJSON)
		if err := os.WriteFile(filepath.Join(dir, "clients", "colleague.yaml"), []byte(reg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type requestEnv struct {
	owner, colleague caller
}

func startRequests(t *testing.T) requestEnv {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}}, addClient(t, `"families:write"`))
	is.Setup.Clients = append(is.Setup.Clients, issuertest.DevClient{ID: "colleague", Profile: "standard",
		KeyFile: filepath.Join(filepath.Dir(is.Setup.ConfigPath), "client-keys", "colleague.jwk"), Audience: is.Setup.TokenURL})
	cfg := deployment(t, requestProject(t), storetest.NewDatabase(t), is.HostAuthentication())
	_, srv := serve(t, cfg)
	return requestEnv{
		owner:     caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)},
		colleague: caller{srv: srv, token: is.Token(t, "colleague")},
	}
}

type envelope struct {
	Data struct {
		RecordIdentifier string         `json:"recordIdentifier"`
		DomainData       map[string]any `json:"domainData"`
		Request          *requestDoc    `json:"request"`
	} `json:"data"`
}

type requestDoc struct {
	EngineState        string         `json:"engineState"`
	ProposalVersion    int64          `json:"proposalVersion"`
	EffectDigest       string         `json:"effectDigest"`
	Editable           bool           `json:"editable"`
	Actions            []offered      `json:"actions"`
	Application        map[string]any `json:"application"`
	Review             map[string]any `json:"review"`
	Proposal           map[string]any `json:"proposal"`
	SubmitterReference string         `json:"submitterReference"`
	ApplierReference   string         `json:"applierReference"`
	DetailErased       bool           `json:"detailErased"`
}

type offered struct {
	Operation       string `json:"operation"`
	Href            string `json:"href"`
	IfMatch         string `json:"ifMatch"`
	ProposalVersion int64  `json:"proposalVersion"`
	EffectDigest    string `json:"effectDigest"`
	Rebase          *bool  `json:"rebase"`
}

func (r *requestDoc) action(op string) *offered {
	for i := range r.Actions {
		if r.Actions[i].Operation == op {
			return &r.Actions[i]
		}
	}
	return nil
}

func (r *requestDoc) operations() string {
	var ops []string
	for _, a := range r.Actions {
		ops = append(ops, a.Operation)
	}
	return strings.Join(ops, ",")
}

// read GETs a request record and decodes its envelope.
func (c caller) read(t *testing.T, path string) (envelope, string) {
	t.Helper()
	resp, b := c.do(t, "GET", path, "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil || env.Data.Request == nil {
		t.Fatalf("GET %s: no data.request in %s", path, b)
	}
	return env, resp.Header.Get("ETag")
}

// create POSTs a record and returns its Location and ETag.
func (c caller) create(t *testing.T, route, data string) (string, string) {
	t.Helper()
	return hosttest.Caller{URL: c.srv.URL, Token: c.token}.Create(t, route, data)
}

// act calls an action href with If-Match and an Idempotency-Key.
func (c caller) act(t *testing.T, href, ifMatch, key, body string) (int, []byte) {
	t.Helper()
	resp, b := c.do(t, "POST", href, "application/json", body, "If-Match", ifMatch, "Idempotency-Key", key)
	return resp.StatusCode, b
}

type actionResponse struct {
	ID             string     `json:"id"`
	Revision       int64      `json:"revision"`
	Snapshot       string     `json:"snapshot"`
	Request        requestDoc `json:"request"`
	ActorReference string     `json:"actorReference"`
}

func decodeAction(t *testing.T, b []byte) actionResponse {
	t.Helper()
	var a actionResponse
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("action response: %v: %s", err, b)
	}
	var raw map[string]any
	json.Unmarshal(b, &raw)
	if _, isEnvelope := raw["data"]; isEnvelope {
		t.Fatalf("the action response is an envelope: %s", b)
	}
	return a
}

func wantProblem(t *testing.T, what string, status int, b []byte, code string) {
	t.Helper()
	var p struct {
		Code   string `json:"code"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(b, &p); err != nil || p.Code != code || p.Status != status {
		t.Fatalf("%s: want %d %s, got %s", what, status, code, b)
	}
}

func TestChangeRequestJourneyWithPluginPlanners(t *testing.T) {
	env := startRequests(t)
	owner, colleague := env.owner, env.colleague
	childLoc, _ := owner.create(t, "children", `{"name":"Ada","address":"Old Street 1","phone":"555 01"}`)
	childID := filepath.Base(childLoc)
	request := `{"childId":"` + childID + `","address":"New Street 2","phone":"555-02 03","notes":"moved","guardian":{"name":"Grace","relationship":"aunt"}}`

	// Drafts of the same request, planned in tengo and in WebAssembly.
	tengoLoc, _ := owner.create(t, "contact-changes", request)
	wasmLoc, _ := owner.create(t, "contact-changes-wasm", request)

	draft, tag := owner.read(t, tengoLoc)
	r := draft.Data.Request
	if r.EngineState != "draft" || r.ProposalVersion != 1 || !r.Editable || r.operations() != "submit_request,cancel_request" || r.Application != nil {
		t.Fatalf("draft as its owner sees it: %+v", r)
	}
	if r.action("submit_request").IfMatch != tag || !strings.HasSuffix(strings.Split(r.action("submit_request").Href, "?")[0], "/actions/submit") {
		t.Fatalf("submit offered as %+v, ETag %s", r.action("submit_request"), tag)
	}
	// Another principal sees the draft but may do nothing with it.
	other, _ := colleague.read(t, tengoLoc)
	if other.Data.Request.Editable || len(other.Data.Request.Actions) != 0 {
		t.Fatalf("draft as a non-owner sees it: %+v", other.Data.Request)
	}
	code, b := colleague.act(t, r.action("submit_request").Href, tag, "k-other", `{"actorReference":"mallory"}`)
	wantProblem(t, "non-owner submit", 412, b, "precondition.failed")
	_ = code
	resp, b := colleague.do(t, "PATCH", tengoLoc, "application/json-patch+json", `[{"op":"replace","path":"/data/notes","value":"x"}]`, "If-Match", tag)
	wantProblem(t, "non-owner patch", resp.StatusCode, b, "precondition.failed")

	// The owner patches the draft: a new revision, still a draft, and the
	// offered actions carry the new validator.
	resp, b = owner.do(t, "PATCH", tengoLoc, "application/json-patch+json", `[{"op":"replace","path":"/data/notes","value":"moved house"}]`, "If-Match", tag)
	if resp.StatusCode != 200 {
		t.Fatalf("owner patch of the draft: %d %s", resp.StatusCode, b)
	}
	_, wtag := owner.read(t, wasmLoc)
	if resp, b := owner.do(t, "PATCH", wasmLoc, "application/json-patch+json", `[{"op":"replace","path":"/data/notes","value":"moved house"}]`, "If-Match", wtag); resp.StatusCode != 200 {
		t.Fatalf("owner patch of the WebAssembly draft: %d %s", resp.StatusCode, b)
	}
	draft, tag = owner.read(t, tengoLoc)
	r = draft.Data.Request
	if draft.Data.DomainData["notes"] != "moved house" || r.EngineState != "draft" || r.action("submit_request").IfMatch != tag || resp.Header.Get("ETag") != tag {
		t.Fatalf("patched draft: %v %+v", draft.Data.DomainData, r)
	}
	// Guards on every action: If-Match, Idempotency-Key, a known body.
	submit := r.action("submit_request").Href
	resp, b = owner.do(t, "POST", submit, "application/json", `{"actorReference":"clerk-7"}`, "Idempotency-Key", "k1")
	wantProblem(t, "no If-Match", 428, b, "precondition.required")
	resp, b = owner.do(t, "POST", submit, "application/json", `{"actorReference":"clerk-7"}`, "If-Match", tag)
	wantProblem(t, "no Idempotency-Key", 400, b, "request.invalid")
	_, b = owner.act(t, submit, tag, "k1", `{"actorReference":""}`)
	wantProblem(t, "empty actorReference", 400, b, "request.invalid")
	_, b = owner.act(t, submit, tag, "k1", `{"actorReference":7}`)
	wantProblem(t, "actorReference of another type", 400, b, "request.invalid")
	_, b = owner.act(t, submit, tag, "k1", `{"actorReference":"`+strings.Repeat("a", 257)+`"}`)
	wantProblem(t, "actorReference over 256 bytes", 400, b, "request.invalid")
	_, b = owner.act(t, submit, tag, "k1", `{"actorReference":"clerk-7","extra":1}`)
	wantProblem(t, "unknown member", 400, b, "request.invalid")
	_, b = owner.act(t, submit, `"engine-hmac-sha256:`+strings.Repeat("0", 64)+`"`, "k1", `{"actorReference":"clerk-7"}`)
	wantProblem(t, "stale If-Match", 412, b, "precondition.failed")

	// Submit: the plan is computed once and frozen.
	code, b = owner.act(t, submit, tag, "k-submit", `{"actorReference":"clerk-7"}`)
	if code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}
	sub := decodeAction(t, b)
	if sub.ID != filepath.Base(tengoLoc) || sub.Request.EngineState != "submitted" || sub.Request.ProposalVersion != 1 ||
		!strings.HasPrefix(sub.Request.EffectDigest, "sha256:") || sub.Request.Application != nil || sub.ActorReference != "clerk-7" || sub.Revision != 3 {
		t.Fatalf("submit answered %s", b)
	}
	// The same key and body replays the answer; another body is a conflict.
	if code, again := owner.act(t, submit, tag, "k-submit", `{"actorReference":"clerk-7"}`); code != 200 || string(again) != string(b) {
		t.Fatalf("replayed submit: %d %s", code, again)
	}
	_, b = owner.act(t, submit, tag, "k-submit", `{"actorReference":"clerk-8"}`)
	wantProblem(t, "same key, other body", 409, b, "idempotency.conflict")

	// The WebAssembly planner freezes the very same writes.
	_, wtag = owner.read(t, wasmLoc)
	code, b = owner.act(t, wasmLoc+"/actions/submit", wtag, "k-wasm", `{"actorReference":"clerk-7"}`)
	if code != 200 {
		t.Fatalf("submit (wasm): %d %s", code, b)
	}
	if w := decodeAction(t, b); w.Request.EffectDigest != sub.Request.EffectDigest {
		t.Fatalf("effectDigest: tengo %s, wasm %s", sub.Request.EffectDigest, w.Request.EffectDigest)
	}

	// Submitted: no longer editable; apply, revise and cancel are offered.
	got, tag := owner.read(t, tengoLoc)
	r = got.Data.Request
	if r.Editable || r.operations() != "apply_request,revise_request,cancel_request" || r.SubmitterReference != "clerk-7" {
		t.Fatalf("submitted request: %+v", r)
	}
	apply := r.action("apply_request")
	if apply.ProposalVersion != 1 || apply.EffectDigest != sub.Request.EffectDigest || *r.action("revise_request").Rebase != true {
		t.Fatalf("offered actions: %+v", r.Actions)
	}
	if state := r.Review["application"].(map[string]any)["state"]; state != "ready" {
		t.Fatalf("review.application.state = %v", state)
	}
	resp, b = owner.do(t, "PATCH", tengoLoc, "application/json-patch+json", `[{"op":"replace","path":"/data/notes","value":"x"}]`, "If-Match", tag)
	wantProblem(t, "patch of a submitted request", resp.StatusCode, b, "precondition.failed")

	// Apply: the exact proposal, and a reason within its rules.
	applyBody := func(extra string) string {
		return fmt.Sprintf(`{"actorReference":"clerk-9","proposalVersion":1,"effectDigest":%q%s}`, apply.EffectDigest, extra)
	}
	for name, tc := range map[string]struct{ body, code string }{
		"substituted digest": {`{"actorReference":"clerk-9","proposalVersion":1,"effectDigest":"sha256:` + strings.Repeat("0", 64) + `"}`, "precondition.failed"},
		"stale version":      {fmt.Sprintf(`{"actorReference":"clerk-9","proposalVersion":2,"effectDigest":%q}`, apply.EffectDigest), "precondition.failed"},
		"null reason":        {applyBody(`,"reason":null`), "request.invalid"},
		"numeric reason":     {applyBody(`,"reason":5`), "request.invalid"},
		"NUL in reason":      {applyBody(`,"reason":"a\u0000b"`), "request.invalid"},
		"4097 characters":    {applyBody(`,"reason":"` + strings.Repeat("é", 4097) + `"`), "request.invalid"},
	} {
		_, b := owner.act(t, apply.Href, apply.IfMatch, "k-"+name, tc.body)
		status := 412
		if tc.code == "request.invalid" {
			status = 400
		}
		wantProblem(t, name, status, b, tc.code)
	}
	reason := "  " + strings.Repeat("é", 4094) // 4096 characters, leading whitespace kept
	code, b = owner.act(t, apply.Href, apply.IfMatch, "k-apply", applyBody(fmt.Sprintf(`,"reason":%q`, reason)))
	if code != 200 {
		t.Fatalf("apply: %d %s", code, b)
	}
	applied := decodeAction(t, b)
	app := applied.Request.Application
	if applied.Request.EngineState != "applied" || app == nil || app["reasonPresent"] != true || app["effectDigest"] != apply.EffectDigest || app["applicationId"] == "" {
		t.Fatalf("apply answered %s", b)
	}
	// The replay of the apply (decided in its transaction alone: its key is
	// taken by the transaction's first round trip) answers the same bytes
	// and applies nothing again.
	if code, again := owner.act(t, apply.Href, apply.IfMatch, "k-apply", applyBody(fmt.Sprintf(`,"reason":%q`, reason))); code != 200 || string(again) != string(b) {
		t.Fatalf("replayed apply: %d %s, want 200 %s", code, again, b)
	}
	_, b = owner.act(t, apply.Href, apply.IfMatch, "k-apply", applyBody(`,"reason":"another"`))
	wantProblem(t, "replay with another reason", 409, b, "idempotency.conflict")

	// The effects: the child patched (phone normalised by the planner), a
	// guardian created and linked.
	child, _ := owner.read2(t, childLoc)
	if child["address"] != "New Street 2" || child["phone"] != "5550203" || child["caseNotes"] != "moved house" || child["guardianId"] == nil {
		t.Fatalf("child after apply: %v", child)
	}
	guardian, _ := owner.read2(t, "/v1/records/guardians/"+child["guardianId"].(string))
	if guardian["name"] != "Grace" || guardian["relationship"] != "aunt" {
		t.Fatalf("guardian: %v", guardian)
	}
	got, tag = owner.read(t, tengoLoc)
	if r := got.Data.Request; r.EngineState != "applied" || len(r.Actions) != 0 || r.ApplierReference != "clerk-9" || r.Application["reasonPresent"] != true ||
		r.Application["reason"] != reason {
		t.Fatalf("applied request: %+v", r)
	}
	// The action response never carries the reason text.
	if _, ok := app["reason"]; ok {
		t.Fatalf("the apply response shows the reason: %v", app)
	}
	_, b = owner.act(t, apply.Href, tag, "k-apply-2", applyBody(""))
	wantProblem(t, "second apply", 412, b, "precondition.failed")

	// The WebAssembly request froze the child's revision before the apply
	// above: its apply is refused, nothing written.
	got, wtag = owner.read(t, wasmLoc)
	wa := got.Data.Request.action("apply_request")
	_, b = owner.act(t, wa.Href, wa.IfMatch, "k-wasm-apply", fmt.Sprintf(`{"actorReference":"clerk-9","proposalVersion":1,"effectDigest":%q}`, wa.EffectDigest))
	wantProblem(t, "apply over a changed target", 412, b, "precondition.failed")
	if again, _ := owner.read(t, wasmLoc); again.Data.Request.EngineState != "submitted" {
		t.Fatalf("refused apply changed the request: %+v", again.Data.Request)
	}
}

// read2 GETs a record and returns its domainData.
func (c caller) read2(t *testing.T, path string) (map[string]any, string) {
	t.Helper()
	resp, b := c.do(t, "GET", path, "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	var env envelope
	json.Unmarshal(b, &env)
	return env.Data.DomainData, resp.Header.Get("ETag")
}

func TestChangeRequestRefusalsAndReviseCancel(t *testing.T) {
	env := startRequests(t)
	owner := env.owner
	childLoc, _ := owner.create(t, "children", `{"name":"Bo"}`)
	childID := filepath.Base(childLoc)

	// A planner refusal: nothing is stored, the request stays a draft.
	loc, tag := owner.create(t, "contact-changes", `{"childId":"`+childID+`"}`)
	_, b := owner.act(t, loc+"/actions/submit", tag, "k1", `{"actorReference":"a"}`)
	wantProblem(t, "planner refusal", 400, b, "request.plan_refused")
	if !strings.Contains(string(b), "nothing_to_change") {
		t.Fatalf("refusal detail: %s", b)
	}
	if got, again := owner.read(t, loc); got.Data.Request.EngineState != "draft" || again != tag {
		t.Fatalf("after a refused plan: %+v (ETag %s, was %s)", got.Data.Request, again, tag)
	}
	// A planner out of time: service.unavailable, still a draft.
	loc, tag = owner.create(t, "slow-changes", `{"childId":"`+childID+`"}`)
	_, b = owner.act(t, loc+"/actions/submit", tag, "k2", `{"actorReference":"a"}`)
	wantProblem(t, "planner deadline", 503, b, "service.unavailable")
	if got, _ := owner.read(t, loc); got.Data.Request.EngineState != "draft" {
		t.Fatalf("after a planner timeout: %+v", got.Data.Request)
	}

	// Declarative effects: submit, then revise (the approved result offers
	// rebase true only), then cancel.
	loc, tag = owner.create(t, "address-changes", `{"childId":"`+childID+`","address":"Elm 3"}`)
	code, b := owner.act(t, loc+"/actions/submit", tag, "k3", `{"actorReference":"a"}`)
	if code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}
	// The child's read shows the submitted request that targets it.
	if p := presenceOf(t, owner, childLoc); len(p) != 1 || p[0]["recordIdentifier"] != filepath.Base(loc) || p[0]["entityTypeIdentifier"] != "address_change" {
		t.Fatalf("requestPresence on the target: %v", p)
	}
	got, tag := owner.read(t, loc)
	rv := got.Data.Request.action("revise_request")
	if got.Data.Request.Proposal["planner"] != "declarative" || rv == nil || rv.Rebase == nil || !*rv.Rebase {
		t.Fatalf("submitted declarative request: %+v", got.Data.Request)
	}
	_, b = owner.act(t, rv.Href, tag, "k4", `{"actorReference":"a","rebase":false}`)
	wantProblem(t, "revise with the rebase not offered", 409, b, "mutation.conflict")
	_, b = owner.act(t, rv.Href, tag, "k4b", `{"actorReference":"a","rebase":"true"}`)
	wantProblem(t, "revise with a rebase of another type", 400, b, "request.invalid")
	code, b = owner.act(t, rv.Href, tag, "k5", `{"actorReference":"a","rebase":true}`)
	if r := decodeAction(t, b).Request; code != 200 || r.EngineState != "draft" || r.ProposalVersion != 2 {
		t.Fatalf("revise: %d %s", code, b)
	}
	got, tag = owner.read(t, loc)
	if !got.Data.Request.Editable || got.Data.Request.operations() != "submit_request,cancel_request" {
		t.Fatalf("revised draft: %+v", got.Data.Request)
	}
	code, b = owner.act(t, got.Data.Request.action("cancel_request").Href, tag, "k6", `{"actorReference":"a"}`)
	if r := decodeAction(t, b).Request; code != 200 || r.EngineState != "cancelled" {
		t.Fatalf("cancel: %d %s", code, b)
	}
	got, tag = owner.read(t, loc)
	if len(got.Data.Request.Actions) != 0 {
		t.Fatalf("cancelled request offers %+v", got.Data.Request.Actions)
	}
	_, b = owner.act(t, loc+"/actions/submit", tag, "k7", `{"actorReference":"a"}`)
	wantProblem(t, "submit a cancelled request", 412, b, "precondition.failed")
	_, b = owner.act(t, loc+"/actions/approve", tag, "k8", `{"actorReference":"a"}`)
	wantProblem(t, "unknown action", 404, b, "resource.not_found")
	// Cancelled, it is no longer pending on the child.
	if p := presenceOf(t, owner, childLoc); len(p) != 0 {
		t.Fatalf("requestPresence after cancel: %v", p)
	}
	// The child was never changed by the cancelled request.
	if child, _ := owner.read2(t, childLoc); child["address"] != nil {
		t.Fatalf("child changed: %v", child)
	}
}

// presenceOf reads a record's data.requestPresence.pending.
func presenceOf(t *testing.T, c caller, path string) []map[string]any {
	t.Helper()
	resp, b := c.do(t, "GET", path, "", "")
	var env struct {
		Data struct {
			RequestPresence *struct {
				Pending []map[string]any `json:"pending"`
			} `json:"requestPresence"`
		} `json:"data"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &env) != nil || env.Data.RequestPresence == nil {
		t.Fatalf("GET %s: %d %s (want data.requestPresence)", path, resp.StatusCode, b)
	}
	return env.Data.RequestPresence.Pending
}
