package host_test

// The last tests issue #27 found missing, over real HTTP: the review
// authority's cancelled result, a corrupted stored chunk at download, the
// verification policy digest in the frozen manifest, immediate-action
// target boundaries on the records effects create, and a change request
// driven by a client that sends exactly what the seed names through every
// row of both state tables.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/host"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/internal/testslack"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

// The authority's cancelled result (notes §5.4): the request stays
// submitted, the read shows the result, nothing is left to apply
// (application blocked), and the seed's row "answered, cancelled or
// superseded" decides the offer: revise_request with rebase true and
// cancel_request; apply is 412 and a revision (rebase false) 409.
func TestAuthorityCancelledResult(t *testing.T) {
	env := startReviewed(t)
	owner := env.owner
	childLoc, _ := owner.create(t, "children", `{"name":"Gil"}`)
	loc, tag := owner.create(t, "reviewed-changes", `{"childId":"`+filepath.Base(childLoc)+`","address":"Birch 9"}`)
	code, b := owner.act(t, loc+"/actions/submit", tag, "k-submit", `{}`)
	if code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}
	digest := decodeAction(t, b).Request.EffectDigest
	rid, _ := env.auth.submissionFor(filepath.Base(loc))
	owner.until(t, loc, func(r *requestDoc) bool { return submission(r)["state"] == "accepted" })
	env.auth.settle(rid, "cancelled", time.Now().Add(time.Hour), nil)
	r := owner.until(t, loc, func(r *requestDoc) bool { return resultState(r) == "cancelled" })

	res, _ := r.Review["result"].(map[string]any)
	delivery, _ := r.Review["delivery"].(map[string]any)
	if r.EngineState != "submitted" || r.ProposalVersion != 1 || r.Application != nil || res["resultId"] != "res-"+rid+"-cancelled" ||
		delivery["state"] != "received" || applicationState(r) != "blocked" || submission(r)["state"] != "accepted" {
		t.Fatalf("after a cancelled result: %s %+v", r.EngineState, r.Review)
	}
	if r.operations() != "revise_request,cancel_request" || r.action("revise_request").Rebase == nil || !*r.action("revise_request").Rebase {
		t.Fatalf("offered after a cancelled result: %+v", r.Actions)
	}
	_, tag = owner.read(t, loc)
	_, b = owner.act(t, loc+"/actions/apply", tag, "k-apply", fmt.Sprintf(`{"proposalVersion":1,"effectDigest":%q}`, digest))
	wantProblem(t, "apply over a cancelled result", 412, b, "precondition.failed")
	_, b = owner.act(t, loc+"/actions/revise", tag, "k-revision", `{"rebase":false}`)
	wantProblem(t, "a revision over a cancelled result", 409, b, "mutation.conflict")
	// Nothing was written by the refusals; the offered rebase goes through.
	rv := r.action("revise_request")
	code, b = owner.act(t, rv.Href, rv.IfMatch, "k-rebase", `{}`)
	if code != 200 {
		t.Fatalf("the offered revise: %d %s", code, b)
	}
	got, _ := owner.read(t, loc)
	if got.Data.Request.EngineState != "draft" || got.Data.Request.ProposalVersion != 2 || applicationState(got.Data.Request) != "blocked" {
		t.Fatalf("after the rebase: %+v", got.Data.Request)
	}
	// A settled result is not withdrawn.
	time.Sleep(300 * time.Millisecond)
	if key := env.auth.cancelled(rid); key != "" {
		t.Fatalf("a settled (cancelled) review was withdrawn with key %q", key)
	}
}

type conformanceEnv struct {
	owner, south caller
	scanner      *scanner
	dsn          string
	h            *host.Host
}

// startConformance serves testdata/conformance for a caller whose region
// claim is north (owner) and one whose region is south.
func startConformance(t *testing.T, workers bool) conformanceEnv {
	t.Helper()
	sc := &scanner{}
	scanSrv := httptest.NewServer(sc)
	t.Cleanup(scanSrv.Close)
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/conformance")); err != nil {
		t.Fatal(err)
	}
	yaml, _ := os.ReadFile(filepath.Join(dir, "registry.yaml"))
	yaml = bytes.ReplaceAll(yaml, []byte("VERIFIER_ENDPOINT"), []byte(scanSrv.URL+"/scan"))
	os.WriteFile(filepath.Join(dir, "registry.yaml"), yaml, 0o644)
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}, Claims: map[string]string{"region": "north"}}, addRegionalClient(t))
	is.Setup.Clients = append(is.Setup.Clients, issuertest.DevClient{ID: "colleague", Profile: "standard",
		KeyFile: filepath.Join(filepath.Dir(is.Setup.ConfigPath), "client-keys", "colleague.jwk"), Audience: is.Setup.TokenURL})
	dsn := storetest.NewDatabase(t)
	cfg := deployment(t, dir, dsn, is.HostAuthentication())
	if err := os.WriteFile(filepath.Join(cfg.Secrets.Root, "scanner-token"), []byte("scanner-secret-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, srv := serve(t, cfg)
	if workers {
		startWorkers(t, h)
	}
	return conformanceEnv{owner: caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)},
		south: caller{srv: srv, token: is.Token(t, "colleague")}, scanner: sc, dsn: dsn, h: h}
}

