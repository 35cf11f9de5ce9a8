package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/host"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

// historyEnv serves testdata/requesthistory with two principals.
type historyEnv struct {
	owner, colleague caller
	dsn              string
	host             *host.Host
}

func startHistory(t *testing.T) historyEnv {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}}, addClient(t, `"families:write"`))
	is.Setup.Clients = append(is.Setup.Clients, issuertest.DevClient{ID: "colleague", Profile: "standard",
		KeyFile: filepath.Join(filepath.Dir(is.Setup.ConfigPath), "client-keys", "colleague.jwk"), Audience: is.Setup.TokenURL})
	dsn := storetest.NewDatabase(t)
	// The authority of reviewed_change is configured but never reached: no
	// workers run, and the tests write its results into the database.
	client := fmt.Sprintf("{tokenUrl: %q, clientId: colleague, keyRef: secret:file/colleague.jwk}", is.Setup.TokenURL)
	extra := fmt.Sprintf("reviewAuthorities:\n  county-review: {endpoint: \"http://127.0.0.1:9\", profile: casework, producerId: casework, client: %s}\n", client)
	cfg := deployment(t, "testdata/requesthistory", dsn, is.HostAuthentication(), extra)
	key, err := os.ReadFile(filepath.Join(filepath.Dir(is.Setup.ConfigPath), "client-keys", "colleague.jwk"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Secrets.Root, "colleague.jwk"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	h, srv := serve(t, cfg)
	return historyEnv{
		owner:     caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)},
		colleague: caller{srv: srv, token: is.Token(t, "colleague")},
		dsn:       dsn,
		host:      h,
	}
}

type historyDoc struct {
	Items []struct {
		ProposalVersion int64           `json:"proposalVersion"`
		EffectDigest    string          `json:"effectDigest"`
		Planner         string          `json:"planner"`
		SubmittedAt     string          `json:"submittedAt"`
		DetailErased    bool            `json:"detailErased"`
		Writes          json.RawMessage `json:"writes"`
		Outcome         string          `json:"outcome"`
	} `json:"items"`
	NextAfter *int64 `json:"nextAfterProposalVersion"`
}

