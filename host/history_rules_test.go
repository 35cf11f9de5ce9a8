package host_test

import (
	"context"
	"encoding/json"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// TestHistoryRoutesJudgeRowBoundariesOnTheCurrentState holds the one row
// boundary rule of every history read (docs/decisions/snapshot-reads.md):
// the caller's current boundaries are evaluated on each record's current
// state. A record moved out of the caller's boundary is hidden from GET,
// the list, /revisions, :current, :as-of and :snapshot alike, also through
// a snapshot token taken while it was inside; a record whose past values
// lay outside but whose current state is inside is shown by all of them.
func TestHistoryRoutesJudgeRowBoundariesOnTheCurrentState(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"offices:write"}, Claims: map[string]string{"district": "north"}}, nil)
	dsn := storetest.NewDatabase(t)
	_, srv := serve(t, deployment(t, "testdata/historyrules", dsn, is.HostAuthentication()))
	clerk := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	ids := map[string]string{}
	token := ""
	for _, label := range []string{"P1", "P2", "P3"} {
		resp, b := clerk.do(t, "POST", "/v1/records/postings", "application/json", `{"data":{"label":"`+label+`","district":"north","starts":"2024-01-01"}}`)
		if resp.StatusCode != 201 {
			t.Fatalf("create %s: %d %s", label, resp.StatusCode, b)
		}
		var env struct {
			Data struct {
				RecordIdentifier string `json:"recordIdentifier"`
				Snapshot         string `json:"snapshot"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatal(err)
		}
		ids[label], token = env.Data.RecordIdentifier, env.Data.Snapshot
	}
	snapshotLabels := func(path string) string {
		t.Helper()
		var out []string
		for _, it := range clerk.page(t, path).Items {
			out = append(out, it.DomainData["label"].(string))
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	at := url.QueryEscape(token)
	if got := snapshotLabels("/v1/records/postings:snapshot?snapshot=" + at); got != "P1,P2,P3" {
		t.Fatalf("snapshot before the move: %q", got)
	}

	// P2 leaves the caller's boundary now; P1's recorded first revision
	// lay outside it, its current state is inside.
	if _, err := conn.Exec(ctx, `UPDATE registrum_data.e_posting SET f_district = 'south' WHERE record_id = $1::uuid`, ids["P2"]); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE registrum.revisions SET data = jsonb_set(data, '{district}', '"south"') WHERE record_id = $1::uuid`, ids["P1"]); err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{"/v1/records/postings/" + ids["P2"], "/v1/records/postings/" + ids["P2"] + "/revisions", "/v1/records/postings/" + ids["P2"] + "/revisions/1"} {
		if resp, b := clerk.do(t, "GET", path, "", ""); resp.StatusCode != 404 || !strings.Contains(string(b), "resource.not_found") {
			t.Errorf("%s, outside the boundary now: %d %s", path, resp.StatusCode, b)
		}
	}
	for _, path := range []string{"/v1/records/postings/" + ids["P1"], "/v1/records/postings/" + ids["P1"] + "/revisions", "/v1/records/postings/" + ids["P1"] + "/revisions/1"} {
		if resp, b := clerk.do(t, "GET", path, "", ""); resp.StatusCode != 200 {
			t.Errorf("%s, inside the boundary now: %d %s", path, resp.StatusCode, b)
		}
	}
	for _, path := range []string{"/v1/records/postings?$orderby=label", "/v1/records/postings:current?$orderby=label",
		"/v1/records/postings:as-of?$orderby=label&asOf=2024-06-01T00:00:00Z"} {
		if got := clerk.labels(t, path); got != "P1,P3" {
			t.Errorf("%s: %q, want P1,P3", path, got)
		}
	}
	for _, path := range []string{"/v1/records/postings:snapshot?snapshot=" + at, "/v1/records/postings:snapshot", "/v1/records/postings:snapshot?validAt=2024-06-01&snapshot=" + at} {
		if got := snapshotLabels(path); got != "P1,P3" {
			t.Errorf("%s: %q, want P1,P3", path, got)
		}
	}
	// Also when the record leaves the boundary between two pages.
	p := clerk.page(t, "/v1/records/postings:snapshot?$top=1&snapshot="+at)
	if p.PageInfo.NextCursor == nil {
		t.Fatalf("first snapshot page: %+v", p)
	}
	if _, err := conn.Exec(ctx, `UPDATE registrum_data.e_posting SET f_district = 'south' WHERE record_id = ANY($1::uuid[])`, []string{ids["P1"], ids["P3"]}); err != nil {
		t.Fatal(err)
	}
	if rest := clerk.page(t, "/v1/records/postings:snapshot?$skiptoken="+url.QueryEscape(*p.PageInfo.NextCursor)); len(rest.Items) != 0 {
		t.Errorf("records outside the boundary on a later page: %+v", rest.Items)
	}
}

// TestAsOfCursorIsFollowedAlone holds that an :as-of cursor carries its
// instant: the next page is asked for with the cursor and accessProfile
// only, asOf beside a cursor is refused like any other option, and a
// cursor of another read is not one of :as-of.
func TestAsOfCursorIsFollowedAlone(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"offices:write"}, Claims: map[string]string{"district": "north"}}, nil)
	dsn := storetest.NewDatabase(t)
	_, srv := serve(t, deployment(t, "testdata/history", dsn, is.HostAuthentication()))
	clerk := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	for _, term := range []string{`{"label":"T1","starts":"2024-01-01","ends":"2024-02-01"}`, `{"label":"T2","starts":"2024-02-01"}`,
		`{"label":"T3","starts":"2024-01-15"}`, `{"label":"T4","starts":"2024-02-15"}`, `{"label":"T5","starts":"2999-01-01"}`} {
		if resp, b := clerk.do(t, "POST", "/v1/records/terms", "application/json", `{"data":`+term+`}`); resp.StatusCode != 201 {
			t.Fatalf("create: %d %s", resp.StatusCode, b)
		}
	}
	// As of 2024-01-20: T1 and T3, one a page. As of 2024-03-01 (what a
	// cursor following the wrong instant would show): T2, T3, T4.
	p := clerk.page(t, "/v1/records/terms:as-of?asOf=2024-01-20T00:00:00Z&$orderby=label&$top=1&$select=label")
	if len(p.Items) != 1 || p.Items[0].DomainData["label"] != "T1" || p.PageInfo.NextCursor == nil {
		t.Fatalf("first page: %+v", p)
	}
	next := url.QueryEscape(*p.PageInfo.NextCursor)
	for _, path := range []string{"/v1/records/terms:as-of?$skiptoken=" + next, "/v1/records/terms:as-of?accessProfile=clerk&$skiptoken=" + next} {
		p2 := clerk.page(t, path)
		if len(p2.Items) != 1 || p2.Items[0].DomainData["label"] != "T3" || len(p2.Items[0].DomainData) != 1 || p2.PageInfo.NextCursor != nil {
			t.Fatalf("%s: %+v", path, p2)
		}
	}
	// asOf beside the cursor, the same instant, another, empty or twice: a
	// cursor is sent alone.
	for _, at := range []string{"2024-01-20T00:00:00Z", "2024-03-01T00:00:00Z", "", "2024-01-20T00:00:00Z&asOf=2024-01-20T00:00:00Z"} {
		path := "/v1/records/terms:as-of?asOf=" + at + "&$skiptoken=" + next
		if resp, b := clerk.do(t, "GET", path, "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), `"query.invalid"`) {
			t.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
	// asOf twice on a first page is refused, not read as absent.
	if resp, b := clerk.do(t, "GET", "/v1/records/terms:as-of?asOf=2024-01-20T00:00:00Z&asOf=2024-03-01T00:00:00Z", "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), `"query.invalid"`) {
		t.Errorf("asOf twice: %d %s", resp.StatusCode, b)
	}
	// A cursor is bound to its read: the :as-of cursor elsewhere, and the
	// cursors of :current and the plain list at :as-of.
	for _, path := range []string{"/v1/records/terms?$skiptoken=" + next, "/v1/records/terms:current?$skiptoken=" + next, "/v1/records/terms:as-of?$skiptoken=x" + next} {
		if resp, b := clerk.do(t, "GET", path, "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), "query.cursor_invalid") {
			t.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
	for _, first := range []string{"/v1/records/terms?$orderby=label&$top=1", "/v1/records/terms:current?$orderby=label&$top=1"} {
		p := clerk.page(t, first)
		if p.PageInfo.NextCursor == nil {
			t.Fatalf("%s: no next page", first)
		}
		path := "/v1/records/terms:as-of?$skiptoken=" + url.QueryEscape(*p.PageInfo.NextCursor)
		if resp, b := clerk.do(t, "GET", path, "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), "query.cursor_invalid") {
			t.Errorf("a cursor of %s at :as-of: %d %s", first, resp.StatusCode, b)
		}
	}
	// Without a token, the concealed 404 whatever the cursor.
	if resp, b := (caller{srv: srv}).do(t, "GET", "/v1/records/terms:as-of?$skiptoken="+next, "", ""); resp.StatusCode != 404 {
		t.Errorf("as-of cursor without a token: %d %s", resp.StatusCode, b)
	}
}