// exec runs one statement on the test's database.
func (env conformanceEnv) exec(t *testing.T, q string, args ...any) int64 {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), env.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tag, err := conn.Exec(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return tag.RowsAffected()
}

// A stored chunk corrupted in the database is never delivered as the
// content: corrupt from the first chunk, the download is refused before
// any header goes out; corrupt in a later chunk, or corrupt only as a
// whole (each chunk rewritten with a digest of its own), the response is
// aborted before its last byte, so a client never reads a complete 200.
func TestCorruptedStoredChunkIsNeverDeliveredComplete(t *testing.T) {
	env := startConformance(t, false)
	const chunk = store.ContentChunkBytes
	for _, tc := range []struct {
		name       string
		size       int
		seq        int
		consistent bool // the chunk's own digest is rewritten to match
		refused    bool // answered as an error, not a 200
	}{
		{"first and only chunk", 1000, 0, false, true},
		{"only chunk, rewritten with its digest", 1000, 0, true, true},
		{"second of three chunks", 2*chunk + 100, 1, false, false},
		{"last of three chunks, rewritten with its digest", 2*chunk + 100, 2, true, false},
		{"first of two chunks, rewritten with its digest", chunk + 10, 0, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := bytes.Repeat([]byte(tc.name[:1]+fmt.Sprint(tc.seq)), tc.size/2+1)[:tc.size]
			content[0] = byte(len(tc.name)) // distinct content per case (content is stored once per hash)
			loc, etag := env.owner.create(t, "claims", `{"text":"corrupt"}`)
			if resp, b := env.owner.upload(t, loc, "bulk", "application/octet-stream", etag, "u-"+tc.name, content); resp.StatusCode != 200 {
				t.Fatalf("upload: %d %s", resp.StatusCode, b)
			}
			path := loc + "/attachments/bulk?proposalVersion=1"
			if resp, got := env.owner.do(t, "GET", path, "", ""); resp.StatusCode != 200 || !bytes.Equal(got, content) {
				t.Fatalf("intact download: %d, %d bytes", resp.StatusCode, len(got))
			}
			// Flip one bit of the chunk's first byte, in the database.
			q := `UPDATE registrum.attachment_chunks SET bytes = set_byte(bytes, 0, get_byte(bytes, 0) # 1)`
			if tc.consistent {
				q = `UPDATE registrum.attachment_chunks SET bytes = set_byte(bytes, 0, get_byte(bytes, 0) # 1), chunk_sha256 = sha256(set_byte(bytes, 0, get_byte(bytes, 0) # 1))`
			}
			sum := sha256.Sum256(content)
			q += ` WHERE seq = $1 AND blob_id = (SELECT blob_id FROM registrum.attachment_blobs WHERE sha256 = $2)`
			if n := env.exec(t, q, tc.seq, hex.EncodeToString(sum[:])); n != 1 {
				t.Fatalf("corrupted %d chunks", n)
			}

			req, _ := http.NewRequest("GET", env.owner.srv.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+env.owner.token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tc.refused {
				if resp.StatusCode == 200 || bytes.Equal(got, content) || len(got) == tc.size {
					t.Fatalf("corrupt first chunk answered %d with %d bytes", resp.StatusCode, len(got))
				}
				return
			}
			if resp.StatusCode == 200 && rerr == nil {
				t.Fatalf("a corrupt chunk was delivered as a complete 200 (%d bytes of %d, equal to the content: %t)", len(got), tc.size, bytes.Equal(got, content))
			}
			if len(got) >= tc.size {
				t.Fatalf("the aborted response delivered all %d bytes", len(got))
			}
		})
	}
}