// history GETs path and decodes data.request.history.
func (c caller) history(t *testing.T, path string) historyDoc {
	t.Helper()
	resp, b := c.do(t, "GET", path, "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	var env struct {
		Data struct {
			Request struct {
				History *historyDoc `json:"history"`
			} `json:"request"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil || env.Data.Request.History == nil {
		t.Fatalf("GET %s: no data.request.history in %s", path, b)
	}
	return *env.Data.Request.History
}

// versions lists the proposal versions of a page.
func (h historyDoc) versions() []int64 {
	var out []int64
	for _, it := range h.Items {
		out = append(out, it.ProposalVersion)
	}
	return out
}

// actionKeys numbers the Idempotency-Keys of submitTimes.
var actionKeys atomic.Int64

func span(from, to int64) []int64 {
	var out []int64
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

// submitTimes submits the request at loc n times, revising (rebase: true,
// as review mode none offers) before each submit after the first.
func (c caller) submitTimes(t *testing.T, loc string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		env, _ := c.read(t, loc)
		r := env.Data.Request
		if r.EngineState == "submitted" {
			a := r.action("revise_request")
			if a == nil {
				t.Fatalf("revise not offered: %+v", r)
			}
			if st, b := c.act(t, a.Href, a.IfMatch, fmt.Sprintf("revise-%d", actionKeys.Add(1)), `{"actorReference":"clerk","rebase":true}`); st != 200 {
				t.Fatalf("revise: %d %s", st, b)
			}
			env, _ = c.read(t, loc)
			r = env.Data.Request
		}
		a := r.action("submit_request")
		if a == nil {
			t.Fatalf("submit not offered: %+v", r)
		}
		if st, b := c.act(t, a.Href, a.IfMatch, fmt.Sprintf("submit-%d", actionKeys.Add(1)), `{"actorReference":"clerk"}`); st != 200 {
			t.Fatalf("submit: %d %s", st, b)
		}
	}
}

func TestRequestHistoryPages(t *testing.T) {
	env := startHistory(t)
	owner := env.owner
	childLoc, _ := owner.create(t, "children", `{"name":"Ada"}`)
	child := filepath.Base(childLoc)

	// A draft never submitted has an empty history.
	loc, _ := owner.create(t, "note-changes", `{"childId":"`+child+`","note":"n"}`)
	if h := owner.history(t, loc); len(h.Items) != 0 || h.NextAfter != nil {
		t.Fatalf("history of a new draft: %+v", h)
	}

	// Exactly 50 proposals: one page, no next page.
	owner.submitTimes(t, loc, 50)
	h := owner.history(t, loc)
	if !slices.Equal(h.versions(), span(1, 50)) || h.NextAfter != nil {
		t.Fatalf("50 proposals: versions %v, next %v", h.versions(), h.NextAfter)
	}
	it := h.Items[49]
	if it.Planner != "declarative" || !strings.HasPrefix(it.EffectDigest, "sha256:") || it.SubmittedAt == "" || it.DetailErased || it.Outcome != "approved" {
		t.Fatalf("history item: %+v", it)
	}
	var writes []map[string]any
	if err := json.Unmarshal(it.Writes, &writes); err != nil || len(writes) != 1 || writes[0]["id"] != "annotate" {
		t.Fatalf("history item writes: %s", it.Writes)
	}
	// Writes are narrowed to what the selected profile may read: plain
	// reads children's names only, notes-only no children at all.
	if set, _ := writes[0]["set"].(map[string]any); set["case_notes"] == nil {
		t.Fatalf("family history writes lack case_notes: %s", it.Writes)
	}
	hp := owner.history(t, loc+"?accessProfile=plain")
	var narrowed []map[string]any
	if err := json.Unmarshal(hp.Items[49].Writes, &narrowed); err != nil || len(narrowed) != 1 || narrowed[0]["id"] != "annotate" {
		t.Fatalf("plain history writes: %s", hp.Items[49].Writes)
	}
	if set, _ := narrowed[0]["set"].(map[string]any); len(set) != 0 {
		t.Fatalf("plain history writes show fields it cannot read: %s", hp.Items[49].Writes)
	}
	hn := owner.history(t, loc+"?accessProfile=notes-only")
	if string(hn.Items[49].Writes) != "[]" {
		t.Fatalf("notes-only history writes: %s, want []", hn.Items[49].Writes)
	}
	current, _ := owner.read(t, loc)
	if it.EffectDigest != current.Data.Request.EffectDigest {
		t.Fatalf("the last item's digest %s is not the current one %s", it.EffectDigest, current.Data.Request.EffectDigest)
	}

	// The 51st: a page of 50 whose cursor leads to a page of one.
	owner.submitTimes(t, loc, 1)
	h = owner.history(t, loc)
	if !slices.Equal(h.versions(), span(1, 50)) || h.NextAfter == nil || *h.NextAfter != 50 {
		t.Fatalf("51 proposals, first page: versions %v, next %v", h.versions(), h.NextAfter)
	}
	h = owner.history(t, loc+"?requestHistoryAfterProposalVersion=50")
	if !slices.Equal(h.versions(), []int64{51}) || h.NextAfter != nil {
		t.Fatalf("51 proposals, second page: versions %v, next %v", h.versions(), h.NextAfter)
	}
	// The same access profile, named, continues it the same way.
	h = owner.history(t, loc+"?accessProfile=family&requestHistoryAfterProposalVersion=49")
	if !slices.Equal(h.versions(), []int64{50, 51}) || h.NextAfter != nil {
		t.Fatalf("after 49: versions %v, next %v", h.versions(), h.NextAfter)
	}

	// Invalid cursors, and the option on an entity that is not a request entity.
	for _, bad := range []string{"0", "-1", "+3", "07", "x", "", "51", "52", "99999999999999999999"} {
		resp, b := owner.do(t, "GET", loc+"?requestHistoryAfterProposalVersion="+url.QueryEscape(bad), "", "")
		wantProblem(t, "requestHistoryAfterProposalVersion="+bad, 400, b, "query.invalid")
		resp.Body.Close()
	}
	_, b := owner.do(t, "GET", loc+"?requestHistoryAfterProposalVersion=1&requestHistoryAfterProposalVersion=2", "", "")
	wantProblem(t, "the option twice", 400, b, "query.invalid")
	_, b = owner.do(t, "GET", childLoc+"?requestHistoryAfterProposalVersion=1", "", "")
	wantProblem(t, "the option on a child", 400, b, "query.invalid")

	// The byte budget: proposals of about 19 KB of writes each, 13 to a
	// 256 KiB page, so a page of fewer than 50 has a next page.
	big, _ := owner.create(t, "note-changes", `{"childId":"`+child+`","note":"`+strings.Repeat("x", 19000)+`"}`)
	owner.submitTimes(t, big, 15)
	h = owner.history(t, big)
	if !slices.Equal(h.versions(), span(1, 13)) || h.NextAfter == nil || *h.NextAfter != 13 {
		t.Fatalf("byte budget, first page: versions %v, next %v", h.versions(), h.NextAfter)
	}
	h = owner.history(t, big+"?requestHistoryAfterProposalVersion=13")
	if !slices.Equal(h.versions(), []int64{14, 15}) || h.NextAfter != nil {
		t.Fatalf("byte budget, second page: versions %v, next %v", h.versions(), h.NextAfter)
	}
}

// reviewRow writes the authority's submission (unless submit wrote it) and, unless status is "",
// its settled result for the current proposal of a reviewed_change,
// available until now() + until (a PostgreSQL interval) by the database clock.
func reviewRow(t *testing.T, conn *pgx.Conn, id, status, until string) {
	t.Helper()
	ctx := context.Background()
	digest := "sha256:" + strings.Repeat("a", 64)
	if _, err := conn.Exec(ctx, `INSERT INTO registrum.review_submissions (entity_id, record_id, proposal_version, authority, policy_id, state, body,
    submission_digest, recovery_deadline, created_at, updated_at)
    SELECT 'reviewed_change', record_id, proposal_version, 'county-review', 'notes-v1', 'accepted', '{}', $2, now() + interval '30 days', now(), now()
    FROM registrum.requests WHERE entity_id = 'reviewed_change' AND record_id = $1
    ON CONFLICT DO NOTHING`, id, digest); err != nil {
		t.Fatal(err)
	}
	if status == "" {
		return
	}
	if _, err := conn.Exec(ctx, `INSERT INTO registrum.review_results (entity_id, record_id, proposal_version, result_id, status, completed_at,
    available_until, body, received_at)
    SELECT 'reviewed_change', record_id, proposal_version, 'result-' || record_id, $2, now(), now() + $3::interval, '{}', now()
    FROM registrum.requests WHERE entity_id = 'reviewed_change' AND record_id = $1`, id, status, until); err != nil {
		t.Fatal(err)
	}
}

// listIDs lists a route with a $filter and returns the record ids.
func (c caller) listIDs(t *testing.T, route, query string) []string {
	t.Helper()
	resp, b := c.do(t, "GET", "/v1/records/"+route+"?"+query, "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("list %s?%s: %d %s", route, query, resp.StatusCode, b)
	}
	var page struct {
		Items []struct {
			ID string `json:"recordIdentifier"`
		} `json:"items"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range page.Items {
		ids = append(ids, it.ID)
	}
	slices.Sort(ids)
	return ids
}

func outcomeFilter(expr string) string { return "$filter=" + url.QueryEscape(expr) }

func TestReviewOutcomeFilter(t *testing.T) {
	env := startHistory(t)
	owner := env.owner
	conn, err := pgx.Connect(context.Background(), env.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	childLoc, _ := owner.create(t, "children", `{"name":"Ada"}`)
	child := filepath.Base(childLoc)
	body := `{"childId":"` + child + `","note":"n"}`

	// One reviewed change per case, named by the outcome it should have.
	ids := map[string]string{}
	for _, name := range []string{"draft", "pending", "approved", "approvedExpired", "rejected", "changesRequested", "answered", "resultCancelled", "superseded", "cancelled"} {
		loc, _ := owner.create(t, "reviewed-changes", body)
		ids[name] = filepath.Base(loc)
		if name != "draft" {
			owner.submitTimes(t, loc, 1)
		}
		switch name {
		case "pending":
			reviewRow(t, conn, ids[name], "", "")
		case "approved":
			reviewRow(t, conn, ids[name], "approved", "1 hour")
		case "approvedExpired":
			reviewRow(t, conn, ids[name], "approved", "-1 second")
		case "resultCancelled":
			reviewRow(t, conn, ids[name], "cancelled", "1 hour")
		case "cancelled":
			r, _ := owner.read(t, loc)
			a := r.Data.Request.action("cancel_request")
			if st, b := owner.act(t, a.Href, a.IfMatch, "cancel-"+loc, `{"actorReference":"clerk"}`); st != 200 {
				t.Fatalf("cancel: %d %s", st, b)
			}
		case "draft":
		default:
			reviewRow(t, conn, ids[name], name, "1 hour")
		}
	}
	want := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, ids[n])
		}
		slices.Sort(out)
		return out
	}
	for outcome, names := range map[string][]string{
		"pending":          {"pending"},
		"approved":         {"approved"},
		"approvedExpired":  {"approvedExpired"},
		"rejected":         {"rejected"},
		"changesRequested": {"changesRequested"},
		"answered":         {"answered"},
		"cancelled":        {"resultCancelled", "cancelled"},
		"superseded":       {"superseded"},
	} {
		if got := owner.listIDs(t, "reviewed-changes", outcomeFilter("reviewOutcome eq '"+outcome+"'")); !slices.Equal(got, want(names...)) {
			t.Errorf("reviewOutcome eq %s: got %v, want %v", outcome, got, want(names...))
		}
	}
	if got := owner.listIDs(t, "reviewed-changes", outcomeFilter("reviewOutcome in ('rejected','changesRequested') and childId eq '"+child+"'")); !slices.Equal(got, want("rejected", "changesRequested")) {
		t.Errorf("reviewOutcome in: got %v", got)
	}
	// A draft has no outcome: not reviewOutcome matches it, no value does.
	if got := owner.listIDs(t, "reviewed-changes", outcomeFilter("not (reviewOutcome in ('pending','approved','approvedExpired','rejected','changesRequested','answered','cancelled','superseded'))")); !slices.Equal(got, want("draft")) {
		t.Errorf("no outcome: got %v", got)
	}

	// The clock is the database's: an approval whose availableUntil the
	// database clock passes becomes approvedExpired on the next read.
	if _, err := conn.Exec(context.Background(), `UPDATE registrum.review_results SET available_until = now() - interval '1 millisecond' WHERE record_id = $1`, ids["approved"]); err != nil {
		t.Fatal(err)
	}
	if got := owner.listIDs(t, "reviewed-changes", outcomeFilter("reviewOutcome eq 'approvedExpired'")); !slices.Equal(got, want("approved", "approvedExpired")) {
		t.Errorf("after the database clock passed availableUntil: got %v", got)
	}
	// $count counts with the same expression.
	_, b := owner.do(t, "GET", "/v1/records/reviewed-changes?$count=true&"+outcomeFilter("reviewOutcome eq 'approvedExpired'"), "", "")
	if !strings.Contains(string(b), `"count":2`) {
		t.Errorf("$count with reviewOutcome: %s", b)
	}

	// Review mode none: submitted is approved, applied stays approved.
	noteLoc, _ := owner.create(t, "note-changes", body)
	owner.submitTimes(t, noteLoc, 1)
	applied, _ := owner.create(t, "note-changes", body)
	owner.submitTimes(t, applied, 1)
	r, _ := owner.read(t, applied)
	a := r.Data.Request.action("apply_request")
	if st, b := owner.act(t, a.Href, a.IfMatch, "apply-"+applied, fmt.Sprintf(`{"actorReference":"clerk","proposalVersion":%d,"effectDigest":%q}`, a.ProposalVersion, a.EffectDigest)); st != 200 {
		t.Fatalf("apply: %d %s", st, b)
	}
	got := owner.listIDs(t, "note-changes", outcomeFilter("reviewOutcome eq 'approved'"))
	if !slices.Equal(got, sortedOf(filepath.Base(noteLoc), filepath.Base(applied))) {
		t.Errorf("review mode none: got %v", got)
	}

	// Refused: a profile that does not disclose review_state, other
	// operators, other values, null.
	for _, q := range []string{
		"accessProfile=plain&" + outcomeFilter("reviewOutcome eq 'approved'"),
		outcomeFilter("reviewOutcome ne 'approved'"),
		outcomeFilter("reviewOutcome eq 'expired'"),
		outcomeFilter("reviewOutcome eq null"),
		outcomeFilter("startswith(reviewOutcome,'app')"),
	} {
		_, b := owner.do(t, "GET", "/v1/records/reviewed-changes?"+q, "", "")
		wantProblem(t, q, 400, b, "query.invalid")
	}
	// The same profile lists without the filter.
	if got := owner.listIDs(t, "reviewed-changes", "accessProfile=plain"); len(got) != len(ids) {
		t.Errorf("plain list: %d records, want %d", len(got), len(ids))
	}
}

