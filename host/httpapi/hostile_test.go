package httpapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/storetest"
)

// TestInvalidUnicodeInBodiesIsRefusedAtTheMember: invalid UTF-8 and
// unpaired surrogate escapes in create, patch and batch bodies are refused
// with 400 request.invalid naming the member and the cause; nothing is
// written, and nothing is stored with U+FFFD in its place.
func TestInvalidUnicodeInBodiesIsRefusedAtTheMember(t *testing.T) {
	e := newEnv(t)
	id, etag := e.create(t, `{"data":{"nationalId":"U-1","age":3}}`)
	cases := []struct {
		name, method, path, ctype, body, fieldPath, cause string
	}{
		{"create value", "POST", "/v1/records/children", "application/json", "{\"data\":{\"nationalId\":\"A\xff\"}}", "/data/nationalId", "invalid UTF-8"},
		{"create value after an escape", "POST", "/v1/records/children", "application/json", "{\"data\":{\"nationalId\":\"A\\n\xc3\"}}", "/data/nationalId", "invalid UTF-8"},
		{"create encoded surrogate", "POST", "/v1/records/children", "application/json", "{\"data\":{\"nationalId\":\"\xed\xa0\x80\"}}", "/data/nationalId", "invalid UTF-8"},
		{"create unpaired surrogate escape", "POST", "/v1/records/children", "application/json", `{"data":{"nationalId":"\ud800"}}`, "/data/nationalId", "surrogate"},
		{"create member name", "POST", "/v1/records/children", "application/json", "{\"data\":{\"nationalId\":\"A\",\"a\xffe\":3}}", "/data", "invalid UTF-8"},
		{"patch value", "PATCH", "/v1/records/children/" + id, patchType, "[{\"op\":\"replace\",\"path\":\"/data/nationalId\",\"value\":\"B\xfe\"}]", "/0/value", "invalid UTF-8"},
		{"patch path", "PATCH", "/v1/records/children/" + id, patchType, "[{\"op\":\"replace\",\"path\":\"/data/\xffx\",\"value\":\"B\"}]", "/0/path", "invalid UTF-8"},
		{"batch item value", "POST", "/v1/records/children:batch", "application/json", "{\"items\":[{\"operation\":\"create\",\"data\":{\"nationalId\":\"C\"}},{\"operation\":\"create\",\"data\":{\"nationalId\":\"D\x80\"}}]}", "/items/1/data/nationalId", "invalid UTF-8"},
		{"batch change context", "POST", "/v1/records/children:batch", "application/json", "{\"items\":[{\"operation\":\"create\",\"data\":{\"nationalId\":\"E\"}}],\"changeContext\":{\"kind\":\"correction\",\"reasonCode\":\"t\xffypo\"}}", "/changeContext/reasonCode", "invalid UTF-8"},
	}
	before1, before2, before3 := e.rows(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := e.do(t, c.method, c.path, c.ctype, c.body, "If-Match", etag)
			p := problemOf(t, resp, body, 400, "request.invalid")
			if p["fieldPath"] != c.fieldPath {
				t.Errorf("fieldPath = %v, want %q", p["fieldPath"], c.fieldPath)
			}
			if d := fmt.Sprint(p["detail"]); !strings.Contains(d, c.cause) {
				t.Errorf("detail %q does not name the cause %q", d, c.cause)
			}
		})
	}
	if a, b, c := e.rows(t); a != before1 || b != before2 || c != before3 {
		t.Fatalf("refused writes changed the tables: %d/%d/%d -> %d/%d/%d", before1, before2, before3, a, b, c)
	}
	var replaced int
	e.pool.QueryRow(t.Context(), "select count(*) from registrum.revisions where strpos(data::text, U&'\\FFFD') > 0").Scan(&replaced)
	if replaced != 0 {
		t.Fatalf("%d revisions hold U+FFFD", replaced)
	}
}

// temporalPackage serves one temporal entity whose validity intervals may
// not overlap per holder, with date (placements) and timestamp (shifts)
// bounds.
func temporalPackage(t *testing.T) *model.Package {
	entity := func(id, route string, typ model.FieldType) *model.Entity {
		return &model.Entity{
			ID: id, Route: route, Dataset: route, MutationMode: model.Mutable,
			Batch:    &model.Batch{MaximumItems: 3, MaximumBytes: 4096},
			Temporal: &model.Temporal{StartField: "from", EndField: "to", Type: typ},
			Fields: []*model.Field{
				{ID: "holder", APIName: "holder", Type: model.TypeString, Required: true, MaxLength: intp(20)},
				{ID: "from", APIName: "validFrom", Type: typ, Required: true},
				{ID: "to", APIName: "validTo", Type: typ},
			},
			Constraints: []*model.Constraint{{ID: "no-overlap", Kind: model.ConstraintTemporalNonOverlap, ScopeFields: []string{"holder"}}},
		}
	}
	p := &model.Package{
		Format: model.Format,
		Registry: model.Registry{ID: "demo", URLs: model.URLs{
			Profile:         "https://registry.example/profiles/record/v1",
			Context:         "https://registry.example/contexts/record/v1.jsonld",
			ProblemTypeBase: "https://registry.example/problems",
		}},
		Entities: []*model.Entity{
			entity("placement", "placements", model.TypeDate),
			entity("shift", "shifts", model.TypeTimestamp),
		},
	}
	return storetest.Complete(t, p)
}

