package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// create makes a child and returns its id and ETag.
func (e *env) create(t *testing.T, body string) (string, string) {
	t.Helper()
	resp, b := e.do(t, "POST", "/v1/records/children", "application/json", body)
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	var env struct {
		Data struct {
			RecordIdentifier string `json:"recordIdentifier"`
		} `json:"data"`
	}
	json.Unmarshal(b, &env)
	return env.Data.RecordIdentifier, resp.Header.Get("ETag")
}

func domain(t *testing.T, b []byte) (map[string]any, map[string]any) {
	t.Helper()
	var env struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	return env.Data, env.Data["domainData"].(map[string]any)
}

const patchType = "application/json-patch+json"

func TestPatchWritesTheNextRevisionUnderIfMatch(t *testing.T) {
	e := newEnv(t)
	id, etag := e.create(t, `{"data":{"nationalId":"P-1","age":3}}`)
	path := "/v1/records/children/" + id

	resp, b := e.do(t, "PATCH", path, patchType, `[{"op":"replace","path":"/data/age","value":4},{"op":"add","path":"/data/active","value":true}]`)
	problemOf(t, resp, b, 428, "precondition.required")

	resp, b = e.do(t, "PATCH", path, patchType, `[{"op":"replace","path":"/data/age","value":4},{"op":"add","path":"/data/active","value":true}]`, "If-Match", etag)
	if resp.StatusCode != 200 {
		t.Fatalf("patch: %d %s", resp.StatusCode, b)
	}
	data, dd := domain(t, b)
	if data["revisionIdentifier"] != "2" || dd["age"] != float64(4) || dd["active"] != true || dd["nationalId"] != "P-1" {
		t.Fatalf("after patch: %s", b)
	}
	if s, _ := data["snapshot"].(string); !strings.HasPrefix(s, "engine2_") {
		t.Errorf("patch answer lacks a snapshot token: %s", b)
	}
	newTag := resp.Header.Get("ETag")
	if newTag == etag || !etagRE.MatchString(newTag) {
		t.Fatalf("ETag after patch = %q (before %q)", newTag, etag)
	}
	// The old validator is stale now.
	resp, b = e.do(t, "PATCH", path, patchType, `[{"op":"replace","path":"/data/age","value":9}]`, "If-Match", etag)
	problemOf(t, resp, b, 412, "precondition.failed")
	resp, b = e.do(t, "PATCH", path, patchType, `[{"op":"replace","path":"/data/age","value":9}]`, "If-Match", "*")
	problemOf(t, resp, b, 412, "precondition.failed")
	// remove sets null; removing a required field is refused.
	resp, b = e.do(t, "PATCH", path, patchType, `[{"op":"remove","path":"/data/age"}]`, "If-Match", newTag)
	if resp.StatusCode != 200 {
		t.Fatalf("remove: %d %s", resp.StatusCode, b)
	}
	_, dd = domain(t, b)
	if dd["age"] != nil {
		t.Errorf("age after remove = %v", dd["age"])
	}
	tag3 := resp.Header.Get("ETag")
	resp, b = e.do(t, "PATCH", path, patchType, `[{"op":"remove","path":"/data/nationalId"}]`, "If-Match", tag3)
	if p := problemOf(t, resp, b, 400, "request.invalid"); p["fieldPath"] != "/data/nationalId" {
		t.Errorf("fieldPath = %v", p["fieldPath"])
	}
	// A failing test operation is a failed precondition; a passing one lets the patch through.
	resp, b = e.do(t, "PATCH", path, patchType, `[{"op":"test","path":"/data/nationalId","value":"other"},{"op":"replace","path":"/data/age","value":1}]`, "If-Match", tag3)
	problemOf(t, resp, b, 412, "precondition.failed")
	resp, b = e.do(t, "PATCH", path, patchType, `[{"op":"test","path":"/data/nationalId","value":"P-1"},{"op":"copy","from":"/data/nationalId","path":"/data/nationalId"}]`, "If-Match", tag3)
	if resp.StatusCode != 200 {
		t.Fatalf("test+copy: %d %s", resp.StatusCode, b)
	}
	recs, revs, _ := e.rows(t)
	if recs != 1 || revs != 4 {
		t.Fatalf("records %d revisions %d, want 1 and 4", recs, revs)
	}
}