func sortedOf(ids ...string) []string {
	slices.Sort(ids)
	return ids
}

func TestRequestListOwnerVisibility(t *testing.T) {
	env := startHistory(t)
	childLoc, _ := env.owner.create(t, "children", `{"name":"Ada"}`)
	body := `{"childId":"` + filepath.Base(childLoc) + `","note":"n"}`
	mine, _ := env.owner.create(t, "reviewed-changes", body)
	theirs, _ := env.colleague.create(t, "reviewed-changes", body)
	if got := env.owner.listIDs(t, "reviewed-changes", "accessProfile=own"); !slices.Equal(got, []string{filepath.Base(mine)}) {
		t.Errorf("owner's list under requestVisibility owner: %v", got)
	}
	if got := env.colleague.listIDs(t, "reviewed-changes", "accessProfile=own"); !slices.Equal(got, []string{filepath.Base(theirs)}) {
		t.Errorf("colleague's list under requestVisibility owner: %v", got)
	}
	if got := env.owner.listIDs(t, "reviewed-changes", "accessProfile=own&"+outcomeFilter("reviewOutcome eq 'pending'")); got != nil {
		t.Errorf("drafts have no outcome: %v", got)
	}
	// Without the owner rule both are listed.
	if got := env.owner.listIDs(t, "reviewed-changes", ""); len(got) != 2 {
		t.Errorf("family list: %v", got)
	}
}

