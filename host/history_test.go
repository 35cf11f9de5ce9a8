package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

type historyPage struct {
	Items []struct {
		RecordIdentifier   string          `json:"recordIdentifier"`
		RevisionIdentifier string          `json:"revisionIdentifier"`
		DomainData         map[string]any  `json:"domainData"`
		Tombstoned         bool            `json:"tombstoned"`
		ChangeContext      json.RawMessage `json:"changeContext"`
	} `json:"items"`
	PageInfo struct {
		NextCursor *string `json:"nextCursor"`
	} `json:"pageInfo"`
}

func (c caller) page(t *testing.T, path string) historyPage {
	t.Helper()
	resp, b := c.do(t, "GET", path, "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	var p historyPage
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("GET %s: %v %s", path, err, b)
	}
	return p
}

func (c caller) labels(t *testing.T, path string) string {
	t.Helper()
	var out []string
	for _, it := range c.page(t, path).Items {
		out = append(out, fmt.Sprint(it.DomainData["label"]))
	}
	return strings.Join(out, ",")
}

func TestHistoryReadsOverHTTP(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"offices:write"}, Claims: map[string]string{"district": "north"}}, nil)
	dsn := storetest.NewDatabase(t)
	_, srv := serve(t, deployment(t, "testdata/history", dsn, is.HostAuthentication()))
	clerk := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	create := func(route, data string) (string, string) {
		t.Helper()
		resp, b := clerk.do(t, "POST", "/v1/records/"+route, "application/json", `{"data":`+data+`}`)
		if resp.StatusCode != 201 {
			t.Fatalf("create %s: %d %s", route, resp.StatusCode, b)
		}
		return resp.Header.Get("Location"), resp.Header.Get("ETag")
	}
	patch := func(loc, tag, note string) string {
		t.Helper()
		resp, b := clerk.do(t, "PATCH", loc, "application/json-patch+json", `[{"op":"replace","path":"/data/note","value":"`+note+`"}]`, "If-Match", tag)
		if resp.StatusCode != 200 {
			t.Fatalf("patch: %d %s", resp.StatusCode, b)
		}
		return resp.Header.Get("ETag")
	}

	// A patched, then tombstoned record: every revision stays readable.
	loc, tag := create("offices", `{"name":"N1","district":"north"}`)
	tag = patch(loc, tag, "first")
	tag = patch(loc, tag, "second")
	if resp, b := clerk.do(t, "DELETE", loc, "", "", "If-Match", tag); resp.StatusCode != 200 {
		t.Fatalf("tombstone: %d %s", resp.StatusCode, b)
	}
	if resp, _ := clerk.do(t, "GET", loc, "", ""); resp.StatusCode != 404 {
		t.Fatalf("a tombstoned record is read live: %d", resp.StatusCode)
	}
	p := clerk.page(t, loc+"/revisions")
	if len(p.Items) != 4 || p.PageInfo.NextCursor != nil {
		t.Fatalf("revisions: %+v", p)
	}
	if p.Items[0].DomainData["note"] != nil || p.Items[1].DomainData["note"] != "first" || p.Items[2].DomainData["note"] != "second" ||
		!p.Items[3].Tombstoned || p.Items[2].Tombstoned || p.Items[3].RevisionIdentifier != "4" || p.Items[0].DomainData["name"] != "N1" {
		t.Fatalf("revisions: %+v", p)
	}
	// Narrowing: $select, and the readable fields of another profile.
	p = clerk.page(t, loc+"/revisions?$select=note")
	if len(p.Items[1].DomainData) != 1 || p.Items[1].DomainData["note"] != "first" {
		t.Fatalf("$select: %+v", p.Items[1])
	}
	p = clerk.page(t, loc+"/revisions?accessProfile=reader")
	if len(p.Items[2].DomainData) != 1 || p.Items[2].DomainData["name"] != "N1" {
		t.Fatalf("reader: %+v", p.Items[2])
	}
	resp, b := clerk.do(t, "GET", loc+"/revisions/2?$select=note", "", "")
	var env struct {
		Data struct {
			RevisionIdentifier string         `json:"revisionIdentifier"`
			DomainData         map[string]any `json:"domainData"`
		} `json:"data"`
	}
	json.Unmarshal(b, &env)
	if resp.StatusCode != 200 || env.Data.RevisionIdentifier != "2" || len(env.Data.DomainData) != 1 || env.Data.DomainData["note"] != "first" {
		t.Fatalf("revision 2: %d %s", resp.StatusCode, b)
	}
	if resp, b := clerk.do(t, "GET", loc+"/revisions/4", "", ""); resp.StatusCode != 200 || !strings.Contains(string(b), `"tombstoned":true`) {
		t.Fatalf("tombstone revision: %d %s", resp.StatusCode, b)
	}
	for _, path := range []string{loc + "/revisions/5", loc + "/revisions/0", loc + "/revisions/02", loc + "/revisions/x"} {
		if resp, b := clerk.do(t, "GET", path, "", ""); resp.StatusCode != 404 || !strings.Contains(string(b), "resource.not_found") {
			t.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
	for _, q := range []string{"?$select=nowhere", "?$filter=district eq 'north'", "?$top=101", "?$top=0"} {
		if resp, b := clerk.do(t, "GET", loc+"/revisions"+strings.ReplaceAll(q, " ", "%20"), "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), "query.invalid") {
			t.Errorf("revisions%s: %d %s", q, resp.StatusCode, b)
		}
	}

	// The current row boundary: a record now outside it has no readable history.
	if _, err := conn.Exec(context.Background(), `UPDATE registrum_data.e_office SET f_district = 'south' WHERE record_id = $1::uuid`, strings.TrimPrefix(loc, "/v1/records/offices/")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{loc + "/revisions", loc + "/revisions/1"} {
		if resp, b := clerk.do(t, "GET", path, "", ""); resp.StatusCode != 404 {
			t.Errorf("%s outside the boundary: %d %s", path, resp.StatusCode, b)
		}
	}

	// Paging past 100 revisions with the sealed cursor.
	loc2, tag2 := create("offices", `{"name":"N2","district":"north"}`)
	for i := range 104 {
		tag2 = patch(loc2, tag2, fmt.Sprint("n", i))
	}
	p = clerk.page(t, loc2+"/revisions?$select=note")
	if len(p.Items) != 100 || p.PageInfo.NextCursor == nil || p.Items[99].RevisionIdentifier != "100" {
		t.Fatalf("first page: %d items", len(p.Items))
	}
	cur := *p.PageInfo.NextCursor
	p = clerk.page(t, loc2+"/revisions?$skiptoken="+url.QueryEscape(cur))
	if len(p.Items) != 5 || p.PageInfo.NextCursor != nil || p.Items[0].RevisionIdentifier != "101" || len(p.Items[0].DomainData) != 1 || p.Items[4].DomainData["note"] != "n103" {
		t.Fatalf("second page: %+v", p)
	}
	if resp, b := clerk.do(t, "GET", loc+"/revisions?$skiptoken="+url.QueryEscape(cur), "", ""); resp.StatusCode != 404 && resp.StatusCode != 400 {
		t.Errorf("cursor of another record: %d %s", resp.StatusCode, b)
	}
	loc3, _ := create("offices", `{"name":"N3","district":"north"}`)
	if resp, b := clerk.do(t, "GET", loc3+"/revisions?$skiptoken="+url.QueryEscape(cur), "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), "query.cursor_invalid") {
		t.Errorf("cursor of another record: %d %s", resp.StatusCode, b)
	}
	if resp, b := clerk.do(t, "GET", loc2+"/revisions?accessProfile=reader&$skiptoken="+url.QueryEscape(cur), "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), "query.cursor_invalid") {
		t.Errorf("cursor of another profile: %d %s", resp.StatusCode, b)
	}
	if resp, b := clerk.do(t, "GET", loc2+"/revisions?$select=note&$skiptoken="+url.QueryEscape(cur), "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), "query.invalid") {
		t.Errorf("cursor with options: %d %s", resp.StatusCode, b)
	}
	// A cursor comes alone: $top beside it is refused, not ignored.
	if resp, b := clerk.do(t, "GET", loc2+"/revisions?$top=2&$skiptoken="+url.QueryEscape(cur), "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), "query.invalid") {
		t.Errorf("cursor with $top: %d %s", resp.StatusCode, b)
	}
	// Paging options are judged after the grant: without a token the
	// refusal is the concealed 404, with a rejected token the 401.
	forged := caller{srv: srv, token: clerk.token[:len(clerk.token)-4] + "AAAA"}
	for _, q := range []string{"?$top=x", "?$top=1&$top=2", "?$skiptoken=a&$skiptoken=b", "?$skiptoken="} {
		if resp, b := (caller{srv: srv}).do(t, "GET", loc2+"/revisions"+q, "", ""); resp.StatusCode != 404 || !strings.Contains(string(b), "resource.not_found") {
			t.Errorf("revisions%s without a token: %d %s", q, resp.StatusCode, b)
		}
		if resp, b := forged.do(t, "GET", loc2+"/revisions"+q, "", ""); resp.StatusCode != 401 || !strings.Contains(string(b), "authentication.refused") {
			t.Errorf("revisions%s with a rejected token: %d %s", q, resp.StatusCode, b)
		}
	}
	p = clerk.page(t, loc2+"/revisions?$top=2")
	p = clerk.page(t, loc2+"/revisions?$skiptoken="+url.QueryEscape(*p.PageInfo.NextCursor))
	if len(p.Items) != 2 || p.Items[0].RevisionIdentifier != "3" || p.PageInfo.NextCursor == nil {
		t.Fatalf("$top=2 second page: %+v", p)
	}

	// Correction context: listed members only, while every revision of the
	// batch is visible.
	resp, b = clerk.do(t, "POST", "/v1/records/offices:batch", "application/json",
		`{"items":[{"operation":"create","data":{"name":"B1","district":"north"}},{"operation":"create","data":{"name":"B2","district":"north"}}],`+
			`"changeContext":{"kind":"correction","reasonCode":"typo","reasonText":"private reasoning"}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("batch: %d %s", resp.StatusCode, b)
	}
	ids := map[string]string{}
	for _, it := range clerk.page(t, "/v1/records/offices?$filter=district%20eq%20'north'").Items {
		ids[fmt.Sprint(it.DomainData["name"])] = it.RecordIdentifier
	}
	b1 := "/v1/records/offices/" + ids["B1"]
	p = clerk.page(t, b1+"/revisions")
	if string(p.Items[0].ChangeContext) != `{"kind":"correction","reasonCode":"typo"}` {
		t.Fatalf("change context: %s", p.Items[0].ChangeContext)
	}
	if _, b := clerk.do(t, "GET", b1+"/revisions/1", "", ""); !strings.Contains(string(b), `"changeContext":{"kind":"correction","reasonCode":"typo"}`) || strings.Contains(string(b), "private") {
		t.Fatalf("change context of one revision: %s", b)
	}
	if p := clerk.page(t, b1+"/revisions?accessProfile=reader"); p.Items[0].ChangeContext != nil {
		t.Fatalf("a grant without provenanceFields shows %s", p.Items[0].ChangeContext)
	}
	if p := clerk.page(t, loc2+"/revisions?$top=1"); p.Items[0].ChangeContext != nil {
		t.Fatalf("a write without change context shows %s", p.Items[0].ChangeContext)
	}
	if _, err := conn.Exec(context.Background(), `UPDATE registrum_data.e_office SET f_district = 'south' WHERE record_id = $1::uuid`, ids["B2"]); err != nil {
		t.Fatal(err)
	}
	if p := clerk.page(t, b1+"/revisions"); p.Items[0].ChangeContext != nil {
		t.Fatalf("change context with a batch member out of sight: %s", p.Items[0].ChangeContext)
	}
	if _, b := clerk.do(t, "GET", b1+"/revisions/1", "", ""); strings.Contains(string(b), "changeContext") {
		t.Fatalf("change context with a batch member out of sight: %s", b)
	}

	// :current and :as-of: start included, end excluded, null end open.
	create("terms", `{"label":"T1","starts":"2024-01-01","ends":"2024-02-01"}`)
	create("terms", `{"label":"T2","starts":"2024-02-01"}`)
	create("terms", `{"label":"T3","starts":"2024-01-15"}`)
	create("terms", `{"label":"T4","starts":"2999-01-01"}`)
	asOf := func(route string, cases map[string]string) {
		t.Helper()
		for at, want := range cases {
			if got := clerk.labels(t, "/v1/records/"+route+":as-of?$orderby=label&asOf="+url.QueryEscape(at)); got != want {
				t.Errorf("%s as of %s: %q, want %q", route, at, got, want)
			}
		}
	}
	asOf("terms", map[string]string{
		"2023-12-31T23:59:59Z": "",
		"2024-01-01T00:00:00Z": "T1",
		"2024-01-31T23:59:59Z": "T1,T3",
		"2024-02-01T00:00:00Z": "T2,T3",
		"2030-06-01T12:00:00Z": "T2,T3",
	})
	if got := clerk.labels(t, "/v1/records/terms:current?$orderby=label"); got != "T2,T3" {
		t.Errorf("current terms: %q", got)
	}
	create("shifts", `{"label":"S1","begins":"2024-01-01T10:00:00Z","finishes":"2024-01-01T12:00:00Z"}`)
	create("shifts", `{"label":"S2","begins":"2024-01-01T12:00:00Z"}`)
	asOf("shifts", map[string]string{
		"2024-01-01T09:59:59.999999Z": "",
		"2024-01-01T10:00:00Z":        "S1",
		"2024-01-01T11:59:59.999Z":    "S1",
		"2024-01-01T12:00:00Z":        "S2",
		"2024-01-01T12:00:00+00:00":   "S2",
	})
	if got := clerk.labels(t, "/v1/records/shifts:current"); got != "S2" {
		t.Errorf("current shifts: %q", got)
	}
	// Paging with $top, $select and the cursor, which carries its asOf
	// (TestAsOfCursorIsFollowedAlone holds the rest).
	p = clerk.page(t, "/v1/records/terms:as-of?asOf=2024-03-01T00:00:00Z&$orderby=label&$top=1&$select=label")
	if len(p.Items) != 1 || p.Items[0].DomainData["label"] != "T2" || len(p.Items[0].DomainData) != 1 || p.PageInfo.NextCursor == nil {
		t.Fatalf("as-of first page: %+v", p)
	}
	next := url.QueryEscape(*p.PageInfo.NextCursor)
	p = clerk.page(t, "/v1/records/terms:as-of?$skiptoken="+next)
	if len(p.Items) != 1 || p.Items[0].DomainData["label"] != "T3" || p.PageInfo.NextCursor != nil {
		t.Fatalf("as-of second page: %+v", p)
	}
	for _, path := range []string{"/v1/records/terms?$skiptoken=" + next, "/v1/records/terms:current?$skiptoken=" + next} {
		if resp, b := clerk.do(t, "GET", path, "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), "query.cursor_invalid") {
			t.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
	}

	// Refusals: unknown paths on a non-temporal entity, bad asOf.
	for _, path := range []string{"/v1/records/offices:current", "/v1/records/offices:as-of?asOf=2024-01-01T00:00:00Z"} {
		if resp, b := clerk.do(t, "GET", path, "", ""); resp.StatusCode != 404 || !strings.Contains(string(b), "resource.not_found") {
			t.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
	for _, q := range []string{"", "?asOf=", "?asOf=2024-01-01", "?asOf=2024-01-01T00:00:00%2B01:00", "?asOf=yesterday", "?asOf=2024-01-01T00:00:00"} {
		if resp, b := clerk.do(t, "GET", "/v1/records/terms:as-of"+q, "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), "query.invalid") {
			t.Errorf("as-of%s: %d %s", q, resp.StatusCode, b)
		}
	}
	if resp, b := (caller{srv: srv}).do(t, "GET", "/v1/records/terms:as-of?asOf=bad", "", ""); resp.StatusCode != 404 {
		t.Errorf("as-of without a token: %d %s", resp.StatusCode, b)
	}
}