// Submission binds the verification policy digest into the frozen
// manifest: the proposal's slot entry of a verified slot carries
// verificationPolicyDigest, the digest /v1/registry publishes for that
// slot's policy; a slot without verification carries none.
func TestFrozenManifestCarriesTheVerificationPolicyDigest(t *testing.T) {
	env := startConformance(t, true)
	loc, etag := env.owner.create(t, "claims", `{"text":"verified"}`)
	resp, b := env.owner.upload(t, loc, "scan", "application/octet-stream", etag, "u1", []byte("clean content"))
	if resp.StatusCode != 200 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	resp, b = env.owner.upload(t, loc, "bulk", "application/octet-stream", resp.Header.Get("ETag"), "u2", []byte("plain content"))
	if resp.StatusCode != 200 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	r := env.owner.until(t, loc, func(r *requestDoc) bool { return r.action("submit_request") != nil })
	sub := r.action("submit_request")
	if code, b := env.owner.act(t, sub.Href, sub.IfMatch, "s1", `{}`); code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}

	_, reg := env.owner.do(t, "GET", "/v1/registry", "", "")
	var doc struct {
		Entities []struct {
			ID     string `json:"id"`
			Fields []struct {
				ID         string `json:"id"`
				Attachment *struct {
					Verification struct {
						PolicyDigest string `json:"policyDigest"`
					} `json:"verification"`
				} `json:"x-registry-attachment"`
			} `json:"fields"`
		} `json:"entities"`
	}
	if err := json.Unmarshal(reg, &doc); err != nil {
		t.Fatal(err)
	}
	published := ""
	for _, e := range doc.Entities {
		for _, f := range e.Fields {
			if e.ID == "claim" && f.ID == "scan" && f.Attachment != nil {
				published = f.Attachment.Verification.PolicyDigest
			}
		}
	}
	e := env.h.Package().EntityByID("claim")
	want := env.h.Package().VerificationPolicyDigest(e.Slot("scan"))
	if !strings.HasPrefix(want, "sha256:") || published != want {
		t.Fatalf("policy digest: registry publishes %q, the package's is %q", published, want)
	}

	got, _ := env.owner.read(t, loc)
	raw, _ := json.Marshal(got.Data.Request.Proposal["attachments"])
	var manifest struct {
		Slots []map[string]any `json:"slots"`
	}
	if err := json.Unmarshal(raw, &manifest); err != nil || len(manifest.Slots) != 2 {
		t.Fatalf("frozen manifest: %s", raw)
	}
	for _, s := range manifest.Slots {
		d, has := s["verificationPolicyDigest"]
		switch s["slotId"] {
		case "scan":
			if d != want || s["verificationStatus"] != "approved" {
				t.Errorf("verified slot in the manifest: %v, want verificationPolicyDigest %s", s, want)
			}
		case "bulk":
			if has {
				t.Errorf("unverified slot in the manifest carries a policy digest: %v", s)
			}
		default:
			t.Errorf("manifest slot %v", s)
		}
	}
}

