package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

type snapshotPage struct {
	historyPage
	Snapshot string `json:"snapshot"`
}

// snapshotAll reads every page of a snapshot read and returns its items as
// "id@revision:name:note" and the snapshot token of the first page.
func (c caller) snapshotAll(t *testing.T, path string) ([]string, string) {
	t.Helper()
	var out []string
	token := ""
	for {
		resp, b := c.do(t, "GET", path, "", "")
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		var p snapshotPage
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if token == "" {
			token = p.Snapshot
		} else if p.Snapshot != token {
			t.Fatalf("page of another snapshot: %s, want %s", p.Snapshot, token)
		}
		for _, it := range p.Items {
			out = append(out, fmt.Sprintf("%s@%s:%v:%v", it.RecordIdentifier, it.RevisionIdentifier, it.DomainData["name"], it.DomainData["note"]))
		}
		if p.PageInfo.NextCursor == nil {
			return out, token
		}
		path = strings.SplitN(path, "?", 2)[0] + "?$skiptoken=" + url.QueryEscape(*p.PageInfo.NextCursor)
	}
}

func TestSnapshotReadsOverHTTP(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"offices:write"}, Claims: map[string]string{"district": "north"}}, nil)
	dsn := storetest.NewDatabase(t)
	_, srv := serve(t, deployment(t, "testdata/snapshot", dsn, is.HostAuthentication()))
	clerk := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	type written struct{ loc, tag, snapshot string }
	mutation := func(resp_ int, b []byte, loc, tag string) written {
		t.Helper()
		var env struct {
			Data struct {
				Snapshot string `json:"snapshot"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &env); err != nil || !strings.HasPrefix(env.Data.Snapshot, "engine2_") {
			t.Fatalf("mutation: %d %s", resp_, b)
		}
		return written{loc, tag, env.Data.Snapshot}
	}
	create := func(data string) written {
		t.Helper()
		resp, b := clerk.do(t, "POST", "/v1/records/offices", "application/json", `{"data":`+data+`}`)
		if resp.StatusCode != 201 {
			t.Fatalf("create: %d %s", resp.StatusCode, b)
		}
		return mutation(resp.StatusCode, b, resp.Header.Get("Location"), resp.Header.Get("ETag"))
	}
	patch := func(w written, note string) written {
		t.Helper()
		resp, b := clerk.do(t, "PATCH", w.loc, "application/json-patch+json", `[{"op":"replace","path":"/data/note","value":"`+note+`"}]`, "If-Match", w.tag)
		if resp.StatusCode != 200 {
			t.Fatalf("patch: %d %s", resp.StatusCode, b)
		}
		return mutation(resp.StatusCode, b, w.loc, resp.Header.Get("ETag"))
	}

	// Before any write: an empty snapshot, with a token that stays empty.
	empty, emptyToken := clerk.snapshotAll(t, "/v1/records/offices:snapshot")
	if len(empty) != 0 || emptyToken == "" {
		t.Fatalf("empty snapshot: %v %q", empty, emptyToken)
	}

	a := create(`{"name":"A","district":"north","note":"a1"}`)
	afterA := a.snapshot
	b := create(`{"name":"B","district":"north"}`)
	a = patch(a, "a2")
	afterPatch := a.snapshot
	captured, token := clerk.snapshotAll(t, "/v1/records/offices:snapshot")
	if len(captured) != 2 || token == "" {
		t.Fatalf("captured: %v %q", captured, token)
	}

	// Later writes: a patch, a create, a tombstone, a batch.
	a = patch(a, "a3")
	c := create(`{"name":"C","district":"north"}`)
	if resp, body := clerk.do(t, "DELETE", b.loc, "", "", "If-Match", b.tag); resp.StatusCode != 200 {
		t.Fatalf("tombstone: %d %s", resp.StatusCode, body)
	}
	resp, body := clerk.do(t, "POST", "/v1/records/offices:batch", "application/json",
		`{"items":[{"operation":"create","data":{"name":"D","district":"north"}},{"operation":"create","data":{"name":"E","district":"north"}}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("batch: %d %s", resp.StatusCode, body)
	}
	var batch struct {
		Snapshot string `json:"snapshot"`
	}
	json.Unmarshal(body, &batch)

	reproduced, again := clerk.snapshotAll(t, "/v1/records/offices:snapshot?snapshot="+url.QueryEscape(token))
	if again != token || strings.Join(reproduced, "|") != strings.Join(captured, "|") {
		t.Fatalf("reproduced %v (%s), want %v (%s)", reproduced, again, captured, token)
	}
	if got, _ := clerk.snapshotAll(t, "/v1/records/offices:snapshot?snapshot="+url.QueryEscape(emptyToken)); len(got) != 0 {
		t.Fatalf("the empty snapshot reproduced as %v", got)
	}
	id := func(w written) string { return strings.TrimPrefix(w.loc, "/v1/records/offices/") }
	sorted := func(items ...string) string { sort.Strings(items); return strings.Join(items, "|") }
	for name, tc := range map[string]struct{ token, want string }{
		"after create A": {afterA, sorted(id(a) + "@1:A:a1")},
		"after patch":    {afterPatch, sorted(id(a)+"@2:A:a2", id(b)+"@1:B:<nil>")},
		"after C":        {c.snapshot, sorted(id(a)+"@3:A:a3", id(b)+"@1:B:<nil>", id(c)+"@1:C:<nil>")},
	} {
		got, tok := clerk.snapshotAll(t, "/v1/records/offices:snapshot?snapshot="+url.QueryEscape(tc.token))
		if tok != tc.token || strings.Join(got, "|") != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
	// The batch's token: B tombstoned is gone, D and E are there.
	got, _ := clerk.snapshotAll(t, "/v1/records/offices:snapshot?snapshot="+url.QueryEscape(batch.Snapshot))
	if len(got) != 4 || strings.Contains(strings.Join(got, "|"), ":B:") {
		t.Fatalf("after the batch: %v", got)
	}
	latest, _ := clerk.snapshotAll(t, "/v1/records/offices:snapshot")
	if strings.Join(latest, "|") != strings.Join(got, "|") {
		t.Fatalf("latest %v, want %v", latest, got)
	}

	// Paging: $top=1 through every page, $select kept by the cursor.
	paged, _ := clerk.snapshotAll(t, "/v1/records/offices:snapshot?$top=1&$select=name,note&snapshot="+url.QueryEscape(batch.Snapshot))
	if strings.Join(paged, "|") != strings.Join(got, "|") {
		t.Fatalf("paged %v, want %v", paged, got)
	}
	p := clerk.page(t, "/v1/records/offices:snapshot?$top=2&$select=name&snapshot="+url.QueryEscape(batch.Snapshot))
	if len(p.Items) != 2 || len(p.Items[0].DomainData) != 1 || p.PageInfo.NextCursor == nil {
		t.Fatalf("first page: %+v", p)
	}
	cur := url.QueryEscape(*p.PageInfo.NextCursor)
	for _, path := range []string{"/v1/records/terms:snapshot?$skiptoken=" + cur, "/v1/records/offices:snapshot?$skiptoken=x" + cur} {
		if resp, b := clerk.do(t, "GET", path, "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), "query.cursor_invalid") {
			t.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
	if resp, b := clerk.do(t, "GET", "/v1/records/offices:snapshot?$select=name&$skiptoken="+cur, "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), "query.invalid") {
		t.Errorf("cursor with options: %d %s", resp.StatusCode, b)
	}
	if resp, b := clerk.do(t, "GET", "/v1/records/offices:snapshot?$top=1&$skiptoken="+cur, "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), "query.invalid") {
		t.Errorf("cursor with $top: %d %s", resp.StatusCode, b)
	}

	// The caller's current row boundary, on every page, on the records'
	// current state: records of the snapshot outside it now are left out,
	// also when they leave it between pages; recorded values outside it
	// do not hide a record inside it now.
	if _, err := conn.Exec(context.Background(), `UPDATE registrum_data.e_office SET f_district = 'south' WHERE record_id = $1::uuid`, id(c)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), `UPDATE registrum.revisions SET data = jsonb_set(data, '{district}', '"south"') WHERE record_id = $1::uuid`, id(a)); err != nil {
		t.Fatal(err)
	}
	bounded, _ := clerk.snapshotAll(t, "/v1/records/offices:snapshot?$top=1&snapshot="+url.QueryEscape(batch.Snapshot))
	if len(bounded) != 3 || strings.Contains(strings.Join(bounded, "|"), ":C:") {
		t.Fatalf("bounded: %v", bounded)
	}
	p = clerk.page(t, "/v1/records/offices:snapshot?$top=1&snapshot="+url.QueryEscape(batch.Snapshot))
	if !strings.Contains(strings.Join(bounded, "|"), ":A:") {
		t.Fatalf("a record inside the boundary now, with recorded values outside it, is left out: %v", bounded)
	}
	second := strings.SplitN(bounded[1], "@", 2)[0]
	if _, err := conn.Exec(context.Background(), `UPDATE registrum_data.e_office SET f_district = 'south' WHERE record_id = $1::uuid`, second); err != nil {
		t.Fatal(err)
	}
	rest := clerk.page(t, "/v1/records/offices:snapshot?$skiptoken="+url.QueryEscape(*p.PageInfo.NextCursor))
	for _, it := range rest.Items {
		if it.RecordIdentifier == second {
			t.Fatalf("a record outside the current boundary on a later page: %+v", rest)
		}
	}

	// Refusals.
	for _, q := range []string{"?recordedAsOf=2024-01-01T00:00:00Z", "?validAt=2024-01-01", "?snapshot=engine1_x", "?snapshot=" + strings.ToUpper(token),
		"?snapshot=" + strings.Repeat("a", 4097), "?snapshot=" + url.QueryEscape(token) + "&snapshot=" + url.QueryEscape(token), "?$filter=district%20eq%20'north'", "?$orderby=name"} {
		if resp, b := clerk.do(t, "GET", "/v1/records/offices:snapshot"+q, "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), "query.invalid") {
			t.Errorf("offices:snapshot%s: %d %s", q, resp.StatusCode, b)
		}
	}
	for _, q := range []string{"?validAt=2024-01-01T00:00:00Z", "?validAt=2024-1-1", "?recordedAsOf=2024-01-01"} {
		if resp, b := clerk.do(t, "GET", "/v1/records/terms:snapshot"+q, "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), "query.invalid") {
			t.Errorf("terms:snapshot%s: %d %s", q, resp.StatusCode, b)
		}
	}
	for _, q := range []string{"?validAt=2024-01-01", "?validAt=2024-01-01T00:00:00%2B01:00"} {
		if resp, b := clerk.do(t, "GET", "/v1/records/shifts:snapshot"+q, "", ""); resp.StatusCode != 400 || !strings.Contains(string(b), "query.invalid") {
			t.Errorf("shifts:snapshot%s: %d %s", q, resp.StatusCode, b)
		}
	}
	// A well-formed token of another history, or one that sees
	// transactions not yet started: the history is unavailable.
	tag, snap, err := records.ParseSnapshotToken(token)
	if err != nil {
		t.Fatal(err)
	}
	other := tag
	other[0] ^= 0xff
	foreign, _ := records.SnapshotToken(other, snap)
	future, _ := records.SnapshotToken(tag, store.Snapshot{Xmin: snap.Xmax + 1000, Xmax: snap.Xmax + 1000})
	for name, tok := range map[string]string{"another history": foreign, "the future": future} {
		if resp, b := clerk.do(t, "GET", "/v1/records/offices:snapshot?snapshot="+url.QueryEscape(tok), "", ""); resp.StatusCode != 503 || !strings.Contains(string(b), "source.unavailable") {
			t.Errorf("a token of %s: %d %s", name, resp.StatusCode, b)
		}
	}
	// The 2-second database budget: a read blocked behind a lock on the
	// revisions answers 503 once the budget runs out.
	tx, err := conn.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), `LOCK TABLE registrum.revisions IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, body = clerk.do(t, "GET", "/v1/records/offices:snapshot?snapshot="+url.QueryEscape(token), "", "")
	if took := time.Since(start); resp.StatusCode != 503 || !strings.Contains(string(body), "source.unavailable") || took < 2*time.Second || took > 10*time.Second {
		t.Errorf("slow snapshot: %d after %s: %s", resp.StatusCode, took, body)
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, again := clerk.snapshotAll(t, "/v1/records/offices:snapshot?snapshot="+url.QueryEscape(token)); again != token {
		t.Fatalf("after the budget: %s", again)
	}

	// Without the snapshot operation, or without a token: the concealed 404.
	if resp, b := clerk.do(t, "GET", "/v1/records/offices:snapshot?accessProfile=reader", "", ""); resp.StatusCode != 404 || !strings.Contains(string(b), "resource.not_found") {
		t.Errorf("reader: %d %s", resp.StatusCode, b)
	}
	if resp, b := (caller{srv: srv}).do(t, "GET", "/v1/records/offices:snapshot?validAt=bad", "", ""); resp.StatusCode != 404 {
		t.Errorf("no token: %d %s", resp.StatusCode, b)
	}

	// validAt on temporal entities: date and timestamp start fields.
	for _, d := range []string{`{"label":"T1","starts":"2024-01-01","ends":"2024-02-01"}`, `{"label":"T2","starts":"2024-02-01"}`} {
		if resp, b := clerk.do(t, "POST", "/v1/records/terms", "application/json", `{"data":`+d+`}`); resp.StatusCode != 201 {
			t.Fatalf("create term: %d %s", resp.StatusCode, b)
		}
	}
	for _, d := range []string{`{"label":"S1","begins":"2024-01-01T10:00:00Z","finishes":"2024-01-01T12:00:00Z"}`, `{"label":"S2","begins":"2024-01-01T12:00:00Z"}`} {
		if resp, b := clerk.do(t, "POST", "/v1/records/shifts", "application/json", `{"data":`+d+`}`); resp.StatusCode != 201 {
			t.Fatalf("create shift: %d %s", resp.StatusCode, b)
		}
	}
	for path, want := range map[string]string{
		"/v1/records/terms:snapshot?validAt=2023-12-31":            "",
		"/v1/records/terms:snapshot?validAt=2024-01-31":            "T1",
		"/v1/records/terms:snapshot?validAt=2024-02-01":            "T2",
		"/v1/records/terms:snapshot":                               "T1,T2",
		"/v1/records/shifts:snapshot?validAt=2024-01-01T11:59:59Z": "S1",
		"/v1/records/shifts:snapshot?validAt=2024-01-01T12:00:00Z": "S2",
	} {
		var labels []string
		for _, it := range clerk.page(t, path).Items {
			labels = append(labels, fmt.Sprint(it.DomainData["label"]))
		}
		sort.Strings(labels)
		if got := strings.Join(labels, ","); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}

// A snapshot read answers 503 source.unavailable when the states it
// examines were written under more than 64 package revisions (originating
// schema descriptors), or when a stored value no longer matches the field
// metadata; at 64 it is served. Both hold whichever source a state is read
// from: a record's row, when the snapshot sees its writer (a fresh
// snapshot here), and its revisions otherwise (a token taken before the
// rows were written again).
func TestSnapshotUnavailableOverTooManyDescriptorsOrMismatchedMetadata(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"offices:write"}, Claims: map[string]string{"district": "north"}}, nil)
	dsn := storetest.NewDatabase(t)
	_, srv := serve(t, deployment(t, "testdata/snapshot", dsn, is.HostAuthentication()))
	clerk := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for i := range 65 {
		if resp, b := clerk.do(t, "POST", "/v1/records/offices", "application/json", fmt.Sprintf(`{"data":{"name":"O%d","district":"north"}}`, i)); resp.StatusCode != 201 {
			t.Fatalf("create: %d %s", resp.StatusCode, b)
		}
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	// The district's code list is checked by the database too: without
	// that check a row can hold a code the field no longer lists, as a
	// revision written under an earlier package can.
	exec(`DO $$ DECLARE c text; BEGIN
  FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = 'registrum_data.e_office'::regclass AND pg_get_constraintdef(oid) LIKE '%f_district%' LOOP
    EXECUTE format('ALTER TABLE registrum_data.e_office DROP CONSTRAINT %I', c);
  END LOOP; END $$`)
	const spread = `'sha256:' || lpad(((o.n - 1) % $1)::text, 64, '0')`
	revisionOrigins := func(n int) {
		t.Helper()
		exec(`UPDATE registrum.revisions r SET package_revision = `+spread+`
FROM (SELECT record_id, row_number() OVER (ORDER BY record_id) n FROM registrum.revisions WHERE entity_id = 'office') o WHERE o.record_id = r.record_id`, n)
	}
	rowOrigins := func(n int) {
		t.Helper()
		exec(`UPDATE registrum_data.e_office t SET package_revision = `+spread+`
FROM (SELECT record_id, row_number() OVER (ORDER BY record_id) n FROM registrum_data.e_office) o WHERE o.record_id = t.record_id`, n)
	}
	read := func(token string) (int, string) {
		t.Helper()
		path := "/v1/records/offices:snapshot?$top=100"
		if token != "" {
			path += "&snapshot=" + url.QueryEscape(token)
		}
		resp, b := clerk.do(t, "GET", path, "", "")
		return resp.StatusCode, string(b)
	}
	expect := func(what string, want int, token string) string {
		t.Helper()
		code, b := read(token)
		if code != want || (want == 503 && !strings.Contains(b, "source.unavailable")) {
			t.Fatalf("%s: %d %s", what, code, b)
		}
		return b
	}

	// From the rows (each read takes a fresh snapshot, which sees them).
	revisionOrigins(65) // not read: the rows are
	rowOrigins(64)
	expect("rows of 64 descriptors", 200, "")
	rowOrigins(65)
	expect("rows of 65 descriptors", 503, "")
	rowOrigins(1)
	revisionOrigins(1)
	expect("rows of one descriptor", 200, "")
	exec(`UPDATE registrum_data.e_office SET f_district = 'west' WHERE f_name = 'O7'`)
	expect("a row holding a code the field no longer lists", 503, "")
	exec(`UPDATE registrum_data.e_office SET f_district = 'north' WHERE f_name = 'O7'`)

	// From the revisions: a token taken before every row is written again
	// (with a note the revisions do not hold) does not see the rows.
	var page struct {
		Items    []struct{ DomainData map[string]any }
		Snapshot string
	}
	if err := json.Unmarshal([]byte(expect("a fresh snapshot", 200, "")), &page); err != nil || page.Snapshot == "" || len(page.Items) != 65 {
		t.Fatalf("page: %v %+v", err, page)
	}
	exec(`UPDATE registrum_data.e_office SET f_note = 'written after the token'`)
	var again struct {
		Items []struct{ DomainData map[string]any }
	}
	if err := json.Unmarshal([]byte(expect("the token, rows written since", 200, page.Snapshot)), &again); err != nil || len(again.Items) != 65 {
		t.Fatalf("page at the token: %v %+v", err, again)
	}
	for _, it := range again.Items {
		if it.DomainData["note"] != nil {
			t.Fatalf("the token's state shows a value written after it: %v", it.DomainData)
		}
	}
	rowOrigins(65) // not read: the revisions are
	revisionOrigins(64)
	expect("revisions of 64 descriptors", 200, page.Snapshot)
	revisionOrigins(65)
	expect("revisions of 65 descriptors", 503, page.Snapshot)
	revisionOrigins(1)
	expect("revisions of one descriptor", 200, page.Snapshot)
	exec(`UPDATE registrum.revisions SET data = jsonb_set(data, '{district}', '"west"') WHERE entity_id = 'office' AND data->>'name' = 'O7'`)
	expect("a revision holding a code the field no longer lists", 503, page.Snapshot)
}