func TestPatchRefusalsNameTheMemberAndWriteNothing(t *testing.T) {
	e := newEnv(t)
	id, etag := e.create(t, `{"data":{"nationalId":"R-1"}}`)
	e.create(t, `{"data":{"nationalId":"TAKEN"}}`)
	path := "/v1/records/children/" + id
	cases := []struct {
		name, body, fieldPath string
	}{
		{"path without /data/", `[{"op":"replace","path":"/age","value":1}]`, "/0/path"},
		{"envelope member", `[{"op":"replace","path":"/data/recordIdentifier","value":"x"}]`, "/data/recordIdentifier"},
		{"meta", `[{"op":"replace","path":"/meta/registryIdentifier","value":"x"}]`, "/0/path"},
		{"unknown field", `[{"op":"add","path":"/data/colour","value":"red"}]`, "/data/colour"},
		{"wrong type", `[{"op":"replace","path":"/data/age","value":"old"}]`, "/data/age"},
		{"unknown op member", `[{"op":"replace","path":"/data/age","value":1,"extra":2}]`, "/0/extra"},
		{"missing value", `[{"op":"replace","path":"/data/age"}]`, "/0/value"},
		{"bad op", `[{"op":"merge","path":"/data/age","value":1}]`, "/0/op"},
		{"not an array", `{"op":"replace"}`, ""},
		{"empty", `[]`, ""},
		{"deep path into a scalar", `[{"op":"add","path":"/data/age/x","value":1}]`, "/data/age"},
		{"unique violated", `[{"op":"replace","path":"/data/nationalId","value":"TAKEN"}]`, "/data/nationalId"},
	}
	r1, r2, r3 := e.rows(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, b := e.do(t, "PATCH", path, patchType, c.body, "If-Match", etag)
			p := problemOf(t, resp, b, 400, "request.invalid")
			if p["fieldPath"] != c.fieldPath {
				t.Errorf("fieldPath = %v, want %q", p["fieldPath"], c.fieldPath)
			}
		})
	}
	resp, b := e.do(t, "PATCH", path, "application/json", `[{"op":"replace","path":"/data/age","value":1}]`, "If-Match", etag)
	problemOf(t, resp, b, 400, "request.invalid")
	if a, b2, c := e.rows(t); a != r1 || b2 != r2 || c != r3 {
		t.Fatalf("refused patches changed the tables")
	}
	// A create-only entity has no patch route: the concealed not-found.
	resp, b = e.do(t, "POST", "/v1/records/births", "application/json", `{"data":{"place":"here"}}`)
	var created struct {
		Data struct{ RecordIdentifier string } `json:"data"`
	}
	json.Unmarshal(b, &created)
	resp, b = e.do(t, "PATCH", "/v1/records/births/"+created.Data.RecordIdentifier, patchType, `[{"op":"replace","path":"/data/place","value":"x"}]`, "If-Match", resp.Header.Get("ETag"))
	problemOf(t, resp, b, 404, "resource.not_found")
	resp, b = e.do(t, "DELETE", "/v1/records/births/"+created.Data.RecordIdentifier, "", "", "If-Match", "x")
	problemOf(t, resp, b, 404, "resource.not_found")
}

func TestTombstoneEndsTheLiveRecord(t *testing.T) {
	e := newEnv(t)
	id, etag := e.create(t, `{"data":{"nationalId":"T-1","age":5}}`)
	path := "/v1/records/children/" + id
	resp, b := e.do(t, "DELETE", path, "", "")
	problemOf(t, resp, b, 428, "precondition.required")
	resp, b = e.do(t, "DELETE", path, "", "", "If-Match", `"engine-hmac-sha256:`+strings.Repeat("0", 64)+`"`)
	problemOf(t, resp, b, 412, "precondition.failed")
	resp, b = e.do(t, "DELETE", path, "", "", "If-Match", etag)
	if resp.StatusCode != 200 {
		t.Fatalf("tombstone: %d %s", resp.StatusCode, b)
	}
	data, dd := domain(t, b)
	if data["revisionIdentifier"] != "2" || data["tombstoned"] != true || dd["nationalId"] != "T-1" {
		t.Fatalf("tombstone answer: %s", b)
	}
	finalTag := resp.Header.Get("ETag")
	resp, b = e.do(t, "GET", path, "", "")
	problemOf(t, resp, b, 404, "resource.not_found")
	resp, b = e.do(t, "DELETE", path, "", "", "If-Match", finalTag)
	problemOf(t, resp, b, 404, "resource.not_found")
	// The unique value is free again.
	e.create(t, `{"data":{"nationalId":"T-1"}}`)
}