// The action's targets bound every record an effect reaches, also the
// records it creates and the values a patch leaves: a created record, or
// a patched one, outside the caller's row boundary is the concealed 404
// (byte-identical to an unknown action's apart from traceId), with
// nothing written; a created record of an entity the targets do not list
// is refused alike.
func TestImmediateActionTargetsBoundCreatedRecords(t *testing.T) {
	env := startConformance(t, false)
	c := env.owner // region north
	post := func(path, body, key string) (int, []byte) {
		t.Helper()
		resp, b := c.do(t, "POST", path, "application/json", body, "Idempotency-Key", key)
		return resp.StatusCode, b
	}
	_, unknown := post("/v1/actions/nothing", `{"input":{"region":"south"},"preconditions":{}}`, "k0")
	count := func(entity string) int {
		return countRows(t, env.dsn, `SELECT count(*) FROM registrum.revisions WHERE entity_id = '`+entity+`'`)
	}

	code, b := post("/v1/actions/open-account", `{"input":{"region":"south"},"preconditions":{}}`, "k1")
	wantProblem(t, "create outside the boundary", 404, b, "resource.not_found")
	if withoutTrace(t, b) != withoutTrace(t, unknown) {
		t.Errorf("refusal %s\nunknown action %s", b, unknown)
	}
	if n := count("account"); n != 0 {
		t.Fatalf("%d account revisions after a refused create", n)
	}
	code, b = post("/v1/actions/open-account", `{"input":{"region":"north"},"preconditions":{}}`, "k2")
	var res struct {
		Results []struct {
			Entity, RecordID string
		}
	}
	if json.Unmarshal(b, &res); code != 200 || len(res.Results) != 1 || res.Results[0].Entity != "account" {
		t.Fatalf("create inside the boundary: %d %s", code, b)
	}
	northID := res.Results[0].RecordID

	// The first effect's create (a ledger entry) is inside, the second's
	// (an account in the south) is not: nothing of either is written.
	code, b = post("/v1/actions/open-with-entry", `{"input":{"account":"`+northID+`","region":"south"},"preconditions":{}}`, "k3")
	wantProblem(t, "a second effect creating outside the boundary", 404, b, "resource.not_found")
	if withoutTrace(t, b) != withoutTrace(t, unknown) {
		t.Errorf("refusal %s\nunknown action %s", b, unknown)
	}
	if a, l := count("account"), count("ledger"); a != 1 || l != 0 {
		t.Fatalf("after a refused second effect: %d account and %d ledger revisions", a, l)
	}
	if code, b = post("/v1/actions/open-with-entry", `{"input":{"account":"`+northID+`","region":"north"},"preconditions":{}}`, "k3b"); code != 200 {
		t.Fatalf("both effects inside: %d %s", code, b)
	}
	if a, l := count("account"), count("ledger"); a != 2 || l != 1 {
		t.Fatalf("after both effects: %d account and %d ledger revisions", a, l)
	}

	// A patch that would move the record out of the boundary.
	s, tb := post("/v1/actions/move-account/target-conditions", `{"input":{"account":"`+northID+`","region":"south"}}`, "")
	var tc struct {
		Preconditions map[string]struct{ IfMatch string } `json:"preconditions"`
	}
	if json.Unmarshal(tb, &tc); s != 200 || tc.Preconditions["move"].IfMatch == "" {
		t.Fatalf("target-conditions: %d %s", s, tb)
	}
	body := func(region string) string {
		return `{"input":{"account":"` + northID + `","region":"` + region + `"},"preconditions":{"move":{"ifMatch":` + jsonString(tc.Preconditions["move"].IfMatch) + `}}}`
	}
	code, b = post("/v1/actions/move-account", body("south"), "k4")
	wantProblem(t, "patch out of the boundary", 404, b, "resource.not_found")
	if n := count("account"); n != 2 {
		t.Fatalf("%d account revisions after a refused move", n)
	}
	if code, b = post("/v1/actions/move-account", body("north"), "k5"); code != 200 {
		t.Fatalf("a move inside the boundary: %d %s", code, b)
	}
	// The south caller's own region is theirs to open in.
	resp, sb := env.south.do(t, "POST", "/v1/actions/open-account", "application/json", `{"input":{"region":"south"},"preconditions":{}}`, "Idempotency-Key", "k6")
	if resp.StatusCode != 200 {
		t.Fatalf("south opens in south: %d %s", resp.StatusCode, sb)
	}
}

// walkEntities are the request entities the seed-client walk adds to the
// application project: review none with manual application (plain_change),
// and an authority review whose executor may not apply (stuck_reviewed).
const walkEntities = `  - id: plain_change
    route: plain-changes
    dataset: families
    fields: *quick-fields
    changeRequest:
      effects: *quick-effects
      review: {mode: none}
      application: {mode: manual}
  - id: stuck_reviewed
    route: stuck-reviewed
    dataset: families
    fields: *quick-fields
    changeRequest:
      effects: *quick-effects
      review: {authority: casework, policyId: stuck-review}
      application: {mode: automatic, executor: clerk-bot}
`

const walkGrants = `      - entity: plain_change
        operations: [create, get, patch, submit_request, revise_request, cancel_request, apply_request]
        readableFields: [child_id, phone]
        writableFields: [child_id, phone]
        readableRequestFields: [review_state, actor_reference]
        applyTargets: [{entity: child, rowBoundaries: unrestricted}]
        rowBoundaries: unrestricted
      - entity: stuck_reviewed
        operations: [create, get, patch, submit_request, revise_request, cancel_request]
        readableFields: [child_id, phone]
        writableFields: [child_id, phone]
        readableRequestFields: [review_state, actor_reference]
        rowBoundaries: unrestricted
`

// tokenGate stands between the executor and the issuer's token endpoint:
// held, it keeps the executor's token requests waiting; released, it
// answers the next fail requests 503, then forwards to the issuer.
type tokenGate struct {
	target string
	mu     sync.Mutex
	open   chan struct{}
	fail   int
	seen   atomic.Int32
	failed atomic.Int32
	srv    *httptest.Server
}

