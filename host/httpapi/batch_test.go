package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestBatchWritesAllItemsInOrderOrNothing(t *testing.T) {
	e := newEnv(t)
	id, etag := e.create(t, `{"data":{"nationalId":"B-0","age":1}}`)
	body := `{"items":[
		{"operation":"create","data":{"nationalId":"B-1"}},
		{"operation":"patch","id":"` + id + `","ifMatch":` + jsonString(etag) + `,"patch":[{"op":"replace","path":"/data/age","value":2}]},
		{"operation":"create","data":{"nationalId":"B-2","age":3}}
	],"changeContext":{"kind":"correction","reasonCode":"typo","sourceReferences":["ticket-1"]}}`
	resp, b := e.do(t, "POST", "/v1/records/children:batch", "application/json", body)
	if resp.StatusCode != 200 {
		t.Fatalf("batch: %d %s", resp.StatusCode, b)
	}
	var out struct {
		Snapshot string `json:"snapshot"`
		Results  []struct {
			Operation string         `json:"operation"`
			ID        string         `json:"id"`
			Revision  int            `json:"revision"`
			ETag      string         `json:"etag"`
			Data      map[string]any `json:"data"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Snapshot, "engine2_") || len(out.Results) != 3 {
		t.Fatalf("batch answer %s", b)
	}
	wantOps := []string{"create", "patch", "create"}
	for i, r := range out.Results {
		if r.Operation != wantOps[i] || !etagRE.MatchString(r.ETag) || !uuidRE.MatchString(r.ID) {
			t.Errorf("result %d = %+v", i, r)
		}
	}
	if out.Results[1].ID != id || out.Results[1].Revision != 2 || out.Results[1].Data["age"] != float64(2) {
		t.Errorf("patch result = %+v", out.Results[1])
	}
	if out.Results[0].Data["nationalId"] != "B-1" || out.Results[2].Data["nationalId"] != "B-2" {
		t.Errorf("results out of item order: %s", b)
	}
	// The batch's items share one commit and carry the change context.
	var commits, contexts int
	e.pool.QueryRow(t.Context(), "select count(distinct commit_id), count(change_context) from registrum.revisions where change_context is not null").Scan(&commits, &contexts)
	if commits != 1 || contexts != 3 {
		t.Errorf("batch revisions: %d commits, %d with change context", commits, contexts)
	}
	// The patch result's etag is the record's validator.
	resp, _ = e.do(t, "GET", "/v1/records/children/"+id, "", "")
	if resp.Header.Get("ETag") != out.Results[1].ETag {
		t.Errorf("result etag %s, read ETag %s", out.Results[1].ETag, resp.Header.Get("ETag"))
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestBatchRefusalsRollBackEveryItem(t *testing.T) {
	e := newEnv(t)
	id, etag := e.create(t, `{"data":{"nationalId":"R-0"}}`)
	stalePatch := `{"operation":"patch","id":"` + id + `","ifMatch":"\"engine-hmac-sha256:` + strings.Repeat("1", 64) + `\"","patch":[{"op":"replace","path":"/data/age","value":2}]}`
	okCreate := `{"operation":"create","data":{"nationalId":"R-NEW"}}`
	cases := []struct {
		name, body string
		status     int
		code, path string
	}{
		{"stale ifMatch", `{"items":[` + okCreate + `,` + stalePatch + `]}`, 412, "precondition.failed", ""},
		{"unique violated on the final state", `{"items":[` + okCreate + `,{"operation":"create","data":{"nationalId":"R-NEW"}}]}`, 400, "request.invalid", "/data/nationalId"},
		{"bad item value", `{"items":[` + okCreate + `,{"operation":"create","data":{"nationalId":7}}]}`, 400, "request.invalid", "/items/1/data/nationalId"},
		{"item-level change context", `{"items":[{"operation":"create","data":{"nationalId":"X"},"changeContext":{"kind":"x"}}]}`, 400, "request.invalid", "/items/0/changeContext"},
		{"correction without reason code", `{"items":[` + okCreate + `],"changeContext":{"kind":"correction"}}`, 400, "request.invalid", "/changeContext/reasonCode"},
		{"reason code over 64 bytes", `{"items":[` + okCreate + `],"changeContext":{"kind":"correction","reasonCode":"` + strings.Repeat("c", 65) + `"}}`, 400, "request.invalid", "/changeContext/reasonCode"},
		{"17 source references", `{"items":[` + okCreate + `],"changeContext":{"kind":"k","sourceReferences":[` + strings.TrimSuffix(strings.Repeat(`"r",`, 17), ",") + `]}}`, 400, "request.invalid", "/changeContext/sourceReferences"},
		{"too many items", `{"items":[` + strings.TrimSuffix(strings.Repeat(`{"operation":"create","data":{"nationalId":"M"}},`, 4), ",") + `]}`, 400, "request.invalid", "/items"},
		{"unknown operation", `{"items":[{"operation":"delete","id":"x"}]}`, 400, "request.invalid", "/items/0/operation"},
		{"bad patch op", `{"items":[{"operation":"patch","id":"` + id + `","ifMatch":"x","patch":[{"op":"nope","path":"/data/age"}]}]}`, 400, "request.invalid", "/items/0/patch/0/op"},
		{"unknown member", `{"items":[` + okCreate + `],"extra":1}`, 400, "request.invalid", "/extra"},
	}
	r1, r2, r3 := e.rows(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, b := e.do(t, "POST", "/v1/records/children:batch", "application/json", c.body)
			p := problemOf(t, resp, b, c.status, c.code)
			if c.path != "" && p["fieldPath"] != c.path {
				t.Errorf("fieldPath = %v, want %s", p["fieldPath"], c.path)
			}
		})
	}
	if a, b, c := e.rows(t); a != r1 || b != r2 || c != r3 {
		t.Fatalf("refused batches wrote: %d/%d/%d -> %d/%d/%d", r1, r2, r3, a, b, c)
	}
	// Items at the bound pass; an entity without batch bounds has no batch route.
	three := `{"items":[` + strings.TrimSuffix(strings.Repeat(`{"operation":"create","data":{"age":1,"nationalId":"ID"}},`, 1), ",") + `]}`
	resp, b := e.do(t, "POST", "/v1/records/children:batch", "application/json", strings.Replace(three, `"ID"`, `"ID-1"`, 1))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	resp, b = e.do(t, "POST", "/v1/records/births:batch", "application/json", `{"items":[]}`)
	problemOf(t, resp, b, 404, "resource.not_found")
	_ = etag
}

// TestBatchMaximumBytesAtItsEdge: a batch body of exactly the entity's
// batch.maximumBytes is written; one byte more is refused with 400
// request.invalid naming the body as a whole, and writes nothing.
func TestBatchMaximumBytesAtItsEdge(t *testing.T) {
	e := newEnv(t)
	const bound = 4096 // testPackage: children's batch.maximumBytes
	body := func(id string, size int) string {
		b := `{"items":[{"operation":"create","data":{"nationalId":"` + id + `"}}]}`
		return b + strings.Repeat(" ", size-len(b))
	}
	resp, b := e.do(t, "POST", "/v1/records/children:batch", "application/json", body("EDGE-1", bound))
	if resp.StatusCode != 200 {
		t.Fatalf("a batch of exactly %d bytes: %d %s", bound, resp.StatusCode, b)
	}
	r1, r2, r3 := e.rows(t)
	resp, b = e.do(t, "POST", "/v1/records/children:batch", "application/json", body("EDGE-2", bound+1))
	if p := problemOf(t, resp, b, 400, "request.invalid"); p["fieldPath"] != "" || !strings.Contains(p["detail"].(string), "4096") {
		t.Errorf("a batch of %d bytes: %s", bound+1, b)
	}
	if a, b, c := e.rows(t); a != r1 || b != r2 || c != r3 {
		t.Fatalf("the refused batch wrote: %d/%d/%d -> %d/%d/%d", r1, r2, r3, a, b, c)
	}
}

// TestBatchAndTombstoneReplayUnderTheirKey: a batch and a tombstone sent
// again with their Idempotency-Key answer the stored response byte for
// byte and write nothing; the key with another batch is 409
// idempotency.conflict.
func TestBatchAndTombstoneReplayUnderTheirKey(t *testing.T) {
	e := newEnv(t)
	batch := `{"items":[{"operation":"create","data":{"nationalId":"K-1"}},{"operation":"create","data":{"nationalId":"K-2"}}]}`
	resp, first := e.do(t, "POST", "/v1/records/children:batch", "application/json", batch, "Idempotency-Key", "batch-1")
	if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("batch: %d %s", resp.StatusCode, first)
	}
	r1, r2, r3 := e.rows(t)
	resp, again := e.do(t, "POST", "/v1/records/children:batch", "application/json", batch, "Idempotency-Key", "batch-1")
	if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "true" || string(again) != string(first) {
		t.Fatalf("replayed batch: %d %s\nfirst %s", resp.StatusCode, again, first)
	}
	resp, b := e.do(t, "POST", "/v1/records/children:batch", "application/json", strings.Replace(batch, "K-2", "K-3", 1), "Idempotency-Key", "batch-1")
	problemOf(t, resp, b, 409, "idempotency.conflict")
	if a, b, c := e.rows(t); a != r1 || b != r2 || c != r3 {
		t.Fatalf("the replay or the conflict wrote: %d/%d/%d -> %d/%d/%d", r1, r2, r3, a, b, c)
	}

	id, etag := e.create(t, `{"data":{"nationalId":"T-1"}}`)
	resp, first = e.do(t, "DELETE", "/v1/records/children/"+id, "", "", "If-Match", etag, "Idempotency-Key", "tomb-1")
	if resp.StatusCode != 200 || !strings.Contains(string(first), `"tombstoned":true`) {
		t.Fatalf("tombstone: %d %s", resp.StatusCode, first)
	}
	r1, r2, r3 = e.rows(t)
	resp, again = e.do(t, "DELETE", "/v1/records/children/"+id, "", "", "If-Match", etag, "Idempotency-Key", "tomb-1")
	if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "true" || string(again) != string(first) {
		t.Fatalf("replayed tombstone: %d %s\nfirst %s", resp.StatusCode, again, first)
	}
	if a, b, c := e.rows(t); a != r1 || b != r2 || c != r3 {
		t.Fatalf("the replayed tombstone wrote: %d/%d/%d -> %d/%d/%d", r1, r2, r3, a, b, c)
	}
	// Without the key the record is gone: the same call is not found.
	resp, b = e.do(t, "DELETE", "/v1/records/children/"+id, "", "", "If-Match", etag)
	problemOf(t, resp, b, 404, "resource.not_found")
}