func TestIdempotencyKeysReplayConflictAndResolveConcurrentDuplicates(t *testing.T) {
	e := newEnv(t)
	body := `{"data":{"nationalId":"I-1"}}`
	resp1, b1 := e.do(t, "POST", "/v1/records/children", "application/json", body, "Idempotency-Key", "key-1")
	if resp1.StatusCode != 201 {
		t.Fatalf("%d %s", resp1.StatusCode, b1)
	}
	resp2, b2 := e.do(t, "POST", "/v1/records/children", "application/json", body, "Idempotency-Key", "key-1")
	if resp2.StatusCode != 201 || string(b2) != string(b1) {
		t.Fatalf("replay answered %d %s, first %s", resp2.StatusCode, b2, b1)
	}
	for _, h := range []string{"ETag", "Location", "Content-Type", "Link"} {
		if resp1.Header.Get(h) != resp2.Header.Get(h) {
			t.Errorf("replayed %s = %q, first %q", h, resp2.Header.Get(h), resp1.Header.Get(h))
		}
	}
	resp, b := e.do(t, "POST", "/v1/records/children", "application/json", `{"data":{"nationalId":"I-2"}}`, "Idempotency-Key", "key-1")
	problemOf(t, resp, b, 409, "idempotency.conflict")
	resp, b = e.do(t, "POST", "/v1/records/children", "application/json", body, "Idempotency-Key", strings.Repeat("k", 257))
	problemOf(t, resp, b, 400, "request.invalid")
	resp, b = e.do(t, "POST", "/v1/records/children", "application/json", `{"data":{"nationalId":"I-256"}}`, "Idempotency-Key", strings.Repeat("k", 256))
	if resp.StatusCode != 201 {
		t.Fatalf("a 256-byte key was refused: %d %s", resp.StatusCode, b)
	}
	recs, _, _ := e.rows(t)
	if recs != 2 {
		t.Fatalf("records = %d, want 2", recs)
	}

	// Concurrent duplicates: one write, one answer.
	var wg sync.WaitGroup
	answers := make(chan string, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", e.srv.URL+"/v1/records/children", strings.NewReader(`{"data":{"nationalId":"C-1"}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "concurrent")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var out json.RawMessage
			json.NewDecoder(resp.Body).Decode(&out)
			answers <- resp.Status + string(out)
		}()
	}
	wg.Wait()
	close(answers)
	distinct := map[string]bool{}
	for a := range answers {
		distinct[a] = true
	}
	if len(distinct) != 1 {
		t.Fatalf("concurrent duplicates got %d different answers: %v", len(distinct), distinct)
	}
	if recs, _, _ := e.rows(t); recs != 3 {
		t.Fatalf("records = %d after concurrent duplicates, want 3", recs)
	}

	// Patch replays too, even after the record moved on.
	id, etag := e.create(t, `{"data":{"nationalId":"I-P"}}`)
	patch := `[{"op":"replace","path":"/data/age","value":2}]`
	r1, pb1 := e.do(t, "PATCH", "/v1/records/children/"+id, patchType, patch, "If-Match", etag, "Idempotency-Key", "p-1")
	r2, pb2 := e.do(t, "PATCH", "/v1/records/children/"+id, patchType, patch, "If-Match", etag, "Idempotency-Key", "p-1")
	if r1.StatusCode != 200 || r2.StatusCode != 200 || string(pb1) != string(pb2) {
		t.Fatalf("patch replay: %d %s / %d %s", r1.StatusCode, pb1, r2.StatusCode, pb2)
	}
}
