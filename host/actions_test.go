package host_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

func TestImmediateActions(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"accounts:write"}, Claims: map[string]string{"region": "north"}}, nil)
	dsn := storetest.NewDatabase(t)
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/actions")); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", filepath.Join(dir, "plugins", "adjust.wasm"), "./testdata/actions/wasm")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the WebAssembly handler: %v\n%s", err, out)
	}
	cfg := deployment(t, dir, dsn, is.HostAuthentication())
	_, srv := serve(t, cfg)
	c := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	north, _ := c.create(t, "accounts", `{"region":"north","status":"open","balance":0}`)
	south, _ := c.create(t, "accounts", `{"region":"south","status":"open","balance":0}`)
	northID, southID := north[len("/v1/records/accounts/"):], south[len("/v1/records/accounts/"):]

	post := func(path, body string, hdr ...string) (int, []byte) {
		t.Helper()
		resp, b := c.do(t, "POST", path, "application/json", body, hdr...)
		return resp.StatusCode, b
	}
	conditions := func(action, account string) string {
		t.Helper()
		extra := ""
		if action != "close-account" {
			extra = `,"amount":1`
		}
		s, b := post("/v1/actions/"+action+"/target-conditions", `{"input":{"account":"`+account+`"`+extra+`}}`)
		if s != 200 {
			t.Fatalf("target-conditions: %d %s", s, b)
		}
		var tc struct {
			Preconditions map[string]struct {
				Entity, RecordID, IfMatch string
			} `json:"preconditions"`
		}
		json.Unmarshal(b, &tc)
		for _, p := range tc.Preconditions {
			if p.Entity != "account" || p.RecordID != account {
				t.Fatalf("target-conditions: %s", b)
			}
			return p.IfMatch
		}
		t.Fatalf("no precondition in %s", b)
		return ""
	}

	// Target-conditions names the record and its ifMatch; a record outside
	// the action's target row boundary is not found.
	etag := conditions("close-account", northID)
	s, b := post("/v1/actions/close-account/target-conditions", `{"input":{"account":"`+southID+`"}}`)
	wantProblem(t, "conditions outside the boundary", 404, b, "resource.not_found")

	// Refusals before any write.
	body := `{"input":{"account":"` + northID + `"},"preconditions":{"close":{"ifMatch":` + jsonString(etag) + `}}}`
	s, b = post("/v1/actions/close-account", body)
	wantProblem(t, "without Idempotency-Key", 400, b, "request.invalid")
	s, b = post("/v1/actions/close-account", `{"input":{"account":"`+northID+`"}}`, "Idempotency-Key", "c0")
	wantProblem(t, "without preconditions", 428, b, "precondition.required")
	s, b = post("/v1/actions/close-account", `{"input":{"account":"`+northID+`","extra":1},"preconditions":{}}`, "Idempotency-Key", "c0")
	wantProblem(t, "unknown input", 400, b, "request.invalid")
	s, b = post("/v1/actions/close-account", `{"input":{"account":"`+southID+`"},"preconditions":{"close":{"ifMatch":`+jsonString(etag)+`}}}`, "Idempotency-Key", "c1")
	wantProblem(t, "invoke outside the boundary", 404, b, "resource.not_found")
	s, b = post("/v1/actions/nothing", body, "Idempotency-Key", "c1")
	wantProblem(t, "unknown action", 404, b, "resource.not_found")
	s, b = post("/v1/actions/reopen-account", `{"input":{"account":"`+northID+`"},"preconditions":{"reopen":{"ifMatch":`+jsonString(etag)+`}}}`, "Idempotency-Key", "c1")
	wantProblem(t, "action without an invoke grant", 404, b, "resource.not_found")
	s, b = post("/v1/actions/reopen-account/target-conditions", `{"input":{"account":"`+northID+`"}}`)
	wantProblem(t, "conditions without an invoke grant", 404, b, "resource.not_found")
	resp, b := c.do(t, "POST", "/v1/actions/close-account", "application/json", body, "Idempotency-Key", "c1", "Authorization", "Bearer not-a-token")
	if resp.StatusCode != 401 {
		t.Fatalf("a rejected token: %d %s", resp.StatusCode, b)
	}

	// A stale ifMatch: 412 and nothing written.
	resp, pb := c.do(t, "PATCH", north, "application/json-patch+json", `[{"op":"replace","path":"/data/note","value":"moved"}]`, "If-Match", etag)
	if resp.StatusCode != 200 {
		t.Fatalf("patch: %d %s", resp.StatusCode, pb)
	}
	s, b = post("/v1/actions/close-account", body, "Idempotency-Key", "c2")
	wantProblem(t, "stale ifMatch", 412, b, "precondition.failed")
	_, b = c.do(t, "GET", north, "", "")
	if !json.Valid(b) || !contains(string(b), `"status":"open"`) || !contains(string(b), `"revisionIdentifier":"2"`) {
		t.Fatalf("after the stale call: %s", b)
	}

	// Fresh: written; the same key replays; another body with it conflicts.
	etag = conditions("close-account", northID)
	body = `{"input":{"account":"` + northID + `"},"preconditions":{"close":{"ifMatch":` + jsonString(etag) + `}}}`
	s, first := post("/v1/actions/close-account", body, "Idempotency-Key", "c3")
	var res struct {
		Action, ApplicationID string
		Results               []struct {
			Entity, RecordID string
			Revision         int64
		}
	}
	if json.Unmarshal(first, &res); s != 200 || res.Action != "close-account" || res.ApplicationID == "" || len(res.Results) != 1 ||
		res.Results[0].Entity != "account" || res.Results[0].RecordID != northID || res.Results[0].Revision != 3 {
		t.Fatalf("invoke: %d %s", s, first)
	}
	if s, again := post("/v1/actions/close-account", body, "Idempotency-Key", "c3"); s != 200 || string(again) != string(first) {
		t.Fatalf("replay: %d %s", s, again)
	}
	s, b = post("/v1/actions/close-account", `{"input":{"account":"`+northID+`"},"preconditions":{"close":{"ifMatch":"\"x\""}}}`, "Idempotency-Key", "c3")
	wantProblem(t, "same key, other body", 409, b, "idempotency.conflict")

	// The action's precondition (status open) no longer holds: 412.
	etag = conditions("close-account", northID)
	s, b = post("/v1/actions/close-account", `{"input":{"account":"`+northID+`"},"preconditions":{"close":{"ifMatch":`+jsonString(etag)+`}}}`, "Idempotency-Key", "c4")
	wantProblem(t, "precondition status open", 412, b, "precondition.failed")

	// The handler: values for its declared write, or a declared refusal.
	open, _ := c.create(t, "accounts", `{"region":"north","status":"open","balance":0}`)
	openID := open[len("/v1/records/accounts/"):]
	etag = conditions("adjust", openID)
	s, b = post("/v1/actions/adjust", `{"input":{"account":"`+openID+`","amount":5000},"preconditions":{"change":{"ifMatch":`+jsonString(etag)+`}}}`, "Idempotency-Key", "a1")
	wantProblem(t, "handler refusal", 422, b, "action.refused")
	if !contains(string(b), "too_large") || !contains(string(b), `"fieldPath":"/input/amount"`) {
		t.Fatalf("refusal: %s", b)
	}
	if n := countRows(t, dsn, `SELECT count(*) FROM registrum.revisions WHERE entity_id = 'ledger'`); n != 0 {
		t.Fatalf("%d ledger rows after a refusal", n)
	}
	s, b = post("/v1/actions/adjust", `{"input":{"account":"`+openID+`","amount":21},"preconditions":{"change":{"ifMatch":`+jsonString(etag)+`}}}`, "Idempotency-Key", "a2")
	if s != 200 {
		t.Fatalf("adjust: %d %s", s, b)
	}
	_, b = c.do(t, "GET", open, "", "")
	if !contains(string(b), `"balance":42`) || !contains(string(b), `"note":"adjusted"`) {
		t.Fatalf("account after adjust: %s", b)
	}
	if n := countRows(t, dsn, `SELECT count(*) FROM registrum.revisions WHERE entity_id = 'ledger'`); n != 1 {
		t.Fatalf("%d ledger rows after adjust", n)
	}

	// The same handler in WebAssembly: values, and the declared refusal.
	etag = conditions("adjust-wasm", openID)
	s, b = post("/v1/actions/adjust-wasm", `{"input":{"account":"`+openID+`","amount":2000},"preconditions":{"change":{"ifMatch":`+jsonString(etag)+`}}}`, "Idempotency-Key", "w1")
	wantProblem(t, "WebAssembly handler refusal", 422, b, "action.refused")
	s, b = post("/v1/actions/adjust-wasm", `{"input":{"account":"`+openID+`","amount":50},"preconditions":{"change":{"ifMatch":`+jsonString(etag)+`}}}`, "Idempotency-Key", "w2")
	if s != 200 {
		t.Fatalf("adjust-wasm: %d %s", s, b)
	}
	_, b = c.do(t, "GET", open, "", "")
	if !contains(string(b), `"balance":100`) {
		t.Fatalf("account after adjust-wasm: %s", b)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func contains(s, sub string) bool { return len(sub) == 0 || len(s) >= len(sub) && indexOf(s, sub) >= 0 }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
