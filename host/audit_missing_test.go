package host_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// Tests of rules the audit of issue #27 found untested: each fails when
// its rule breaks.

// problemCode returns the code and fieldPath of a problem document.
func problemCode(t *testing.T, b []byte) (string, any) {
	t.Helper()
	var p struct {
		Code      string `json:"code"`
		FieldPath any    `json:"fieldPath"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("not a problem document: %v %s", err, b)
	}
	return p.Code, p.FieldPath
}

// TestChangeContextBoundsAtTheirEdges: changeContext.reasonText holds at
// most 4 KiB and a source reference at most 256 bytes, counted in UTF-8
// bytes (not characters), at most 16 of them; one byte or one entry more
// is 400 request.invalid naming the member, and writes nothing.
func TestChangeContextBoundsAtTheirEdges(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"offices:write"}, Claims: map[string]string{"district": "north"}}, nil)
	dsn := storetest.NewDatabase(t)
	_, srv := serve(t, deployment(t, "testdata/history", dsn, is.HostAuthentication()))
	clerk := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	n := 0
	batch := func(cc map[string]any) (int, []byte) {
		t.Helper()
		n++
		body, err := json.Marshal(map[string]any{"items": []any{map[string]any{"operation": "create", "data": map[string]any{"name": fmt.Sprintf("O%d", n), "district": "north"}}}, "changeContext": cc})
		if err != nil {
			t.Fatal(err)
		}
		resp, b := clerk.do(t, "POST", "/v1/records/offices:batch", "application/json", string(body))
		return resp.StatusCode, b
	}
	count := func() int {
		t.Helper()
		return len(clerk.page(t, "/v1/records/offices?$top=100").Items)
	}
	ref := func(bytes int) string {
		return "urn:" + strings.Repeat("é", (bytes-4)/2) + strings.Repeat("x", (bytes-4)%2)
	}
	refs := func(k, bytes int) []any {
		out := make([]any, k)
		for i := range out {
			out[i] = ref(bytes)
		}
		return out
	}
	// 2048 two-byte characters are 4096 bytes; one ASCII byte more is over.
	text := strings.Repeat("é", 2048)
	for name, cc := range map[string]map[string]any{
		"reasonText of 4096 bytes":             {"kind": "correction", "reasonCode": "typo", "reasonText": text},
		"16 source references of 256 bytes":    {"kind": "correction", "reasonCode": "typo", "sourceReferences": refs(16, 256)},
		"a 256-byte source reference and text": {"kind": "import", "reasonText": text, "sourceReferences": []any{ref(256)}},
	} {
		if len(ref(256)) != 256 {
			t.Fatalf("ref(256) has %d bytes", len(ref(256)))
		}
		if status, b := batch(cc); status != 200 {
			t.Errorf("%s: %d %s", name, status, b)
		}
	}
	before := count()
	for name, tc := range map[string]struct {
		cc   map[string]any
		path string
	}{
		"reasonText of 4097 bytes":             {map[string]any{"kind": "correction", "reasonCode": "typo", "reasonText": text + "x"}, "/changeContext/reasonText"},
		"reasonText of 4096 characters":        {map[string]any{"kind": "correction", "reasonCode": "typo", "reasonText": strings.Repeat("é", 4096)}, "/changeContext/reasonText"},
		"a source reference of 257 bytes":      {map[string]any{"kind": "correction", "reasonCode": "typo", "sourceReferences": []any{ref(256), ref(257)}}, "/changeContext/sourceReferences/1"},
		"a source reference of 256 characters": {map[string]any{"kind": "correction", "reasonCode": "typo", "sourceReferences": []any{strings.Repeat("é", 256)}}, "/changeContext/sourceReferences/0"},
		"17 source references":                 {map[string]any{"kind": "correction", "reasonCode": "typo", "sourceReferences": refs(17, 8)}, "/changeContext/sourceReferences"},
	} {
		status, b := batch(tc.cc)
		if code, path := problemCode(t, b); status != 400 || code != "request.invalid" || path != tc.path {
			t.Errorf("%s: %d %s", name, status, b)
		}
	}
	if after := count(); after != before {
		t.Errorf("refused batches wrote: %d records, then %d", before, after)
	}
}

// TestIngestionRunListDefaultsTo25: without limit a page of the caller's
// runs holds 25 and says more follow; limit reaches past it.
func TestIngestionRunListDefaultsTo25(t *testing.T) {
	env := startIngestion(t)
	input := `{"operation":"create","data":{"code":"A-1","qty":1}}` + "\n"
	for i := 0; i < 26; i++ {
		env.open(t, env.owner, input, 1)
	}
	list := func(path string) (int, bool) {
		t.Helper()
		resp, b := env.owner.do(t, "GET", path, "", "")
		var l struct {
			Runs    []json.RawMessage `json:"runs"`
			HasMore bool              `json:"hasMore"`
		}
		if err := json.Unmarshal(b, &l); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		return len(l.Runs), l.HasMore
	}
	if n, more := list("/v1/records/items/ingestion-runs"); n != 25 || !more {
		t.Errorf("default page: %d runs, hasMore %v; want 25, true", n, more)
	}
	if n, more := list("/v1/records/items/ingestion-runs?limit=26"); n != 26 || more {
		t.Errorf("limit=26: %d runs, hasMore %v; want 26, false", n, more)
	}
}

// TestBatchTemporalOverlapSettlesByTheEnd: temporal non-overlap is checked
// on the final state of a batch. Items that overlap an existing interval
// mid-way are accepted when a later item of the same batch resolves it,
// in either order; a batch whose final state overlaps is refused and
// writes nothing.
func TestBatchTemporalOverlapSettlesByTheEnd(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"offices:write"}}, nil)
	dsn := storetest.NewDatabase(t)
	_, srv := serve(t, deployment(t, "testdata/overlap", dsn, is.HostAuthentication()))
	clerk := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	create := func(data string) (string, string) {
		t.Helper()
		resp, b := clerk.do(t, "POST", "/v1/records/assignments", "application/json", `{"data":`+data+`}`)
		if resp.StatusCode != 201 {
			t.Fatalf("create: %d %s", resp.StatusCode, b)
		}
		return strings.TrimPrefix(resp.Header.Get("Location"), "/v1/records/assignments/"), resp.Header.Get("ETag")
	}
	patchItem := func(id, etag, field, value string) string {
		tag, _ := json.Marshal(etag)
		return `{"operation":"patch","id":"` + id + `","ifMatch":` + string(tag) + `,"patch":[{"op":"replace","path":"/data/` + field + `","value":"` + value + `"}]}`
	}
	rows := func() string {
		t.Helper()
		var out []string
		for _, it := range clerk.page(t, "/v1/records/assignments?$orderby=starts").Items {
			out = append(out, fmt.Sprintf("%v:%v-%v", it.DomainData["holder"], it.DomainData["starts"], it.DomainData["ends"]))
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}

	// The successor is created first (overlapping the open interval of
	// a1), then a1 is closed: the final state is disjoint.
	a1, tag1 := create(`{"holder":"ann","starts":"2024-01-01"}`)
	body := `{"items":[{"operation":"create","data":{"holder":"ann","starts":"2024-03-01"}},` + patchItem(a1, tag1, "ends", "2024-03-01") + `]}`
	if resp, b := clerk.do(t, "POST", "/v1/records/assignments:batch", "application/json", body); resp.StatusCode != 200 {
		t.Fatalf("overlap settled by the last item: %d %s", resp.StatusCode, b)
	}
	// The other order, over two existing intervals: b2 moves its start
	// into b1 before b1 moves its end away.
	b1, btag1 := create(`{"holder":"bob","starts":"2024-01-01","ends":"2024-02-01"}`)
	b2, btag2 := create(`{"holder":"bob","starts":"2024-02-01","ends":"2024-03-01"}`)
	body = `{"items":[` + patchItem(b2, btag2, "starts", "2024-01-15") + `,` + patchItem(b1, btag1, "ends", "2024-01-15") + `]}`
	if resp, b := clerk.do(t, "POST", "/v1/records/assignments:batch", "application/json", body); resp.StatusCode != 200 {
		t.Fatalf("a move settled by the last item: %d %s", resp.StatusCode, b)
	}
	want := "ann:2024-01-01-2024-03-01,ann:2024-03-01-<nil>,bob:2024-01-01-2024-01-15,bob:2024-01-15-2024-03-01"
	if got := rows(); got != want {
		t.Fatalf("after the batches: %s, want %s", got, want)
	}
	// Overlapping at the end: refused, nothing written.
	c1, ctag1 := create(`{"holder":"cat","starts":"2024-01-01","ends":"2024-02-01"}`)
	before := rows()
	body = `{"items":[{"operation":"create","data":{"holder":"cat","starts":"2024-03-01"}},` + patchItem(c1, ctag1, "ends", "2024-03-02") + `]}`
	resp, b := clerk.do(t, "POST", "/v1/records/assignments:batch", "application/json", body)
	if code, _ := problemCode(t, b); resp.StatusCode != 400 || code != "request.invalid" {
		t.Errorf("overlap in the final state: %d %s", resp.StatusCode, b)
	}
	if after := rows(); after != before {
		t.Errorf("the refused batch wrote: %s, then %s", before, after)
	}
}

// TestRequestReadsWithholdWhatTheProfileDoesNotDisclose: an applied
// request read under a profile without review_state has no review member;
// without actor_reference it has no submitterReference, applierReference
// or application reason (reasonPresent stays). The profile that discloses
// both shows all of them, so each absence is the profile's doing.
func TestRequestReadsWithholdWhatTheProfileDoesNotDisclose(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}}, nil)
	dsn := storetest.NewDatabase(t)
	_, srv := serve(t, deployment(t, "testdata/withheld", dsn, is.HostAuthentication()))
	owner := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	childLoc, _ := owner.create(t, "children", `{"name":"Ada"}`)
	loc, _ := owner.create(t, "note-changes", `{"childId":"`+strings.TrimPrefix(childLoc, "/v1/records/children/")+`","note":"n"}`)
	env, _ := owner.read(t, loc)
	a := env.Data.Request.action("submit_request")
	if a == nil {
		t.Fatalf("submit not offered: %+v", env.Data.Request)
	}
	if st, b := owner.act(t, a.Href, a.IfMatch, "submit-1", `{"actorReference":"clerk-7"}`); st != 200 {
		t.Fatalf("submit: %d %s", st, b)
	}
	env, _ = owner.read(t, loc)
	a = env.Data.Request.action("apply_request")
	if a == nil {
		t.Fatalf("apply not offered: %+v", env.Data.Request)
	}
	if st, b := owner.act(t, a.Href, a.IfMatch, "apply-1", fmt.Sprintf(`{"actorReference":"clerk-8","proposalVersion":%d,"effectDigest":%q,"reason":"checked"}`, a.ProposalVersion, a.EffectDigest)); st != 200 {
		t.Fatalf("apply: %d %s", st, b)
	}
	request := func(profile string) map[string]any {
		t.Helper()
		resp, b := owner.do(t, "GET", loc+"?accessProfile="+profile, "", "")
		var env struct {
			Data struct {
				Request map[string]any `json:"request"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &env); err != nil || resp.StatusCode != 200 || env.Data.Request["application"] == nil {
			t.Fatalf("%s: no applied request: %d %s", profile, resp.StatusCode, b)
		}
		return env.Data.Request
	}
	has := func(r map[string]any, path ...string) bool {
		var cur any = r
		for _, p := range path {
			m, ok := cur.(map[string]any)
			if !ok {
				return false
			}
			if cur, ok = m[p]; !ok {
				return false
			}
		}
		return true
	}
	for _, tc := range []struct {
		profile                 string
		review, actors, reasons bool
	}{
		{"full", true, true, true},
		{"review-only", true, false, false},
		{"neither", false, false, false},
	} {
		r := request(tc.profile)
		if got := has(r, "review"); got != tc.review {
			t.Errorf("%s: review shown %v, want %v: %v", tc.profile, got, tc.review, r)
		}
		if got := has(r, "submitterReference") || has(r, "applierReference"); got != tc.actors {
			t.Errorf("%s: actor references shown %v, want %v: %v", tc.profile, got, tc.actors, r)
		}
		if got := has(r, "application", "reason"); got != tc.reasons {
			t.Errorf("%s: reason shown %v, want %v: %v", tc.profile, got, tc.reasons, r["application"])
		}
		if !has(r, "application", "reasonPresent") {
			t.Errorf("%s: no reasonPresent: %v", tc.profile, r["application"])
		}
		if tc.actors && (r["submitterReference"] != "clerk-7" || r["applierReference"] != "clerk-8" || r["application"].(map[string]any)["reason"] != "checked") {
			t.Errorf("%s: %v", tc.profile, r)
		}
	}
}