func newTokenGate(t *testing.T, target string, fail int) *tokenGate {
	g := &tokenGate{target: target, open: make(chan struct{}), fail: fail}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.seen.Add(1)
		select {
		case <-g.open:
		case <-r.Context().Done():
			return
		}
		g.mu.Lock()
		failing := g.fail > 0
		if failing {
			g.fail--
		}
		g.mu.Unlock()
		if failing {
			g.failed.Add(1)
			http.Error(w, "temporarily unavailable", http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, g.target, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(func() {
		g.release()
		g.srv.Close()
	})
	return g
}

func (g *tokenGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// seedClient drives change requests sending exactly what the seed names:
// {} for submit, revise and cancel; proposalVersion, effectDigest and
// reason for apply; each to the href and ifMatch of the offered action.
type seedClient struct {
	c caller
	n atomic.Int32
}

func (s *seedClient) read(t *testing.T, loc string) *requestDoc {
	t.Helper()
	env, _ := s.c.read(t, loc)
	return env.Data.Request
}

// follow calls the offered action op of the request at loc.
func (s *seedClient) follow(t *testing.T, loc, op string) []byte {
	t.Helper()
	r := s.read(t, loc)
	a := r.action(op)
	if a == nil {
		t.Fatalf("%s not offered: %+v", op, r.Actions)
	}
	body := `{}`
	if op == "apply_request" {
		body = fmt.Sprintf(`{"proposalVersion":%d,"effectDigest":%q,"reason":"checked"}`, a.ProposalVersion, a.EffectDigest)
	}
	code, b := s.c.act(t, a.Href, a.IfMatch, fmt.Sprintf("seed-%d", s.n.Add(1)), body)
	if code != 200 {
		t.Fatalf("%s %s: %d %s", op, body, code, b)
	}
	return b
}

// refused calls action (submit, revise, cancel, apply) unoffered, with the
// seed's body, and wants the refusal.
func (s *seedClient) refused(t *testing.T, loc, action string, status int, code string) {
	t.Helper()
	r, tag := s.c.read(t, loc)
	body := `{}`
	if action == "apply" {
		body = fmt.Sprintf(`{"proposalVersion":%d,"effectDigest":%q}`, r.Data.Request.ProposalVersion, r.Data.Request.EffectDigest)
	}
	_, b := s.c.act(t, loc+"/actions/"+action, tag, fmt.Sprintf("seed-%d", s.n.Add(1)), body)
	wantProblem(t, action+" not offered", status, b, code)
}

// state is engineState/application state.
func state(r *requestDoc) string { return r.EngineState + "/" + applicationState(r) }

// A change request driven by a client that sends exactly what the seed
// names goes through every row of the seed's source state table, its
// review outcome table and the review application states table
// (docs/decisions/change-requests.md); each row asserts the state before
// and the state reached.
func TestSeedClientWalksEveryStateRow(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}}, addClient(t, `"families:write"`))
	keyFile := filepath.Join(filepath.Dir(is.Setup.ConfigPath), "client-keys", "colleague.jwk")
	auth := newAuthority(t, is.Config.Issuer)
	gate := newTokenGate(t, is.Setup.TokenURL, 2)
	rcv := newReceiver(t)
	dir := applicationProject(t)
	reg := filepath.Join(dir, "registry.yaml")
	b, _ := os.ReadFile(reg)
	s := strings.Replace(string(b), "\nprofiles:\n", "\n"+walkEntities+"profiles:\n", 1) + walkGrants
	if err := os.WriteFile(reg, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	client := fmt.Sprintf("{tokenUrl: %q, clientId: colleague, keyRef: secret:file/colleague.jwk}", is.Setup.TokenURL)
	executor := fmt.Sprintf("{tokenUrl: %q, clientId: colleague, keyRef: secret:file/colleague.jwk, audience: %q}", gate.srv.URL+"/token", is.Config.Issuer)
	extra := fmt.Sprintf("reviewAuthorities:\n  casework: {endpoint: %q, profile: families-casework, producerId: families, pollSeconds: 1, client: %s}\n"+
		"executors:\n  clerk-bot: {accessProfile: family, client: %s}\n", auth.srv.URL, client, executor)
	cfg := deployment(t, dir, storetest.NewDatabase(t), is.HostAuthentication(), extra, hosttest.Destination(rcv.srv.URL+"/hooks/registry"))
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"colleague.jwk": key, "webhook-key": eventKey} {
		if err := os.WriteFile(filepath.Join(cfg.Secrets.Root, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h, srv := serve(t, cfg)
	sc := &seedClient{c: caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}}
	childLoc, _ := sc.c.create(t, "children", `{"name":"Hal","phone":"100"}`)
	childID := filepath.Base(childLoc)
	phone := 200
	create := func(route string) string {
		phone++
		loc, _ := sc.c.create(t, route, fmt.Sprintf(`{"childId":%q,"phone":"%d"}`, childID, phone))
		return loc
	}
	// submitted creates and submits a request under review and waits
	// until the authority accepted it.
	submitted := func(t *testing.T, route string) (string, string) {
		phone++
		data := fmt.Sprintf(`{"childId":%q,"phone":"%d"}`, childID, phone)
		if route == "reviewed-changes" {
			data = fmt.Sprintf(`{"childId":%q,"address":"Elm %d"}`, childID, phone)
		}
		loc, _ := sc.c.create(t, route, data)
		sc.follow(t, loc, "submit_request")
		rid, _ := auth.submissionFor(filepath.Base(loc))
		sc.c.until(t, loc, func(r *requestDoc) bool { return submission(r)["state"] == "accepted" })
		return loc, rid
	}
	until := func(t *testing.T, loc, want string) *requestDoc {
		return sc.c.until(t, loc, func(r *requestDoc) bool { return state(r) == want })
	}
	var quick, auto string // the automatic applications the gate holds
	parent := t

	type row struct {
		table, from, event, to string
		// walk brings a request to from, returns it, then does the event
		// and returns the request once it settled.
		walk func(t *testing.T) (before, after *requestDoc)
	}
	rows := []row{
		// Phase 1: no worker runs.
		{"source", "draft/blocked", "cancel {}", "cancelled/blocked", func(t *testing.T) (*requestDoc, *requestDoc) {
			loc := create("plain-changes")
			before := sc.read(t, loc)
			sc.follow(t, loc, "cancel_request")
			return before, sc.read(t, loc)
		}},
		{"source+application", "draft/blocked", "submit {} (review none, manual)", "submitted/ready", func(t *testing.T) (*requestDoc, *requestDoc) {
			loc := create("plain-changes")
			before := sc.read(t, loc)
			sc.follow(t, loc, "submit_request")
			return before, sc.read(t, loc)
		}},
		{"source+application", "submitted/ready", "revise {} (offered rebase true: review none counts as approved)", "draft/blocked", func(t *testing.T) (*requestDoc, *requestDoc) {
			loc := create("plain-changes")
			sc.follow(t, loc, "submit_request")
			before := sc.read(t, loc)
			if rv := before.action("revise_request"); rv == nil || !*rv.Rebase {
				t.Fatalf("revise offered %+v", before.Actions)
			}
			sc.follow(t, loc, "revise_request")
			after := sc.read(t, loc)
			if after.ProposalVersion != 2 {
				t.Errorf("proposal version %d after a revise", after.ProposalVersion)
			}
			return before, after
		}},
		{"source+application", "submitted/ready", "apply {proposalVersion, effectDigest, reason}", "applied/applied", func(t *testing.T) (*requestDoc, *requestDoc) {
			loc := create("plain-changes")
			sc.follow(t, loc, "submit_request")
			before := sc.read(t, loc)
			res := decodeAction(t, sc.follow(t, loc, "apply_request"))
			after := sc.read(t, loc)
			if res.Request.EngineState != "applied" || after.Application["reasonPresent"] != true || after.Application["reason"] != "checked" ||
				after.ApplierReference == "" || len(after.Actions) != 0 {
				t.Errorf("applied: %+v", after)
			}
			return before, after
		}},
		{"source+application", "submitted/ready", "cancel {}", "cancelled/blocked", func(t *testing.T) (*requestDoc, *requestDoc) {
			loc := create("plain-changes")
			sc.follow(t, loc, "submit_request")
			before := sc.read(t, loc)
			sc.follow(t, loc, "cancel_request")
			return before, sc.read(t, loc)
		}},
		{"application", "draft/blocked", "submit {} (review none, automatic): the apply job is queued by the submit", "submitted/queued", func(t *testing.T) (*requestDoc, *requestDoc) {
			quick = create("quick-changes")
			before := sc.read(t, quick)
			sc.follow(t, quick, "submit_request")
			after := sc.read(t, quick)
			if after.action("apply_request") != nil {
				t.Errorf("apply offered to a person under automatic application: %+v", after.Actions)
			}
			return before, after
		}},
		// Phase 2: workers run; the gate holds the executor's token.
		{"application", "submitted/queued", "the executor's job starts", "submitted/applying", func(t *testing.T) (*requestDoc, *requestDoc) {
			before := sc.read(t, quick)
			startWorkers(parent, h) // until the walk ends, not this row
			return before, until(t, quick, "submitted/applying")
		}},
		{"source+application", "draft/blocked", "submit {} (authority review)", "submitted/awaitingReview", func(t *testing.T) (*requestDoc, *requestDoc) {
			loc := create("auto-changes")
			before := sc.read(t, loc)
			sc.follow(t, loc, "submit_request")
			auth.submissionFor(filepath.Base(loc))
			return before, sc.c.until(t, loc, func(r *requestDoc) bool { return submission(r)["state"] == "accepted" })
		}},
		{"application", "submitted/awaitingReview", "approval stored, automatic (the job starts at once: queued, then applying)", "submitted/applying", func(t *testing.T) (*requestDoc, *requestDoc) {
			loc, rid := submitted(t, "auto-changes")
			auto = loc
			before := sc.read(t, loc)
			auth.settle(rid, "approved", time.Now().Add(3*time.Second), nil)
			r := sc.c.until(t, loc, func(r *requestDoc) bool { return resultState(r) == "approved" })
			if st := applicationState(r); st != "queued" && st != "applying" {
				t.Fatalf("an approval stored for an automatic application: %s", st)
			}
			return before, until(t, loc, "submitted/applying")
		}},
		{"application", "submitted/applying", "availableUntil passes: an application already applying keeps its state", "submitted/applying", func(t *testing.T) (*requestDoc, *requestDoc) {
			before := sc.read(t, auto)
			res, _ := before.Review["result"].(map[string]any)
			end, err := time.Parse(time.RFC3339Nano, fmt.Sprint(res["availableUntil"]))
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Until(end) + 500*time.Millisecond)
			return before, sc.read(t, auto)
		}},
		{"application", "submitted/applying", "a passing failure (the token endpoint answers 503): River retries", "submitted/applying", func(t *testing.T) (*requestDoc, *requestDoc) {
			before := sc.read(t, quick)
			deadline := time.Now().Add(15 * time.Second)
			for gate.seen.Load() < 1 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			gate.release()
			for gate.failed.Load() < 1 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if gate.failed.Load() < 1 {
				t.Fatal("the executor never met the failing token endpoint")
			}
			return before, sc.read(t, quick)
		}},
		{"application", "submitted/applying", "the apply commits", "applied/applied", func(t *testing.T) (*requestDoc, *requestDoc) {
			before := sc.read(t, quick)
			after := until(t, quick, "applied/applied")
			if after.ApplierReference != "executor:clerk-bot" {
				t.Errorf("applied by %q", after.ApplierReference)
			}
			return before, after
		}},
		{"application", "draft/blocked", "submit {} (review none, automatic), then the executor's apply is refused (its profile may not apply)", "submitted/blocked", func(t *testing.T) (*requestDoc, *requestDoc) {
			loc := create("stuck-changes")
			before := sc.read(t, loc)
			sc.follow(t, loc, "submit_request")
			after := sc.c.until(t, loc, func(r *requestDoc) bool { return applicationState(r) == "blocked" })
			if rec, _ := after.Review["recovery"].(map[string]any); rec["state"] != "operatorAttention" || rec["code"] != "automatic_apply_refused" {
				t.Errorf("refused automatic apply: %+v", after.Review)
			}
			return before, after
		}},
		{"application", "submitted/blocked", "availableUntil passes (a refused automatic apply of an approval)", "submitted/expired", func(t *testing.T) (*requestDoc, *requestDoc) {
			loc, rid := submitted(t, "stuck-reviewed")
			auth.settle(rid, "approved", time.Now().Add(3*time.Second), nil)
			before := sc.c.until(t, loc, func(r *requestDoc) bool { return applicationState(r) == "blocked" })
			return before, until(t, loc, "submitted/expired")
		}},
		{"application", "submitted/queued", "availableUntil passes (the poller's transaction, no job taken)", "submitted/expired", func(t *testing.T) (*requestDoc, *requestDoc) {
			loc, _ := submitted(t, "auto-changes")
			end := time.Now().Add(1500 * time.Millisecond)
			rid := filepath.Base(loc)
			_, _, err := h.Store().Write(context.Background(), nil, func(w *store.Writer) (*store.Outcome, error) {
				if _, err := w.StoreResult(context.Background(), "auto_change", rid, 1, &store.ReviewResult{ResultID: "r-walk", Status: "approved", CompletedAt: time.Now(), AvailableUntil: &end, Body: []byte(`{}`)}); err != nil {
					return nil, err
				}
				_, err := w.QueueAutoApplication(context.Background(), "auto_change", rid, 1)
				return &store.Outcome{}, err
			})
			if err != nil {
				t.Fatal(err)
			}
			before := sc.read(t, loc)
			time.Sleep(time.Until(end) + 300*time.Millisecond)
			return before, sc.read(t, loc)
		}},
		// The review outcome table, under an authority with manual application.
		{"outcome+application", "submitted/awaitingReview", "none yet: revise {} (offered as a revision)", "draft/blocked", func(t *testing.T) (*requestDoc, *requestDoc) {
			loc, _ := submitted(t, "reviewed-changes")
			before := sc.read(t, loc)
			if before.operations() != "revise_request,cancel_request" || *before.action("revise_request").Rebase {
				t.Fatalf("offered before a result: %+v", before.Actions)
			}
			sc.refused(t, loc, "apply", 412, "precondition.failed")
			sc.follow(t, loc, "revise_request")
			return before, sc.read(t, loc)
		}},
		{"outcome+application", "submitted/awaitingReview", "approval stored, manual; then apply {proposalVersion, effectDigest, reason}", "applied/applied", func(t *testing.T) (*requestDoc, *requestDoc) {
			loc, rid := submitted(t, "reviewed-changes")
			before := sc.read(t, loc)
			auth.settle(rid, "approved", time.Now().Add(time.Hour), nil)
			r := until(t, loc, "submitted/ready")
			if r.operations() != "apply_request,revise_request,cancel_request" || !*r.action("revise_request").Rebase {
				t.Fatalf("offered after an approval: %+v", r.Actions)
			}
			sc.follow(t, loc, "apply_request")
			return before, sc.read(t, loc)
		}},
		{"outcome+application", "submitted/ready", "availableUntil passes", "submitted/expired", func(t *testing.T) (*requestDoc, *requestDoc) {
			loc, rid := submitted(t, "reviewed-changes")
			// The approval must still be read as ready before it expires:
			// the window leaves the scheduling allowance for a loaded machine
			// (a 2 s window expired before the poller stored the result).
			auth.settle(rid, "approved", time.Now().Add(2*time.Second+testslack.Scheduling), nil)
			before := sc.c.until(t, loc, func(r *requestDoc) bool { return resultState(r) == "approved" })
			after := until(t, loc, "submitted/expired")
			if after.operations() != "revise_request,cancel_request" || *after.action("revise_request").Rebase {
				t.Fatalf("offered after the approval expired: %+v", after.Actions)
			}
			sc.refused(t, loc, "apply", 412, "precondition.failed")
			return before, after
		}},
	}
	for _, status := range []string{"rejected", "changesRequested", "answered", "cancelled", "superseded"} {
		rows = append(rows, row{"outcome+application", "submitted/awaitingReview", status + " stored, then the offered action with {}", "", nil})
		i := len(rows) - 1
		rows[i].to = "draft/blocked"
		if status == "rejected" {
			rows[i].to = "cancelled/blocked"
		}
		rows[i].walk = func(t *testing.T) (*requestDoc, *requestDoc) {
			loc, rid := submitted(t, "reviewed-changes")
			before := sc.read(t, loc)
			auth.settle(rid, status, time.Now().Add(time.Hour), nil)
			r := sc.c.until(t, loc, func(r *requestDoc) bool { return resultState(r) == status })
			if applicationState(r) != "blocked" || r.EngineState != "submitted" {
				t.Fatalf("%s stored: %s", status, state(r))
			}
			sc.refused(t, loc, "apply", 412, "precondition.failed")
			if status == "rejected" {
				if r.operations() != "cancel_request" {
					t.Fatalf("offered after rejected: %+v", r.Actions)
				}
				sc.refused(t, loc, "revise", 409, "mutation.conflict")
				sc.follow(t, loc, "cancel_request")
				return before, sc.read(t, loc)
			}
			wantRebase := status != "changesRequested"
			if r.operations() != "revise_request,cancel_request" || *r.action("revise_request").Rebase != wantRebase {
				t.Fatalf("offered after %s: %+v", status, r.Actions)
			}
			sc.follow(t, loc, "revise_request")
			return before, sc.read(t, loc)
		}
	}
	rows = append(rows, row{"outcome+application", "submitted/expired", "revise {} (offered as a revision)", "draft/blocked", func(t *testing.T) (*requestDoc, *requestDoc) {
		loc, rid := submitted(t, "reviewed-changes")
		auth.settle(rid, "approved", time.Now().Add(-time.Minute), nil)
		before := until(t, loc, "submitted/expired")
		sc.follow(t, loc, "revise_request")
		return before, sc.read(t, loc)
	}})

	for _, r := range rows {
		if !t.Run(r.table+": "+r.from+" → "+r.event, func(t *testing.T) {
			before, after := r.walk(t)
			if got := state(before); got != r.from {
				t.Fatalf("before %s: %s, want %s", r.event, got, r.from)
			}
			if got := state(after); got != r.to {
				t.Fatalf("after %s: %s, want %s (%+v)", r.event, got, r.to, after.Review)
			}
		}) {
			return // later rows build on earlier ones
		}
	}
}