// TestErasedProposalDetail erases the detail of a submitted request the way
// `registrum requests erase` does: the read reports detailErased, history
// items carry no writes, and apply is neither offered nor accepted.
func TestErasedProposalDetail(t *testing.T) {
	env := startHistory(t)
	owner := env.owner
	childLoc, _ := owner.create(t, "children", `{"name":"Ada"}`)
	loc, _ := owner.create(t, "note-changes", `{"childId":"`+filepath.Base(childLoc)+`","note":"private"}`)
	owner.submitTimes(t, loc, 2)
	before, _ := owner.read(t, loc)
	apply := before.Data.Request.action("apply_request")
	if before.Data.Request.DetailErased || apply == nil {
		t.Fatalf("before erasure: %+v", before.Data.Request)
	}
	pool, err := store.Connect(context.Background(), env.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pkg := env.host.Package()
	if n, err := store.EraseProposalDetail(context.Background(), pool, pkg.EntityByID("note_change"), filepath.Base(loc), 0); err != nil || n != 2 {
		t.Fatalf("erase: %d, %v", n, err)
	}
	if _, err := store.EraseProposalDetail(context.Background(), pool, pkg.EntityByID("reviewed_change"), filepath.Base(loc), 0); !errors.Is(err, store.ErrRetentionRetains) {
		t.Fatalf("erase on a retaining entity: %v", err)
	}
	after, _ := owner.read(t, loc)
	if !after.Data.Request.DetailErased || after.Data.Request.action("apply_request") != nil {
		t.Fatalf("after erasure: %+v", after.Data.Request)
	}
	h := owner.history(t, loc)
	if len(h.Items) != 2 {
		t.Fatalf("history after erasure: %+v", h)
	}
	for _, it := range h.Items {
		if !it.DetailErased || it.Writes != nil || it.EffectDigest == "" {
			t.Fatalf("history item after erasure: %+v", it)
		}
	}
	st, b := owner.act(t, apply.Href, after.Data.Request.action("cancel_request").IfMatch, "apply-erased",
		fmt.Sprintf(`{"actorReference":"clerk","proposalVersion":%d,"effectDigest":%q}`, apply.ProposalVersion, apply.EffectDigest))
	wantProblem(t, "apply of an erased proposal", st, b, "precondition.failed")
	if st != 412 || !strings.Contains(string(b), "erased") {
		t.Fatalf("apply of an erased proposal: %d %s", st, b)
	}
}

// TestActionsOnAHiddenRequestAreConcealed checks requestVisibility owner
// holds on actions as on reads: a request the caller may not see answers
// every action with the concealed 404 of an unknown path (byte for byte but
// its traceId), never a 412 that would confirm it exists; its owner still
// acts on it.
func TestActionsOnAHiddenRequestAreConcealed(t *testing.T) {
	env := startHistory(t)
	childLoc, _ := env.owner.create(t, "children", `{"name":"Ada"}`)
	theirs, etag := env.colleague.create(t, "note-changes", `{"childId":"`+filepath.Base(childLoc)+`","note":"n"}`)
	withoutTrace := func(b []byte) string {
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("not a problem document: %s", b)
		}
		delete(doc, "traceId")
		out, _ := json.Marshal(doc)
		return string(out)
	}
	resp, unknown := env.owner.do(t, "GET", "/v1/records/no-such-route/"+filepath.Base(theirs)+"?accessProfile=own-actor", "", "")
	if resp.StatusCode != 404 {
		t.Fatalf("unknown path: %d %s", resp.StatusCode, unknown)
	}
	concealed := withoutTrace(unknown)
	if resp, b := env.owner.do(t, "GET", theirs+"?accessProfile=own-actor", "", ""); resp.StatusCode != 404 || withoutTrace(b) != concealed {
		t.Fatalf("read of a hidden request: %d %s", resp.StatusCode, b)
	}
	bodies := map[string]string{
		"submit": `{"actorReference":"me"}`,
		"revise": `{"actorReference":"me","rebase":false}`,
		"cancel": `{"actorReference":"me"}`,
		"apply":  `{"actorReference":"me","proposalVersion":1,"effectDigest":"sha256:` + strings.Repeat("0", 64) + `"}`,
	}
	for action, body := range bodies {
		code, b := env.owner.act(t, theirs+"/actions/"+action+"?accessProfile=own-actor", etag, "hidden-"+action, body)
		if code != 404 || withoutTrace(b) != concealed {
			t.Errorf("%s of a hidden request: %d %s, want the concealed 404 %s", action, code, b, concealed)
		}
	}
	// Nothing moved, and the owner still cancels it under the same profile.
	code, b := env.colleague.act(t, theirs+"/actions/cancel?accessProfile=own-actor", etag, "own-cancel", `{"actorReference":"me"}`)
	if code != 200 {
		t.Fatalf("owner's cancel: %d %s", code, b)
	}
}
