package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/storetest"
)

// compileVariant compiles testdata/history with edit applied to its
// registry.yaml and returns the package folder.
func compileVariant(t *testing.T, dir, name string, edit func(string) string) string {
	t.Helper()
	src, err := os.ReadFile("testdata/history/registry.yaml")
	if err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(dir, "project-"+name)
	os.MkdirAll(project, 0o755)
	os.WriteFile(filepath.Join(project, "registry.yaml"), []byte(edit(string(src))), 0o644)
	pkg := filepath.Join(dir, "package-"+name)
	if out, err := exec.Command(binary, "compile", project, "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile %s: %v\n%s", name, err, out)
	}
	return pkg
}

// exited waits for a host process to end, at most d.
func exited(cmd *exec.Cmd, d time.Duration) bool {
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestActivateMovesTheDatabaseAndEveryHostSeesIt runs two hosts on one
// database, refuses a destructive activation (naming the change, nothing
// changed, the hosts serving on), applies an additive one with `registrum
// activate`: both hosts stop at once, a host of the old package is refused,
// a host of the new one serves the stored record and reports the open
// ingestion run blocked (activePackageChanged). A host configured with
// activateOnStart applies the next package itself, and the running host
// stops. After a confirmed type change, snapshots over values the field no
// longer accepts answer 503 source.unavailable.
func TestActivateMovesTheDatabaseAndEveryHostSeesIt(t *testing.T) {
	dir := t.TempDir()
	same := func(s string) string { return s }
	pkg1 := compileVariant(t, dir, "v1", same)
	withNote := func(s string) string {
		s = strings.Replace(s, "      - {id: qty, type: integer}\n", "      - {id: qty, type: integer}\n      - {id: note, type: string, maxLength: 40}\n", 1)
		return strings.ReplaceAll(s, "[code, qty]", "[code, qty, note]")
	}
	pkg2 := compileVariant(t, dir, "v2", withNote)
	pkg3 := compileVariant(t, dir, "v3", func(s string) string {
		s = strings.Replace(s, "      - {id: qty, type: integer}\n", "", 1)
		return strings.ReplaceAll(s, "[code, qty]", "[code]")
	})
	pkg4 := compileVariant(t, dir, "v4", func(s string) string {
		s = withNote(s)
		s = strings.Replace(s, "      - {id: note, type: string, maxLength: 40}\n", "      - {id: note, type: string, maxLength: 40}\n      - {id: shelf, type: string, maxLength: 10}\n", 1)
		return strings.ReplaceAll(s, "[code, qty, note]", "[code, qty, note, shelf]")
	})
	dsn := storetest.NewDatabase(t)
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"stock:write"}}, nil)
	bearer = is.Token(t, issuertest.StandardClientID)
	t.Cleanup(func() { bearer = "" })
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), bytes.Repeat([]byte{9}, 32), 0o600)
	cfgFor := func(pkg, extra string) string {
		return fmt.Sprintf("version: 1\ndatabase: {url: %q}\npackage: %s\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n%s%s",
			dsn, pkg, is.HostAuthentication(), extra)
	}
	hostA, baseA := startHost(t, cfgFor(pkg1, ""), dir)
	hostB, baseB := startHost(t, cfgFor(pkg1, ""), dir)
	cfgPath := filepath.Join(dir, "host-"+baseA[strings.LastIndex(baseA, ":")+1:]+".yaml")

	s, hdr, b := call(t, "POST", baseA+"/v1/records/items", "application/json", `{"data":{"code":"A-1","qty":3}}`)
	if s != 201 {
		t.Fatalf("create: %d %s", s, b)
	}
	loc := hdr.Get("Location")
	var created struct {
		Data struct {
			Snapshot string `json:"snapshot"`
		} `json:"data"`
	}
	json.Unmarshal([]byte(b), &created)
	p1, err := model.Load(pkg1)
	if err != nil {
		t.Fatal(err)
	}
	input := `{"operation":"create","data":{"code":"R-1"}}` + "\n"
	run, _ := json.Marshal(map[string]any{"operation": "create", "profileId": "clerk", "packageRevision": p1.Revision, "schemaFingerprint": p1.SchemaFingerprint,
		"inputDigest": fmt.Sprintf("%064x", 1), "inputLength": len(input), "itemCount": 1, "chunkCount": 1, "chunkAlgorithmVersion": "greedy-canonical-http-batch-v1"})
	s, _, b = call(t, "POST", baseB+"/v1/records/items/ingestion-runs", "application/json", string(run))
	var opened struct {
		RunID  string `json:"runId"`
		Status string `json:"status"`
	}
	if json.Unmarshal([]byte(b), &opened); s != 201 || opened.Status != "open" {
		t.Fatalf("open run: %d %s", s, b)
	}

	// Destructive: refused, named, nothing changed; the hosts serve on.
	out, err := exec.Command(binary, "activate", pkg3, "--config", cfgPath).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "entity item: field qty is dropped with its values") || !strings.Contains(string(out), "refused, nothing changed") ||
		!strings.Contains(string(out), "--confirm-destructive") {
		t.Fatalf("destructive activation: %v\n%s", err, out)
	}
	for _, base := range []string{baseA, baseB} {
		if s, _, b := call(t, "GET", base+loc, "", ""); s != 200 || !strings.Contains(b, `"qty":3`) {
			t.Fatalf("after a refused activation: %d %s", s, b)
		}
	}

	// Additive: applied; both hosts of the old package stop.
	out, err = exec.Command(binary, "activate", pkg2, "--config", cfgPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "entity item: new optional field note (additive)") {
		t.Fatalf("additive activation: %v\n%s", err, out)
	}
	for name, h := range map[string]*exec.Cmd{"A": hostA, "B": hostB} {
		if !exited(h, 10*time.Second) {
			t.Errorf("host %s still serves the previous package", name)
		}
	}
	// A host of the old package is refused.
	old := filepath.Join(dir, "old.yaml")
	os.WriteFile(old, []byte("listener: {address: 127.0.0.1, port: 1}\n"+cfgFor(pkg1, "")), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err = exec.CommandContext(ctx, binary, "serve", "--config", old).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "registrum activate") {
		t.Fatalf("a host of the old package: %v\n%s", err, out)
	}
	// A host of the new package serves the record and blocks the run.
	hostC, baseC := startHost(t, cfgFor(pkg2, ""), dir)
	if s, _, b := call(t, "GET", baseC+loc, "", ""); s != 200 || !strings.Contains(b, `"qty":3`) || !strings.Contains(b, `"note":null`) {
		t.Fatalf("the record under the new package: %d %s", s, b)
	}
	// A snapshot taken under the previous package reads under the new one.
	if s, _, b := call(t, "GET", baseC+"/v1/records/items:snapshot?snapshot="+created.Data.Snapshot, "", ""); s != 200 || !strings.Contains(b, `"code":"A-1"`) {
		t.Fatalf("a snapshot of the previous package: %d %s", s, b)
	}
	s, _, b = call(t, "GET", baseC+"/v1/records/items/ingestion-runs/"+opened.RunID, "", "")
	if s != 200 || !strings.Contains(b, `"status":"blocked"`) || !strings.Contains(b, `"blockedReason":"activePackageChanged"`) {
		t.Fatalf("the open run after the activation: %d %s", s, b)
	}
	if s, _, b := call(t, "PATCH", baseC+loc, "application/json-patch+json", `[{"op":"add","path":"/data/note","value":"new"}]`, "If-Match", etagOf(t, baseC+loc)); s != 200 {
		t.Fatalf("patch of the new field: %d %s", s, b)
	}

	// activateOnStart: a host of the next package activates it on start;
	// the running host stops.
	hostD, baseD := startHost(t, cfgFor(pkg4, "activateOnStart: true\n"), dir)
	if !exited(hostC, 10*time.Second) {
		t.Error("the host of the previous package still serves after an activation on start")
	}
	if s, _, b := call(t, "POST", baseD+"/v1/records/items", "application/json", `{"data":{"code":"D-1","shelf":"top"}}`); s != 201 {
		t.Fatalf("create under the package activated on start: %d %s", s, b)
	}
	// Destructive changes are refused on start.
	back := filepath.Join(dir, "back.yaml")
	os.WriteFile(back, []byte("listener: {address: 127.0.0.1, port: 1}\n"+cfgFor(pkg2, "activateOnStart: true\n")), 0o600)
	out, err = exec.CommandContext(ctx, binary, "serve", "--config", back).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "field shelf is dropped") {
		t.Fatalf("a destructive activation on start: %v\n%s", err, out)
	}

	// A confirmed type change: the stored values no longer match the field
	// metadata, so snapshots over them are unavailable; revision reads show
	// the stored values.
	pkg5 := compileVariant(t, dir, "v5", func(s string) string {
		s = strings.Replace(s, "      - {id: qty, type: integer}\n", "      - {id: qty, type: string, maxLength: 10}\n", 1)
		s = strings.Replace(s, "      - {id: qty, type: string, maxLength: 10}\n", "      - {id: qty, type: string, maxLength: 10}\n      - {id: note, type: string, maxLength: 40}\n      - {id: shelf, type: string, maxLength: 10}\n", 1)
		return strings.ReplaceAll(s, "[code, qty]", "[code, qty, note, shelf]")
	})
	out, err = exec.Command(binary, "activate", pkg5, "--config", cfgPath, "--confirm-destructive").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "entity item: field qty changes type from integer (bigint) to string (text) (destructive)") {
		t.Fatalf("a confirmed type change: %v\n%s", err, out)
	}
	if !exited(hostD, 10*time.Second) {
		t.Error("the host of the previous package still serves after a confirmed activation")
	}
	_, baseE := startHost(t, cfgFor(pkg5, ""), dir)
	if s, _, b := call(t, "GET", baseE+"/v1/records/items:snapshot?snapshot="+created.Data.Snapshot, "", ""); s != 503 || !strings.Contains(b, "source.unavailable") {
		t.Errorf("a snapshot whose values no longer match: %d %s", s, b)
	}
	if s, _, b := call(t, "GET", baseE+loc+"/revisions/1", "", ""); s != 200 || !strings.Contains(b, `"qty":3`) {
		t.Errorf("a revision written under the previous type: %d %s", s, b)
	}
	if s, _, b := call(t, "GET", baseE+loc, "", ""); s != 200 || !strings.Contains(b, `"qty":"3"`) {
		t.Errorf("the record after the type change: %d %s", s, b)
	}
}

func etagOf(t *testing.T, u string) string {
	t.Helper()
	s, h, b := call(t, "GET", u, "", "")
	if s != 200 {
		t.Fatalf("GET %s: %d %s", u, s, b)
	}
	return h.Get("ETag")
}
