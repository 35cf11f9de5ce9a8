package childsupport_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/sdk/client"
	"github.com/registrum/registrum/sdk/tokensource"
)

// TestClientFollowsRequestHistory: a change request with 51 proposals has a
// history page of 50 and a next page of one; RequestHistory follows
// nextAfterProposalVersion under the same (non-default) access profile to
// the end, and stops when the caller stops.
func TestClientFollowsRequestHistory(t *testing.T) {
	srv, is := exampleHost(t)
	ctx := context.Background()
	cw := client.WithAccessProfile("caseworker")
	c, err := client.New(client.Options{BaseURL: srv.URL, Tokens: is.Source(t, issuertest.StandardClientID, nil)})
	if err != nil {
		t.Fatal(err)
	}
	kase, err := c.Create(ctx, "cases", caseData{CaseNumber: "CS-6000", SupportType: "maintenance", ApplicantNationalID: "P-6", HealthDistrict: "north", Status: "open", OpenedOn: "2026-11-06"}, cw)
	if err != nil {
		t.Fatal(err)
	}
	child, err := c.Create(ctx, "children", map[string]any{"case": kase.ID, "childNationalId": "C-6"}, cw)
	if err != nil {
		t.Fatal(err)
	}
	req, err := c.Create(ctx, "child-details-changes", map[string]any{"childId": child.ID, "phone": "040-600"}, cw)
	if err != nil {
		t.Fatal(err)
	}
	// A draft never submitted has an empty history.
	for _, err := range c.RequestHistory(ctx, "child-details-changes", req.ID, cw) {
		t.Fatalf("the history of a new draft: %v", err)
	}
	// 51 proposals: submit, then revise (with the rebase the offer names) and submit again.
	for i := 0; i < 51; i++ {
		r, err := c.Read(ctx, "child-details-changes", req.ID, nil, cw)
		if err != nil {
			t.Fatal(err)
		}
		if r.Request.EngineState == "submitted" {
			revise, ok := r.Request.Action("revise_request")
			if !ok {
				t.Fatalf("revise not offered: %+v", r.Request)
			}
			if _, err := c.Act(ctx, revise, client.ActionInput{ActorReference: "sdk-test"}, cw); err != nil {
				t.Fatalf("revise %d: %v", i, err)
			}
			if r, err = c.Read(ctx, "child-details-changes", req.ID, nil, cw); err != nil {
				t.Fatal(err)
			}
		}
		submit, ok := r.Request.Action("submit_request")
		if !ok {
			t.Fatalf("submit not offered: %+v", r.Request)
		}
		if _, err := c.Act(ctx, submit, client.ActionInput{ActorReference: "sdk-test"}, cw); err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	// The read itself carries the first page: 50 proposals and a cursor.
	r, err := c.Read(ctx, "child-details-changes", req.ID, nil, cw)
	if err != nil {
		t.Fatal(err)
	}
	first, err := r.Request.HistoryPage()
	if err != nil || len(first.Items) != 50 || first.NextAfterProposalVersion == nil || *first.NextAfterProposalVersion != 50 {
		t.Fatalf("first history page: %+v %v", first, err)
	}
	var versions []int64
	for p, err := range c.RequestHistory(ctx, "child-details-changes", req.ID, cw) {
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(p.EffectDigest, "sha256:") || p.SubmittedAt.IsZero() || p.Planner == "" || p.DetailErased {
			t.Fatalf("proposal: %+v", p)
		}
		versions = append(versions, p.ProposalVersion)
	}
	want := make([]int64, 51)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(versions, want) {
		t.Fatalf("history versions %v, want 1..51", versions)
	}
	if last := r.Request.ProposalVersion; last != 51 {
		t.Fatalf("proposal version %d, want 51", last)
	}
	// The caller may stop early.
	n := 0
	for _, err := range c.RequestHistory(ctx, "child-details-changes", req.ID, cw) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			break
		}
	}
	// Under a profile that does not read the request, the concealed 404.
	for _, err := range c.RequestHistory(ctx, "child-details-changes", req.ID, client.WithAccessProfile("applicant")) {
		if !client.IsCode(err, client.CodeNotFound) {
			t.Fatalf("history under applicant: %v", err)
		}
	}
	// A record that is not a change request has no history.
	for _, err := range c.RequestHistory(ctx, "cases", kase.ID, cw) {
		if err == nil || !client.IsCode(err, client.CodeQueryInvalid) && !strings.Contains(err.Error(), "not a change request") {
			t.Fatalf("history of a case: %v", err)
		}
	}
}

// TestClientConditionalRead: If-None-Match with the current ETag is a 304
// without a body, surfaced as NotModified; after a patch the record comes
// back; a profile that may not read the record gets the concealed 404, never
// a 304.
func TestClientConditionalRead(t *testing.T) {
	srv, is := exampleHost(t)
	ctx := context.Background()
	cw := client.WithAccessProfile("caseworker")
	c, err := client.New(client.Options{BaseURL: srv.URL, Tokens: is.Source(t, issuertest.StandardClientID, nil)})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Create(ctx, "cases", caseData{CaseNumber: "CS-7000", SupportType: "maintenance", ApplicantNationalID: "P-7", HealthDistrict: "north", Status: "open", OpenedOn: "2026-11-07"}, cw)
	if err != nil {
		t.Fatal(err)
	}
	same, err := c.ReadIfChanged(ctx, "cases", rec.ID, rec.ETag, nil, cw)
	if err != nil || !same.NotModified || same.Record != nil || same.ETag != rec.ETag {
		t.Fatalf("unchanged: %+v %v", same, err)
	}
	patched, err := c.Patch(ctx, "cases", rec.ID, rec.ETag, []client.PatchOp{client.Replace("status", "suspended")}, cw)
	if err != nil {
		t.Fatal(err)
	}
	changed, err := c.ReadIfChanged(ctx, "cases", rec.ID, rec.ETag, []string{"status"}, cw)
	if err != nil || changed.NotModified || changed.Record == nil || changed.ETag != patched.ETag || string(changed.Record.DomainData) != `{"status":"suspended"}` {
		t.Fatalf("changed: %+v %v", changed, err)
	}
	if _, err := c.ReadIfChanged(ctx, "cases", rec.ID, patched.ETag, nil, client.WithAccessProfile("applicant")); !client.IsCode(err, client.CodeNotFound) {
		t.Fatalf("a conditional read under a profile that does not grant cases: %v", err)
	}
	if _, err := c.ReadIfChanged(ctx, "cases", rec.ID, "", nil, cw); err == nil {
		t.Fatal("a conditional read without an ETag was sent")
	}
}