// TestEmptyOrReversedIntervalsAreRefusedAtTheEnd: a temporal write whose
// end is before its start, or equal to it (intervals include the start and
// exclude the end, so [s, s) holds no instant), is refused with 400
// request.invalid at the end field, never a 500 from the database's range
// check; create, patch and batch alike. An open end and a later end are
// accepted.
func TestEmptyOrReversedIntervalsAreRefusedAtTheEnd(t *testing.T) {
	e := newEnvFor(t, temporalPackage(t))
	create := func(route, body string) (string, string) {
		t.Helper()
		resp, b := e.do(t, "POST", "/v1/records/"+route, "application/json", body)
		if resp.StatusCode != 201 {
			t.Fatalf("create %s: %d %s", body, resp.StatusCode, b)
		}
		data, _ := domain(t, b)
		id, _ := data["recordIdentifier"].(string)
		return id, resp.Header.Get("ETag")
	}
	pid, ptag := create("placements", `{"data":{"holder":"h1","validFrom":"2026-01-01","validTo":"2026-02-01"}}`)
	create("placements", `{"data":{"holder":"h2","validFrom":"2026-01-01"}}`)
	sid, stag := create("shifts", `{"data":{"holder":"h1","validFrom":"2026-01-01T08:00:00Z","validTo":"2026-01-01T16:00:00Z"}}`)

	cases := []struct {
		name, method, path, ctype, body, etag, fieldPath string
	}{
		{"create reversed dates", "POST", "/v1/records/placements", "application/json", `{"data":{"holder":"h3","validFrom":"2026-03-01","validTo":"2026-02-01"}}`, "", "/data/validTo"},
		{"create empty dates", "POST", "/v1/records/placements", "application/json", `{"data":{"holder":"h3","validFrom":"2026-03-01","validTo":"2026-03-01"}}`, "", "/data/validTo"},
		{"create reversed timestamps", "POST", "/v1/records/shifts", "application/json", `{"data":{"holder":"h3","validFrom":"2026-01-01T08:00:00Z","validTo":"2026-01-01T07:59:59.999999Z"}}`, "", "/data/validTo"},
		{"create empty timestamps in other zones", "POST", "/v1/records/shifts", "application/json", `{"data":{"holder":"h3","validFrom":"2026-01-01T08:00:00Z","validTo":"2026-01-01T10:00:00+02:00"}}`, "", "/data/validTo"},
		{"patch the end before the start", "PATCH", "/v1/records/placements/" + pid, patchType, `[{"op":"replace","path":"/data/validTo","value":"2025-12-31"}]`, ptag, "/data/validTo"},
		{"patch the start onto the end", "PATCH", "/v1/records/placements/" + pid, patchType, `[{"op":"replace","path":"/data/validFrom","value":"2026-02-01"}]`, ptag, "/data/validTo"},
		{"patch timestamps", "PATCH", "/v1/records/shifts/" + sid, patchType, `[{"op":"replace","path":"/data/validTo","value":"2026-01-01T08:00:00Z"}]`, stag, "/data/validTo"},
		{"batch create", "POST", "/v1/records/placements:batch", "application/json", `{"items":[{"operation":"create","data":{"holder":"h4","validFrom":"2026-01-01"}},{"operation":"create","data":{"holder":"h5","validFrom":"2026-05-01","validTo":"2026-04-01"}}]}`, "", "/items/1/data/validTo"},
		{"batch patch", "POST", "/v1/records/placements:batch", "application/json", `{"items":[{"operation":"patch","id":"` + pid + `","ifMatch":` + jsonString(ptag) + `,"patch":[{"op":"replace","path":"/data/validTo","value":"2026-01-01"}]}]}`, "", "/items/0/data/validTo"},
	}
	var before int
	e.pool.QueryRow(t.Context(), "select count(*) from registrum.revisions").Scan(&before)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var hdr []string
			if c.etag != "" {
				hdr = []string{"If-Match", c.etag}
			}
			resp, body := e.do(t, c.method, c.path, c.ctype, c.body, hdr...)
			p := problemOf(t, resp, body, 400, "request.invalid")
			if p["fieldPath"] != c.fieldPath {
				t.Errorf("fieldPath = %v, want %q", p["fieldPath"], c.fieldPath)
			}
			if d := fmt.Sprint(p["detail"]); !strings.Contains(d, "validTo must be after validFrom") {
				t.Errorf("detail %q", d)
			}
		})
	}
	var after int
	e.pool.QueryRow(t.Context(), "select count(*) from registrum.revisions").Scan(&after)
	if after != before {
		t.Fatalf("refused writes added %d revisions", after-before)
	}
	// A later end and an open end are accepted.
	resp, b := e.do(t, "PATCH", "/v1/records/placements/"+pid, patchType, `[{"op":"replace","path":"/data/validTo","value":"2026-01-02"}]`, "If-Match", ptag)
	if resp.StatusCode != 200 {
		t.Fatalf("a one-day interval was refused: %d %s", resp.StatusCode, b)
	}
	resp, b = e.do(t, "PATCH", "/v1/records/shifts/"+sid, patchType, `[{"op":"remove","path":"/data/validTo"}]`, "If-Match", stag)
	if resp.StatusCode != 200 {
		t.Fatalf("an open end was refused: %d %s", resp.StatusCode, b)
	}
}
