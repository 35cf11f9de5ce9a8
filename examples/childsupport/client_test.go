package childsupport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrum/registrum/examples/plugins/eicar-verifier/eicar"
	"github.com/registrum/registrum/host"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/project"
	"github.com/registrum/registrum/sdk/client"
	"github.com/registrum/registrum/sdk/ingest"
	"github.com/registrum/registrum/sdk/tokensource"
	"github.com/registrum/registrum/sdk/verifier"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/storetest"
)

// exampleHost serves the example registry on a real record host backed by
// a real PostgreSQL, trusting a real issuer whose standard demo client
// satisfies the caseworker and applicant profiles.
func exampleHost(t *testing.T) (*httptest.Server, *issuertest.Issuer) {
	return exampleHostWith(t, issuertest.Options{})
}

// exampleHostWith is exampleHost with the issuer's clock and handler
// wrapper of o (its Dev options are the example's).
func exampleHostWith(t *testing.T, o issuertest.Options) (*httptest.Server, *issuertest.Issuer) {
	t.Helper()
	o.Dev = issuertest.DevOptions{
		Scopes: []string{"childsupport:casework", "childsupport:apply"},
		Claims: map[string]string{"purpose": "child-support-administration", "health_districts": "north south"},
	}
	is := &authtest.Issuer{Issuer: issuertest.Start(t, o)}
	dir := t.TempDir()
	res, err := project.Compile(".", project.Options{Fingerprint: layout.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	// The example's supporting documents are scanned by its http verifier:
	// the EICAR scanner (as registrum dev runs it) on a loopback port of
	// this test, with its credential in the secrets folder.
	token := []byte("example-scanner-credential")
	scanner := httptest.NewServer(verifier.HTTPHandler(eicar.New(), func() ([]byte, error) { return token, nil }, 0))
	t.Cleanup(scanner.Close)
	for i, v := range res.Package.Verifiers {
		u, _ := url.Parse(v.Endpoint)
		res.Package.Verifiers[i].Endpoint = scanner.URL + u.Path
	}
	if res.Package.Revision, err = model.ComputeRevision(res.Package); err != nil {
		t.Fatal(err)
	}
	if err := res.Write(filepath.Join(dir, "package")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	if err := os.WriteFile(filepath.Join(dir, "secrets", "host-key"), bytes.Repeat([]byte{9}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secrets", "eicar-scanner-token"), token, 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "registrum.yaml")
	cfg := "version: 1\nlistener: {address: 127.0.0.1, port: 0}\ndatabase: {url: \"" + storetest.NewDatabase(t) +
		"\"}\npackage: package\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n" + is.HostAuthentication()
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(context.Background(), c, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler())
	servedRevisions.Store(srv.URL, res.Package.Revision)
	// The job workers run the verification of uploads (and the example's
	// other post-commit jobs), as in a served host.
	wctx, stop := context.WithCancel(context.Background())
	workers := make(chan error, 1)
	go func() { workers <- h.RunWorkers(wctx) }()
	t.Cleanup(func() {
		srv.Close()
		stop()
		if err := <-workers; err != nil {
			t.Errorf("workers: %v", err)
		}
		h.Close()
	})
	return srv, is.Issuer
}

// servedRevisions maps an exampleHost's URL to the revision of the package
// it serves: the example's, its http verifier pointed at the test's scanner.
var servedRevisions sync.Map

type caseData struct {
	CaseNumber          string `json:"caseNumber"`
	SupportType         string `json:"supportType"`
	ApplicantNationalID string `json:"applicantNationalId"`
	HealthDistrict      string `json:"healthDistrict"`
	Status              string `json:"status"`
	OpenedOn            string `json:"openedOn"`
}

// TestClientAgainstTheExampleHost drives every kind of /v1 call the SDK
// client makes against the example registry on a real host: records,
// problems, idempotency, batch, cursors, history, change-request actions
// followed by href, and the spatial adapter, with tokens from the
// private-key-JWT token source.
func TestClientAgainstTheExampleHost(t *testing.T) {
	srv, is := exampleHost(t)
	ctx := context.Background()
	cw := client.WithAccessProfile("caseworker")
	c, err := client.New(client.Options{BaseURL: srv.URL, Tokens: is.Source(t, issuertest.StandardClientID, nil)})
	if err != nil {
		t.Fatal(err)
	}

	// The package the host serves is the one compiled here, its verifier
	// pointed at the test's scanner.
	rev, _ := servedRevisions.Load(srv.URL)
	if err := c.CheckPackage(ctx, rev.(string), cw); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckPackage(ctx, "sha256:"+strings.Repeat("0", 64), cw); !errors.Is(err, client.ErrPackageMismatch) {
		t.Fatalf("another revision: %v", err)
	}

	// Create, read, patch under If-Match.
	kase := caseData{CaseNumber: "CS-1000", SupportType: "maintenance", ApplicantNationalID: "P-1", HealthDistrict: "north", Status: "open", OpenedOn: "2026-11-01"}
	rec, err := c.Create(ctx, "cases", kase, cw)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Revision != "1" || rec.ETag == "" || rec.Location != "/v1/records/cases/"+rec.ID || rec.Meta.EntityTypeIdentifier != "case" || rec.Snapshot != "" && !strings.HasPrefix(rec.Snapshot, "engine2_") {
		t.Fatalf("create: %+v", rec)
	}
	read, err := c.Read(ctx, "cases", rec.ID, nil, cw)
	if err != nil {
		t.Fatal(err)
	}
	var got caseData
	if err := read.Decode(&got); err != nil || got != kase || read.ETag != rec.ETag {
		t.Fatalf("read: %+v %v", got, err)
	}
	patched, err := c.Patch(ctx, "cases", rec.ID, read.ETag, []client.PatchOp{client.Replace("status", "suspended")}, cw)
	if err != nil || patched.Revision != "2" || patched.ETag == read.ETag {
		t.Fatalf("patch: %+v %v", patched, err)
	}

	// Refusals are typed problems.
	_, err = c.Patch(ctx, "cases", rec.ID, read.ETag, []client.PatchOp{client.Replace("status", "closed")}, cw)
	var p *client.Problem
	if !client.IsCode(err, client.CodePreconditionFailed) || !asProblem(err, &p) || p.Status != 412 || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(p.TraceID) {
		t.Fatalf("stale If-Match: %v", err)
	}
	_, err = c.Create(ctx, "cases", map[string]any{"caseNumber": "CS-1001", "bogus": 1}, cw)
	if !client.IsCode(err, client.CodeRequestInvalid) || !asProblem(err, &p) || p.FieldPath == "" || p.Status != 400 {
		t.Fatalf("unknown member: %v (%+v)", err, p)
	}
	if _, err := c.Read(ctx, "cases", rec.ID, nil, client.WithAccessProfile("applicant")); !client.IsCode(err, client.CodeNotFound) {
		t.Fatalf("a read under a profile that does not grant cases: %v", err)
	}
	bad, _ := client.New(client.Options{BaseURL: srv.URL, Tokens: client.StaticToken("not.a.token")})
	if _, err := bad.Read(ctx, "cases", rec.ID, nil, cw); !client.IsCode(err, client.CodeAuthenticationRefused) {
		t.Fatalf("a rejected token: %v", err)
	}

	// Idempotency: a named key replays, a generated one is fresh each call.
	again := caseData{CaseNumber: "CS-1002", SupportType: "maintenance", ApplicantNationalID: "P-2", HealthDistrict: "south", Status: "open", OpenedOn: "2026-11-02"}
	first, err := c.Create(ctx, "cases", again, cw, client.WithIdempotencyKey("case-1002"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Create(ctx, "cases", again, cw, client.WithIdempotencyKey("case-1002"))
	if err != nil || second.ID != first.ID || !second.Replayed || first.Replayed {
		t.Fatalf("replay: %+v %v", second, err)
	}
	if _, err := c.Create(ctx, "cases", again, cw); err == nil {
		t.Fatal("a second create with a fresh key and the same unique case number was accepted")
	}

	// Batch, then a filtered, counted read followed through its cursors.
	var items []client.BatchItem
	for i, d := range []string{"north", "north", "south"} {
		items = append(items, client.CreateItem(caseData{CaseNumber: "CS-200" + string(rune('0'+i)), SupportType: "medical-care",
			ApplicantNationalID: "P-3", HealthDistrict: d, Status: "open", OpenedOn: "2026-11-03"}))
	}
	items = append(items, client.PatchItem(rec.ID, patched.ETag, client.Replace("status", "open")))
	br, err := c.Batch(ctx, "cases", items, &client.ChangeContext{Kind: "correction", ReasonCode: "reopen"}, cw)
	if err != nil || len(br.Results) != 4 || br.Results[3].Revision.String() != "3" {
		t.Fatalf("batch: %+v %v", br, err)
	}
	var numbers []string
	for it, err := range c.Records(ctx, "cases", client.Query{Filter: "status eq 'open'", OrderBy: []string{"caseNumber"}, Top: 2, Select: []string{"caseNumber"}}, cw) {
		if err != nil {
			t.Fatal(err)
		}
		var d caseData
		it.Decode(&d)
		numbers = append(numbers, d.CaseNumber)
	}
	if strings.Join(numbers, ",") != "CS-1000,CS-1002,CS-2000,CS-2001,CS-2002" {
		t.Fatalf("iterated: %v", numbers)
	}
	pg, err := c.List(ctx, "cases", client.Query{Count: true, Top: 1}, cw)
	if err != nil || pg.Count == nil || *pg.Count != 5 || pg.NextCursor == "" {
		t.Fatalf("count: %+v %v", pg, err)
	}
	if next, err := c.ListNext(ctx, "cases", pg.NextCursor, cw); err != nil || len(next.Items) != 1 {
		t.Fatalf("next page: %+v %v", next, err)
	}
	if _, err := c.List(ctx, "cases", client.Query{Filter: "nope eq 1"}, cw); !client.IsCode(err, client.CodeQueryInvalid) {
		t.Fatalf("bad filter: %v", err)
	}

	// An ingestion run through the SDK's chunker, on the same client's tokens.
	src := []byte(`{"operation":"create","data":{"caseNumber":"CS-4000","supportType":"maintenance","applicantNationalId":"P-4","healthDistrict":"north","status":"closed","openedOn":"2026-11-04"}}
{"operation":"create","data":{"caseNumber":"CS-4001","supportType":"maintenance","applicantNationalId":"P-4","healthDistrict":"south","status":"closed","openedOn":"2026-11-04"}}
`)
	ic := c.Ingestion("cases", "caseworker")
	binding, err := ic.Binding(ctx)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := ingest.PlanReader(bytes.NewReader(src), ingest.Create, binding.Bounds)
	if err != nil {
		t.Fatal(err)
	}
	run, err := ic.Open(ctx, plan, binding)
	if err != nil {
		t.Fatal(err)
	}
	if run, err = ic.Upload(ctx, run, plan, bytes.NewReader(src), nil); err != nil || !run.Complete || run.CommittedItems != 2 {
		t.Fatalf("ingestion: %+v %v", run, err)
	}
	if pg, err := c.List(ctx, "cases", client.Query{Filter: "status eq 'closed'", Count: true}, cw); err != nil || *pg.Count != 2 {
		t.Fatalf("ingested: %+v %v", pg, err)
	}

	// Snapshots: a captured state stays what it was.
	snap, err := c.SnapshotPage(ctx, "cases", client.SnapshotQuery{Top: 100}, cw)
	if err != nil || snap.Snapshot == "" || len(snap.Items) != 7 {
		t.Fatalf("snapshot: %d items, token %q, %v", len(snap.Items), snap.Snapshot, err)
	}
	later, err := c.Create(ctx, "cases", caseData{CaseNumber: "CS-5000", SupportType: "maintenance", ApplicantNationalID: "P-5", HealthDistrict: "north", Status: "open", OpenedOn: "2026-11-05"}, cw)
	if err != nil {
		t.Fatal(err)
	}
	count := func(q client.SnapshotQuery) int {
		n := 0
		for _, err := range c.Snapshot(ctx, "cases", q, cw) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	if n := count(client.SnapshotQuery{Token: snap.Snapshot, Top: 2}); n != 7 {
		t.Errorf("the captured state has %d cases, want 7", n)
	}
	if n := count(client.SnapshotQuery{Token: later.Snapshot, Top: 3}); n != 8 {
		t.Errorf("the state of the last create has %d cases, want 8", n)
	}

	// History: revisions with their correction context, one revision.
	var revs []string
	for it, err := range c.Revisions(ctx, "cases", rec.ID, 1, cw) {
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, it.RevisionIdentifier)
		if it.RevisionIdentifier == "3" && !strings.Contains(string(it.ChangeContext), `"reopen"`) {
			t.Errorf("revision 3 without its correction context: %s", it.ChangeContext)
		}
	}
	if strings.Join(revs, ",") != "1,2,3" {
		t.Fatalf("revisions: %v", revs)
	}
	if r2, err := c.Revision(ctx, "cases", rec.ID, "2", cw); err != nil || !strings.Contains(string(r2.DomainData), `"suspended"`) {
		t.Fatalf("revision 2: %+v %v", r2, err)
	}
	// Temporal reads of decisions.
	for _, d := range []map[string]any{
		{"case": rec.ID, "outcome": "granted", "monthlyAmount": "100.00", "validFrom": "2026-01-01", "validTo": "2026-07-01"},
		{"case": rec.ID, "outcome": "refused", "validFrom": "2026-07-01"},
	} {
		if _, err := c.Create(ctx, "decisions", d, cw); err != nil {
			t.Fatal(err)
		}
	}
	outcome := func(seq func(func(client.Item, error) bool)) string {
		var out []string
		for it, err := range seq {
			if err != nil {
				t.Fatal(err)
			}
			var d struct {
				Outcome string `json:"outcome"`
			}
			it.Decode(&d)
			out = append(out, d.Outcome)
		}
		return strings.Join(out, ",")
	}
	if o := outcome(c.AsOf(ctx, "decisions", time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), client.Query{Top: 1}, cw)); o != "granted" {
		t.Errorf("as of March: %q", o)
	}
	if o := outcome(c.Current(ctx, "decisions", client.Query{}, cw)); o != "refused" {
		t.Errorf("current: %q", o)
	}

	// An immediate action: the conditions first, then the invocation under them.
	pre, err := c.TargetConditions(ctx, "close-case", map[string]any{"case": first.ID}, cw)
	if err != nil || pre["close"].RecordID != first.ID || pre["close"].IfMatch == "" {
		t.Fatalf("target conditions: %+v %v", pre, err)
	}
	inv, err := c.Invoke(ctx, "close-case", map[string]any{"case": first.ID}, pre, cw)
	if err != nil || len(inv.Results) != 1 || inv.Results[0].RecordID != first.ID || inv.ApplicationID == "" {
		t.Fatalf("invoke: %+v %v", inv, err)
	}
	if _, err := c.Invoke(ctx, "close-case", map[string]any{"case": first.ID}, pre, cw); !client.IsCode(err, client.CodePreconditionFailed) {
		t.Fatalf("an invocation under a stale precondition: %v", err)
	}
	if closed, err := c.Read(ctx, "cases", first.ID, []string{"status"}, cw); err != nil || string(closed.DomainData) != `{"status":"closed"}` {
		t.Fatalf("the case after close-case: %+v %v", closed, err)
	}

	// A change request, followed through the actions its reads offer.
	child, err := c.Create(ctx, "children", map[string]any{"case": rec.ID, "childNationalId": "C-1"}, cw)
	if err != nil {
		t.Fatal(err)
	}
	draft, err := c.Create(ctx, "child-details-changes", map[string]any{"childId": child.ID, "phone": "040-123-4567", "guardian": map[string]any{"name": "Aino"}}, cw)
	if err != nil {
		t.Fatal(err)
	}
	// A supporting document, streamed into the draft's slot under its ETag.
	letter := []byte("The family moved on 1 November.\n")
	draft, err = c.UploadAttachment(ctx, "child-details-changes", draft.ID, "supporting-document", draft.ETag, "text/plain", bytes.NewReader(letter), int64(len(letter)), cw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadAttachment(ctx, "child-details-changes", draft.ID, "supporting-document", draft.ETag, "image/gif", bytes.NewReader(letter), -1, cw); !client.IsCode(err, client.CodeRequestInvalid) {
		t.Fatalf("a content type the slot refuses: %v", err)
	}
	// The example's scanner approves it; until then it is pending.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var slots struct {
			Doc struct {
				Status string `json:"verificationStatus"`
			} `json:"supporting-document"`
		}
		if err := json.Unmarshal(draft.DomainData, &slots); err != nil {
			t.Fatal(err)
		}
		if slots.Doc.Status == "approved" {
			break
		}
		if slots.Doc.Status != "pending" || time.Now().After(deadline) {
			t.Fatalf("the supporting document's verification: %q", slots.Doc.Status)
		}
		if draft, err = c.Read(ctx, "child-details-changes", draft.ID, nil, cw); err != nil {
			t.Fatal(err)
		}
	}
	att, err := c.DownloadAttachment(ctx, "child-details-changes", draft.ID, "supporting-document", draft.Request.ProposalVersion, cw)
	if err != nil {
		t.Fatal(err)
	}
	back, _ := io.ReadAll(att.Body)
	att.Body.Close()
	if !bytes.Equal(back, letter) || att.ContentType != "text/plain" || att.Size != int64(len(letter)) {
		t.Fatalf("download: %q %+v", back, att)
	}
	submit, ok := draft.Request.Action("submit_request")
	if !ok || draft.Request.EngineState != "draft" {
		t.Fatalf("draft: %+v", draft.Request)
	}
	sub, err := c.Act(ctx, submit, client.ActionInput{ActorReference: "sdk-test"}, cw)
	if err != nil || sub.EngineState != "submitted" {
		t.Fatalf("submit: %+v %v", sub, err)
	}
	if _, err := c.Act(ctx, submit, client.ActionInput{ActorReference: "sdk-test"}, cw); !client.IsCode(err, client.CodePreconditionFailed) {
		t.Fatalf("a submit under a stale ifMatch: %v", err)
	}
	now, err := c.Read(ctx, "child-details-changes", draft.ID, nil, cw)
	if err != nil {
		t.Fatal(err)
	}
	apply, ok := now.Request.Action("apply_request")
	if !ok {
		t.Fatalf("apply not offered: %+v", now.Request)
	}
	reason := "checked by phone"
	ap, err := c.Act(ctx, apply, client.ActionInput{ActorReference: "sdk-test", Reason: &reason}, cw)
	if err != nil || ap.EngineState != "applied" {
		t.Fatalf("apply: %+v %v", ap, err)
	}
	changed, err := c.Read(ctx, "children", child.ID, nil, cw)
	if err != nil || !strings.Contains(string(changed.DomainData), `"guardianId":"`) {
		t.Fatalf("the child after apply: %s %v", changed.DomainData, err)
	}

	// The spatial adapter, anonymously.
	if _, err := c.Create(ctx, "service-offices", map[string]any{"name": "Kallio office", "healthDistrict": "north", "location": client.NewPoint(24.95, 60.18)}, cw); err != nil {
		t.Fatal(err)
	}
	anon, _ := client.New(client.Options{BaseURL: srv.URL})
	if conf, err := anon.Conformance(ctx); err != nil || !slices.Equal(conf, []string{client.GISProfile}) {
		t.Fatalf("conformance: %v %v", conf, err)
	}
	cols, err := anon.Collections(ctx)
	if err != nil || len(cols) != 1 || cols[0].ID != "service-offices" {
		t.Fatalf("collections: %+v %v", cols, err)
	}
	var found []string
	for f, err := range anon.Features(ctx, "service-offices", client.FeatureQuery{BBox: &client.BBox{West: 24, South: 60, East: 26, North: 61}, Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		if f.Geometry == nil || f.Geometry.Coordinates != [2]float64{24.95, 60.18} {
			t.Fatalf("feature: %+v", f)
		}
		found = append(found, f.ID)
	}
	if len(found) != 1 {
		t.Fatalf("features: %v", found)
	}
	// A closed office is tombstoned: it leaves the map.
	office, err := c.Read(ctx, "service-offices", found[0], nil, cw)
	if err != nil {
		t.Fatal(err)
	}
	if ts, err := c.Tombstone(ctx, "service-offices", office.ID, office.ETag, cw); err != nil || !ts.Tombstoned || ts.Revision != "2" {
		t.Fatalf("tombstone: %+v %v", ts, err)
	}
	if fc, err := anon.FeaturePage(ctx, "service-offices", client.FeatureQuery{BBox: &client.BBox{West: 24, South: 60, East: 26, North: 61}}); err != nil || len(fc.Features) != 0 {
		t.Fatalf("a tombstoned office on the map: %+v %v", fc, err)
	}
	if _, err := c.Read(ctx, "service-offices", office.ID, nil, cw); !client.IsCode(err, client.CodeNotFound) {
		t.Fatalf("a tombstoned office read live: %v", err)
	}
	if _, err := anon.FeaturePage(ctx, "service-offices", client.FeatureQuery{Limit: 10001}); !client.IsCode(err, client.CodeQueryInvalid) {
		t.Fatalf("limit over 10000: %v", err)
	}
}

func asProblem(err error, p **client.Problem) bool { return errors.As(err, p) }

// failingTokens is a token source that cannot give a token.
type failingTokens struct{}

func (failingTokens) Token(context.Context) (*tokensource.Token, error) {
	return nil, errors.New("no key")
}

// TestClientRetriesOnlyWhatIsSafe puts a proxy in front of a real host that
// loses answers: reads and keyed writes are retried (a keyed create whose
// answer was lost is replayed, not written twice), a write sent without a
// key is not.
func TestClientRetriesOnlyWhatIsSafe(t *testing.T) {
	srv, is := exampleHost(t)
	ctx := context.Background()
	target, _ := url.Parse(srv.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	var lose atomic.Int32 // answers still to lose
	var forwarded atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lose.Add(-1) >= 0 {
			// Forward, then lose the answer: the host did the work.
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			forwarded.Add(1)
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		forwarded.Add(1)
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	c, err := client.New(client.Options{BaseURL: proxy.URL, Tokens: is.Source(t, issuertest.StandardClientID, nil), RetryWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cw := client.WithAccessProfile("caseworker")
	kase := caseData{CaseNumber: "CS-3000", SupportType: "maintenance", ApplicantNationalID: "P-1", HealthDistrict: "north", Status: "open", OpenedOn: "2026-11-01"}

	lose.Store(2)
	rec, err := c.Create(ctx, "cases", kase, cw)
	if err != nil || !rec.Replayed || forwarded.Load() != 3 {
		t.Fatalf("a keyed create whose answers were lost twice: %+v %v (%d sent)", rec, err, forwarded.Load())
	}
	lose.Store(1)
	if _, err := c.Read(ctx, "cases", rec.ID, nil, cw); err != nil {
		t.Fatalf("a read whose first answer was lost: %v", err)
	}
	lose.Store(1)
	forwarded.Store(0)
	kase.CaseNumber = "CS-3001"
	_, err = c.Create(ctx, "cases", kase, cw, client.WithoutIdempotencyKey())
	var p *client.Problem
	if !asProblem(err, &p) || p.Status != 503 || forwarded.Load() != 1 {
		t.Fatalf("a create without a key was retried or not refused: %v (%d sent)", err, forwarded.Load())
	}
	// It was written once, though its answer was lost: the read shows it.
	n := 0
	for _, err := range c.Records(ctx, "cases", client.Query{Filter: "caseNumber eq 'CS-3001'"}, cw) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("%d records CS-3001", n)
	}
	// A token source failure is no retry either.
	failing, _ := client.New(client.Options{BaseURL: proxy.URL, Tokens: failingTokens{}})
	forwarded.Store(0)
	if _, err := failing.Read(ctx, "cases", rec.ID, nil, cw); err == nil || forwarded.Load() != 0 {
		t.Fatalf("a call without a token: %v (%d sent)", err, forwarded.Load())
	}
}