// expiredFirst hands out an expired token once, then the tokens of fresh.
// It has no Refresh: the client asks it for a token again.
type expiredFirst struct {
	expired string
	given   atomic.Bool
	fresh   *tokensource.Source
}

func (s *expiredFirst) Token(ctx context.Context) (*tokensource.Token, error) {
	if !s.given.Swap(true) {
		return &tokensource.Token{AccessToken: s.expired, TokenType: "Bearer"}, nil
	}
	return s.fresh.Token(ctx)
}

// TestClientRenewsAnExpiredTokenOnce: a 401 to a token the host found
// expired renews the token once; a read and a keyed write are sent again
// with the new token (the write is written once), a write without a key is
// not; a source whose every token is expired gets one renewal and one more
// send, never a loop.
func TestClientRenewsAnExpiredTokenOnce(t *testing.T) {
	// The issuer's clock, shared with the token source, runs offset from the
	// host's: at -2 h every token it mints is expired for the host, while
	// the source holds it valid for 15 minutes.
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	var minted atomic.Int32
	srv, is := exampleHostWith(t, issuertest.Options{Clock: clock, Wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/token" {
				minted.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	}})
	target, _ := url.Parse(srv.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	var sent atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	ctx := context.Background()
	cw := client.WithAccessProfile("caseworker")

	// Every token expired: one renewal (Refresh), one more send, then the 401.
	offset.Store(int64(-2 * time.Hour))
	skewed := is.Source(t, issuertest.StandardClientID, func(c *tokensource.Config) { c.Now = clock })
	c, err := client.New(client.Options{BaseURL: proxy.URL, Tokens: skewed})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(ctx, "cases", "00000000-0000-0000-0000-000000000000", nil, cw)
	if !client.IsCode(err, client.CodeAuthenticationRefused) || sent.Load() != 2 || minted.Load() != 2 {
		t.Fatalf("a read with expired tokens only: %v (%d sent, %d minted)", err, sent.Load(), minted.Load())
	}
	expired, err := skewed.Token(ctx) // still cached: valid by the source's clock
	if err != nil || minted.Load() != 2 {
		t.Fatalf("cached token: %v (%d minted)", err, minted.Load())
	}
	offset.Store(0)

	// An expired token first, then fresh ones: retried where that is safe.
	fresh := is.Source(t, issuertest.StandardClientID, nil)
	renewing := func() *client.Client {
		c, err := client.New(client.Options{BaseURL: proxy.URL, Tokens: &expiredFirst{expired: expired.AccessToken, fresh: fresh}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	kase := caseData{CaseNumber: "CS-8000", SupportType: "maintenance", ApplicantNationalID: "P-8", HealthDistrict: "north", Status: "open", OpenedOn: "2026-11-08"}
	sent.Store(0)
	rec, err := renewing().Create(ctx, "cases", kase, cw)
	if err != nil || rec.Replayed || sent.Load() != 2 {
		t.Fatalf("a keyed create with an expired token first: %+v %v (%d sent)", rec, err, sent.Load())
	}
	sent.Store(0)
	if got, err := renewing().Read(ctx, "cases", rec.ID, nil, cw); err != nil || got.ID != rec.ID || sent.Load() != 2 {
		t.Fatalf("a read with an expired token first: %v (%d sent)", err, sent.Load())
	}
	sent.Store(0)
	unkeyed := renewing()
	kase.CaseNumber = "CS-8001"
	if _, err := unkeyed.Create(ctx, "cases", kase, cw, client.WithoutIdempotencyKey()); !client.IsCode(err, client.CodeAuthenticationRefused) || sent.Load() != 1 {
		t.Fatalf("a create without a key with an expired token: %v (%d sent)", err, sent.Load())
	}
	// Nothing was written; the next call carries the renewed token.
	if _, err := unkeyed.Create(ctx, "cases", kase, cw, client.WithoutIdempotencyKey()); err != nil {
		t.Fatalf("the create again, with the renewed token: %v", err)
	}
	n := 0
	for _, err := range unkeyed.Records(ctx, "cases", client.Query{Filter: "caseNumber eq 'CS-8000' or caseNumber eq 'CS-8001'"}, cw) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("%d cases, want 2 (each written once)", n)
	}
	// A token the source cannot replace is not sent again.
	sent.Store(0)
	static, _ := client.New(client.Options{BaseURL: proxy.URL, Tokens: client.StaticToken(expired.AccessToken)})
	if _, err := static.Read(ctx, "cases", rec.ID, nil, cw); !client.IsCode(err, client.CodeAuthenticationRefused) || sent.Load() != 1 {
		t.Fatalf("a static expired token: %v (%d sent)", err, sent.Load())
	}
}
