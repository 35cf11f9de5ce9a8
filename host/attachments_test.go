package host_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/host"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/project"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/storetest"
)

// scanner is an http verifier the test controls: down answers 503; up
// rejects content holding "MALWARE" and approves the rest.
type scanner struct {
	down  atomic.Bool
	calls atomic.Int32
	// hold, when set, blocks calls until it is closed.
	mu   sync.Mutex
	hold chan struct{}
}

func (s *scanner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	s.mu.Lock()
	hold := s.hold
	s.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if r.Header.Get("Authorization") != "Bearer scanner-secret-token-0123456789" {
		http.Error(w, "no", http.StatusUnauthorized)
		return
	}
	b, _ := io.ReadAll(r.Body)
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != r.Header.Get("X-Content-Sha256") {
		http.Error(w, "digest", http.StatusBadRequest)
		return
	}
	if s.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if bytes.Contains(b, []byte("MALWARE")) {
		io.WriteString(w, `{"verdict":"rejected"}`)
		return
	}
	io.WriteString(w, `{"verdict":"approved"}`)
}

type attachEnv struct {
	owner, colleague caller
	scanner          *scanner
	dsn              string
	host             *host.Host
}

func startAttachments(t *testing.T, workers bool) attachEnv {
	t.Helper()
	return startAttachmentsWithPool(t, workers, 0)
}

// withPoolMaxConns returns dsn with pgx's pool_max_conns set to n, in the
// form dsn is written in (URL or keyword/value).
func withPoolMaxConns(dsn string, n int) string {
	setting := fmt.Sprintf("pool_max_conns=%d", n)
	switch {
	case !strings.Contains(dsn, "://"):
		return dsn + " " + setting
	case strings.Contains(dsn, "?"):
		return dsn + "&" + setting
	}
	return dsn + "?" + setting
}

// startAttachmentsWithPool starts the attachment deployment with a host
// pool of at most poolMax connections (pgx's default when 0).
func startAttachmentsWithPool(t *testing.T, workers bool, poolMax int) attachEnv {
	t.Helper()
	sc := &scanner{}
	scanSrv := httptest.NewServer(sc)
	t.Cleanup(scanSrv.Close)
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/attachments")); err != nil {
		t.Fatal(err)
	}
	yaml, _ := os.ReadFile(filepath.Join(dir, "registry.yaml"))
	yaml = bytes.ReplaceAll(yaml, []byte("VERIFIER_ENDPOINT"), []byte(scanSrv.URL+"/scan"))
	os.WriteFile(filepath.Join(dir, "registry.yaml"), yaml, 0o644)

	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}, Claims: map[string]string{"region": "north"}}, addRegionalClient(t))
	is.Setup.Clients = append(is.Setup.Clients, issuertest.DevClient{ID: "colleague", Profile: "standard",
		KeyFile: filepath.Join(filepath.Dir(is.Setup.ConfigPath), "client-keys", "colleague.jwk"), Audience: is.Setup.TokenURL})
	dsn := storetest.NewDatabase(t)
	hostDSN := dsn
	if poolMax > 0 {
		hostDSN = withPoolMaxConns(dsn, poolMax)
	}
	cfg := deployment(t, dir, hostDSN, is.HostAuthentication(), "jobs: {timeoutSeconds: 5, rescueAfterSeconds: 10}\n")
	if err := os.WriteFile(filepath.Join(cfg.Secrets.Root, "scanner-token"), []byte("scanner-secret-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, srv := serve(t, cfg)
	if workers {
		startWorkers(t, h)
	}
	return attachEnv{
		owner:     caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)},
		colleague: caller{srv: srv, token: is.Token(t, "colleague")},
		scanner:   sc, dsn: dsn, host: h,
	}
}

// upload PATCHes bytes into a slot.
func (c caller) upload(t *testing.T, loc, slot, ctype, etag, key string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("PATCH", c.srv.URL+loc+"/attachments/"+slot, bytes.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Authorization", "Bearer "+c.token)
	if etag != "" {
		req.Header.Set("If-Match", etag)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func slotOf(t *testing.T, body []byte, slot string) map[string]any {
	t.Helper()
	var env struct {
		Data struct {
			DomainData map[string]json.RawMessage `json:"domainData"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("not an envelope: %s", body)
	}
	raw, ok := env.Data.DomainData[slot]
	if !ok {
		t.Fatalf("domainData has no member %s: %s", slot, body)
	}
	var m map[string]any
	json.Unmarshal(raw, &m)
	return m
}

func TestAttachmentUploadDownloadAndSubmit(t *testing.T) {
	env := startAttachments(t, false)
	owner, colleague := env.owner, env.colleague
	loc, etag := owner.create(t, "claims", `{"text":"a claim"}`)

	// Empty slots are null members of domainData; the hidden slot (not
	// readable) is absent.
	resp, b := owner.do(t, "GET", loc, "", "")
	if m := slotOf(t, b, "evidence"); m != nil {
		t.Fatalf("empty slot: %v", m)
	}
	if strings.Contains(string(b), `"hidden"`) {
		t.Fatalf("unreadable slot shown: %s", b)
	}

	// /v1/registry lists the readable slots with x-registry-attachment.
	_, reg := owner.do(t, "GET", "/v1/registry", "", "")
	if !strings.Contains(string(reg), `"id":"evidence","apiName":"evidence","type":"attachment","x-registry-attachment":{"classification":"restricted","contentTypes":["application/pdf","text/plain"],"maximumBytes":1024,"requiredForSubmit":true,"verification":{"required":false}}`) ||
		!regexp.MustCompile(`"verification":\{"policyDigest":"sha256:[0-9a-f]{64}","policyId":"malware-v1","required":true,"verifier":"scanner"\}`).Match(reg) || strings.Contains(string(reg), `"hidden"`) {
		t.Fatalf("registry document: %s", reg)
	}

	// Submitting without the required slot: 412.
	var doc envelope
	json.Unmarshal(b, &doc)
	// Not offered (records.SlotRefusal), and refused when sent anyway.
	if doc.Data.Request.action("submit_request") != nil {
		t.Fatalf("submit offered without the required slot: %s", b)
	}
	submit := &offered{Href: loc + "/actions/submit?accessProfile=family"}
	code, pb := owner.act(t, submit.Href, etag, "s0", `{"actorReference":"me"}`)
	wantProblem(t, "submit without the required slot", 412, pb, "precondition.failed")

	exact := bytes.Repeat([]byte("a"), 1024)
	// Refusals, each with nothing written (the ETag stays valid).
	resp, b = owner.upload(t, loc, "evidence", "text/plain", etag, "", exact)
	wantProblem(t, "upload without Idempotency-Key", 400, b, "request.invalid")
	resp, b = owner.upload(t, loc, "evidence", "text/plain", "", "k1", exact)
	wantProblem(t, "upload without If-Match", 428, b, "precondition.required")
	resp, b = owner.upload(t, loc, "evidence", "image/png", etag, "k1", exact)
	wantProblem(t, "wrong media type", 400, b, "request.invalid")
	resp, b = owner.upload(t, loc, "evidence", "text/plain", etag, "k1", append(exact, 'b'))
	wantProblem(t, "one byte over maximumBytes", 400, b, "request.invalid")
	resp, b = owner.upload(t, loc, "evidence", "text/plain", etag, "k1", nil)
	wantProblem(t, "empty upload", 400, b, "request.invalid")
	resp, b = colleague.upload(t, loc, "evidence", "text/plain", etag, "k1", exact)
	wantProblem(t, "non-owner upload", 412, b, "precondition.failed")
	resp, b = owner.upload(t, loc, "hidden", "text/plain", etag, "k1", []byte("x"))
	wantProblem(t, "slot outside writableFields", 404, b, "resource.not_found")
	resp, b = owner.upload(t, loc, "evidence", "text/plain", `"engine-hmac-sha256:`+strings.Repeat("0", 64)+`"`, "k1", exact)
	wantProblem(t, "stale If-Match", 412, b, "precondition.failed")
	if n := countRows(t, env.dsn, `SELECT count(*) FROM registrum.request_attachments`); n != 0 {
		t.Fatalf("%d slot rows after refusals", n)
	}

	// Exactly maximumBytes is accepted; the record moves to a new revision.
	resp, b = owner.upload(t, loc, "evidence", "text/plain", etag, "k1", exact)
	if resp.StatusCode != 200 {
		t.Fatalf("upload of exactly maximumBytes: %d %s", resp.StatusCode, b)
	}
	etag2 := resp.Header.Get("ETag")
	if etag2 == etag {
		t.Fatal("the upload did not advance the request's revision")
	}
	sum := sha256.Sum256(exact)
	m := slotOf(t, b, "evidence")
	if m["sha256"] != hex.EncodeToString(sum[:]) || m["byteSize"] != float64(1024) || m["contentType"] != "text/plain" ||
		m["verificationStatus"] != "notRequired" || m["filled"] != true || m["erased"] != false || m["proposalVersion"] != float64(1) || m["slotId"] != "evidence" {
		t.Fatalf("slot metadata: %v", m)
	}
	// The same key and request replays; the same key with other bytes conflicts.
	resp, b2 := owner.upload(t, loc, "evidence", "text/plain", etag, "k1", exact)
	if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(b, b2) {
		t.Fatalf("replay: %d %s", resp.StatusCode, b2)
	}
	resp, b2 = owner.upload(t, loc, "evidence", "text/plain", etag, "k1", []byte("other"))
	wantProblem(t, "same key, other bytes", 409, b2, "idempotency.conflict")

	// Collection reads carry the slots of each request's current proposal:
	// each item its own (a second claim, nothing uploaded, shows its slots
	// empty), the unreadable slot on none.
	other, _ := owner.create(t, "claims", `{"text":"another claim"}`)
	_, lb := owner.do(t, "GET", "/v1/records/claims", "", "")
	var list struct {
		Items []struct {
			RecordIdentifier string                     `json:"recordIdentifier"`
			DomainData       map[string]json.RawMessage `json:"domainData"`
		} `json:"items"`
	}
	if err := json.Unmarshal(lb, &list); err != nil || len(list.Items) != 2 {
		t.Fatalf("list: %s", lb)
	}
	for _, it := range list.Items {
		ev, scan, text := string(it.DomainData["evidence"]), string(it.DomainData["scan"]), string(it.DomainData["text"])
		_, hidden := it.DomainData["hidden"]
		switch {
		case strings.HasSuffix(loc, "/"+it.RecordIdentifier):
			if !strings.HasPrefix(ev, `{"byteSize":1024,`) || scan != "null" || text != `"a claim"` || hidden {
				t.Fatalf("list item of the claim with evidence: %s", lb)
			}
		case strings.HasSuffix(other, "/"+it.RecordIdentifier):
			if ev != "null" || scan != "null" || text != `"another claim"` || hidden {
				t.Fatalf("list item of the claim without uploads: %s", lb)
			}
		default:
			t.Fatalf("list item of no claim: %s", lb)
		}
	}

	// Download: the exact bytes, as an attachment, never cached or sniffed.
	resp, got := owner.do(t, "GET", loc+"/attachments/evidence?proposalVersion=1", "", "")
	if resp.StatusCode != 200 || !bytes.Equal(got, exact) {
		t.Fatalf("download: %d %q", resp.StatusCode, got)
	}
	for h, want := range map[string]string{"Content-Type": "text/plain", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
		"Content-Disposition": `attachment; filename=evidence`, "Content-Length": "1024"} {
		if resp.Header.Get(h) != want {
			t.Errorf("%s: %q, want %q", h, resp.Header.Get(h), want)
		}
	}
	resp, b = owner.do(t, "GET", loc+"/attachments/evidence?proposalVersion=2", "", "")
	wantProblem(t, "download of an unknown proposal version", 404, b, "resource.not_found")
	resp, b = owner.do(t, "GET", loc+"/attachments/evidence", "", "")
	wantProblem(t, "download without proposalVersion", 400, b, "query.invalid")
	resp, b = owner.do(t, "GET", loc+"/attachments/scan?proposalVersion=1", "", "")
	wantProblem(t, "download of an empty slot", 404, b, "resource.not_found")

	// A pending upload (no worker runs in this test) is not downloadable
	// and blocks submission, though the slot is optional.
	resp, b = owner.upload(t, loc, "scan", "application/octet-stream", etag2, "k2", []byte("clean bytes"))
	if resp.StatusCode != 200 {
		t.Fatalf("upload to the verified slot: %d %s", resp.StatusCode, b)
	}
	etag3 := resp.Header.Get("ETag")
	if m := slotOf(t, b, "scan"); m["verificationStatus"] != "pending" {
		t.Fatalf("verified slot after upload: %v", m)
	}
	resp, b = owner.do(t, "GET", loc+"/attachments/scan?proposalVersion=1", "", "")
	wantProblem(t, "download of pending content", 404, b, "resource.not_found")
	code, pb = owner.act(t, submit.Href, etag3, "s1", `{"actorReference":"me"}`)
	wantProblem(t, "submit with a pending slot", 412, pb, "precondition.failed")

	// DELETE with a body is refused; without one it empties the slot.
	resp, b = owner.do(t, "DELETE", loc+"/attachments/scan", "text/plain", "x", "If-Match", etag3, "Idempotency-Key", "d1")
	wantProblem(t, "DELETE with a body", 400, b, "request.invalid")
	resp, b = owner.do(t, "DELETE", loc+"/attachments/scan", "", "", "If-Match", etag3, "Idempotency-Key", "d1")
	if resp.StatusCode != 200 || slotOf(t, b, "scan") != nil {
		t.Fatalf("removal: %d %s", resp.StatusCode, b)
	}
	etag4 := resp.Header.Get("ETag")

	// Slots are engine-owned: a create or JSON Patch cannot set them.
	resp, b = owner.do(t, "POST", "/v1/records/claims", "application/json", `{"data":{"text":"x","evidence":{"sha256":"00"}}}`)
	wantProblem(t, "create setting a slot", 400, b, "request.invalid")
	resp, b = owner.do(t, "PATCH", loc, "application/json-patch+json", `[{"op":"replace","path":"/data/evidence","value":null}]`, "If-Match", etag4)
	if resp.StatusCode != 400 {
		t.Fatalf("patch of a slot: %d %s", resp.StatusCode, b)
	}

	// Submission binds the manifest into the frozen proposal.
	code, pb = owner.act(t, submit.Href, etag4, "s2", `{"actorReference":"me"}`)
	if code != 200 {
		t.Fatalf("submit: %d %s", code, pb)
	}
	var full map[string]any
	resp, b = owner.do(t, "GET", loc, "", "")
	json.Unmarshal(b, &full)
	prop := full["data"].(map[string]any)["request"].(map[string]any)["proposal"].(map[string]any)
	manifest, _ := json.Marshal(prop["attachments"])
	if !strings.Contains(string(manifest), hex.EncodeToString(sum[:])) {
		t.Fatalf("proposal manifest: %s", manifest)
	}
	// A submitted request's slots cannot change.
	resp, b = owner.upload(t, loc, "evidence", "text/plain", resp.Header.Get("ETag"), "k9", exact)
	if resp.StatusCode != 412 {
		t.Fatalf("upload to a submitted request: %d %s", resp.StatusCode, b)
	}
	// Revise carries the slots into the next draft.
	var rd envelope
	json.Unmarshal(b, &rd)
	_, b = owner.do(t, "GET", loc, "", "")
	json.Unmarshal(b, &rd)
	if rv := rd.Data.Request.action("revise_request"); rv == nil {
		t.Fatalf("revise not offered: %s", b)
	} else {
		code, pb = owner.act(t, rv.Href, rv.IfMatch, "r1", `{"actorReference":"me","rebase":true}`)
		if code != 200 {
			t.Fatalf("revise: %d %s", code, pb)
		}
		_, b = owner.do(t, "GET", loc, "", "")
		if m := slotOf(t, b, "evidence"); m["proposalVersion"] != float64(2) || m["sha256"] != hex.EncodeToString(sum[:]) {
			t.Fatalf("slot after revise: %v", m)
		}
		resp, got = owner.do(t, "GET", loc+"/attachments/evidence?proposalVersion=2", "", "")
		if resp.StatusCode != 200 || !bytes.Equal(got, exact) {
			t.Fatalf("download of the revised draft's slot: %d", resp.StatusCode)
		}
	}
	// Content is kept once per hash.
	if n := countRows(t, env.dsn, `SELECT count(*) FROM registrum.attachment_blobs WHERE sha256 = '`+hex.EncodeToString(sum[:])+`'`); n != 1 {
		t.Fatalf("%d copies of one content", n)
	}
}

// TestConcurrentSlotWritesOnTheSmallestPool uploads into the slots of
// several drafts at once on a host whose pool holds two connections: no
// write may hold its connection while it asks the pool for another (the
// request's history is read in the write's own transaction), or the
// uploads wait on each other until they time out.
func TestConcurrentSlotWritesOnTheSmallestPool(t *testing.T) {
	const drafts = 6
	env := startAttachmentsWithPool(t, false, 2)
	type draft struct{ loc, etag string }
	ds := make([]draft, drafts)
	for i := range ds {
		ds[i].loc, ds[i].etag = env.owner.create(t, "claims", fmt.Sprintf(`{"text":"claim %d"}`, i))
	}
	client := &http.Client{Timeout: 60 * time.Second}
	var wg sync.WaitGroup
	errs := make(chan error, 2*drafts)
	for i, d := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("PATCH", env.owner.srv.URL+d.loc+"/attachments/evidence", strings.NewReader(fmt.Sprintf("evidence %d", i)))
			req.Header.Set("Content-Type", "text/plain")
			req.Header.Set("Authorization", "Bearer "+env.owner.token)
			req.Header.Set("If-Match", d.etag)
			req.Header.Set("Idempotency-Key", fmt.Sprintf("upload-%d", i))
			resp, err := client.Do(req)
			if err != nil {
				errs <- fmt.Errorf("upload %d: %w", i, err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				errs <- fmt.Errorf("upload %d: %d %s", i, resp.StatusCode, b)
				return
			}
			// A patch of the same draft reads its history in its own
			// transaction too.
			req, _ = http.NewRequest("PATCH", env.owner.srv.URL+d.loc, strings.NewReader(`[{"op":"replace","path":"/data/text","value":"changed"}]`))
			req.Header.Set("Content-Type", "application/json-patch+json")
			req.Header.Set("Authorization", "Bearer "+env.owner.token)
			req.Header.Set("If-Match", resp.Header.Get("ETag"))
			resp, err = client.Do(req)
			if err != nil {
				errs <- fmt.Errorf("patch %d: %w", i, err)
				return
			}
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				errs <- fmt.Errorf("patch %d: %d %s", i, resp.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := countRows(t, env.dsn, `SELECT count(*) FROM registrum.request_attachments`); n != drafts {
		t.Fatalf("%d slot rows, want %d", n, drafts)
	}
}

func TestAttachmentVerificationRetriesAndRejects(t *testing.T) {
	env := startAttachments(t, true)
	owner := env.owner
	env.scanner.down.Store(true)
	loc, etag := owner.create(t, "claims", `{"text":"scanned"}`)
	resp, b := owner.upload(t, loc, "scan", "application/octet-stream", etag, "u1", []byte("clean content"))
	if resp.StatusCode != 200 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	etag = resp.Header.Get("ETag")
	// The scanner is down: the verdict stays pending while attempts are retried.
	waitFor(t, 15*time.Second, "two attempts", func() bool { return env.scanner.calls.Load() >= 2 })
	_, b = owner.do(t, "GET", loc, "", "")
	if m := slotOf(t, b, "scan"); m["verificationStatus"] != "pending" {
		t.Fatalf("while the scanner is down: %v", m)
	}
	env.scanner.down.Store(false)
	waitFor(t, 30*time.Second, "approval", func() bool {
		_, b := owner.do(t, "GET", loc, "", "")
		return slotOf(t, b, "scan")["verificationStatus"] == "approved"
	})
	resp, got := owner.do(t, "GET", loc+"/attachments/scan?proposalVersion=1", "", "")
	if resp.StatusCode != 200 || string(got) != "clean content" {
		t.Fatalf("download after approval: %d %q", resp.StatusCode, got)
	}
	// Every attempt and the verdict are audited.
	if n := countRows(t, env.dsn, `SELECT count(*) FROM registrum.audit WHERE operation = 'attachment.verify' AND outcome = 'attempt'`); n < 3 {
		t.Fatalf("%d attempts audited", n)
	}
	if n := countRows(t, env.dsn, `SELECT count(*) FROM registrum.audit WHERE operation = 'attachment.verify' AND outcome = 'approved'`); n != 1 {
		t.Fatalf("%d approvals audited", n)
	}

	// An approval is reused for the exact content, media type and policy.
	calls := env.scanner.calls.Load()
	loc2, etag2 := owner.create(t, "claims", `{"text":"same bytes"}`)
	resp, b = owner.upload(t, loc2, "scan", "application/octet-stream", etag2, "u2", []byte("clean content"))
	if m := slotOf(t, b, "scan"); resp.StatusCode != 200 || m["verificationStatus"] != "approved" {
		t.Fatalf("reused approval: %d %v", resp.StatusCode, m)
	}
	if env.scanner.calls.Load() != calls {
		t.Fatal("the scanner was called again for approved content")
	}

	// Rejected content: not downloadable, blocks submission.
	resp, b = owner.upload(t, loc, "scan", "application/octet-stream", etag, "u3", []byte("MALWARE inside"))
	if resp.StatusCode != 200 {
		t.Fatalf("replacement: %d %s", resp.StatusCode, b)
	}
	etag = resp.Header.Get("ETag")
	waitFor(t, 15*time.Second, "rejection", func() bool {
		_, b := owner.do(t, "GET", loc, "", "")
		return slotOf(t, b, "scan")["verificationStatus"] == "rejected"
	})
	resp, b = owner.do(t, "GET", loc+"/attachments/scan?proposalVersion=1", "", "")
	wantProblem(t, "download of rejected content", 404, b, "resource.not_found")
	resp, b = owner.upload(t, loc, "evidence", "application/pdf", etag, "u4", []byte("%PDF-1.7 evidence"))
	if resp.StatusCode != 200 {
		t.Fatalf("evidence: %d %s", resp.StatusCode, b)
	}
	var doc envelope
	json.Unmarshal(b, &doc)
	if doc.Data.Request.action("submit_request") != nil {
		t.Fatalf("submit offered with rejected content: %s", b)
	}
	code, pb := owner.act(t, loc+"/actions/submit?accessProfile=family", resp.Header.Get("ETag"), "s1", `{"actorReference":"me"}`)
	if code != 412 {
		t.Fatalf("submit with rejected content: %d %s", code, pb)
	}
}

func countRows(t *testing.T, dsn, q string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestAttachmentErasureDiscardsALateVerdict(t *testing.T) {
	env := startAttachments(t, true)
	owner := env.owner
	hold := make(chan struct{})
	env.scanner.mu.Lock()
	env.scanner.hold = hold
	env.scanner.mu.Unlock()
	loc, etag := owner.create(t, "claims", `{"text":"to erase"}`)
	resp, b := owner.upload(t, loc, "scan", "application/octet-stream", etag, "e1", []byte("erase me"))
	if resp.StatusCode != 200 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	waitFor(t, 15*time.Second, "the scanner call", func() bool { return env.scanner.calls.Load() >= 1 })

	// The operator erases the content while the verifier is deciding.
	pool, err := pgxpool.New(context.Background(), env.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	id := loc[strings.LastIndex(loc, "/")+1:]
	res, err := store.EraseAttachment(context.Background(), pool, "claim", id, "scan", strings.Repeat("ab", 16))
	if err != nil || res.Slots != 1 || !res.ContentDeleted {
		t.Fatalf("erase: %+v %v", res, err)
	}
	close(hold)
	waitFor(t, 15*time.Second, "the discarded verdict", func() bool {
		return countRows(t, env.dsn, `SELECT count(*) FROM registrum.audit WHERE operation = 'attachment.verify' AND outcome = 'discarded'`) == 1
	})
	if n := countRows(t, env.dsn, `SELECT count(*) FROM registrum.attachment_verifications WHERE verdict <> 'pending'`); n != 0 {
		t.Fatalf("%d verdicts settled after erasure", n)
	}
	if n := countRows(t, env.dsn, `SELECT count(*) FROM registrum.audit WHERE operation = 'attachment.erase'`); n != 1 {
		t.Fatalf("%d erasures audited", n)
	}
	// Erasure keeps slot id, version, filled, erased, size and hash only.
	_, b = owner.do(t, "GET", loc, "", "")
	m := slotOf(t, b, "scan")
	sum := sha256.Sum256([]byte("erase me"))
	if m["erased"] != true || m["filled"] != true || m["sha256"] != hex.EncodeToString(sum[:]) || m["byteSize"] != float64(8) || len(m) != 6 {
		t.Fatalf("erased slot: %v", m)
	}
	resp, b = owner.do(t, "GET", loc+"/attachments/scan?proposalVersion=1", "", "")
	wantProblem(t, "download of erased content", 404, b, "resource.not_found")
	if _, err := store.EraseAttachment(context.Background(), pool, "claim", id, "scan", strings.Repeat("ab", 16)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second erasure: %v", err)
	}
	// The same bytes uploaded again are verified afresh.
	resp, b = owner.do(t, "GET", loc, "", "")
	resp, b = owner.upload(t, loc, "scan", "application/octet-stream", resp.Header.Get("ETag"), "e2", []byte("erase me"))
	if resp.StatusCode != 200 || slotOf(t, b, "scan")["verificationStatus"] != "pending" {
		t.Fatalf("upload after erasure: %d %s", resp.StatusCode, b)
	}
	waitFor(t, 15*time.Second, "the new verdict", func() bool {
		_, b := owner.do(t, "GET", loc, "", "")
		return slotOf(t, b, "scan")["verificationStatus"] == "approved"
	})
}

// TestEICARVerifierRejectsTheTestFileEndToEnd builds the example EICAR
// verifier, pins it in the project as a go-plugin verifier, and uploads the
// EICAR test file and a clean file through the record host: the job runs
// the pinned binary and the test file is rejected.
func TestEICARVerifierRejectsTheTestFileEndToEnd(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/attachments")); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "verifiers", "eicar-verifier")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/plugins/eicar-verifier").CombinedOutput(); err != nil {
		t.Fatalf("build the EICAR verifier: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(bin)
	digest := sha256.Sum256(b)
	yaml, _ := os.ReadFile(filepath.Join(dir, "registry.yaml"))
	yaml = regexp.MustCompile(`(?m)^  - \{id: scanner, kind: http.*$`).ReplaceAll(yaml,
		[]byte(`  - {id: scanner, kind: go-plugin, path: verifiers/eicar-verifier, sha256: "sha256:`+hex.EncodeToString(digest[:])+`"}`))
	os.WriteFile(filepath.Join(dir, "registry.yaml"), yaml, 0o644)

	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}}, nil)
	cfg := deployment(t, dir, storetest.NewDatabase(t), is.HostAuthentication())
	h, srv := serve(t, cfg)
	startWorkers(t, h)
	owner := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}

	eicar := []byte(strings.Join([]string{`X5O!P%@AP[4\PZX54(P^)7CC)7}$`, "EICAR-STANDARD-", "ANTIVIRUS-TEST-", "FILE!$H+H*"}, ""))
	for _, c := range []struct {
		content []byte
		want    string
	}{{eicar, "rejected"}, {[]byte("an ordinary scan"), "approved"}} {
		loc, etag := owner.create(t, "claims", `{"text":"scan"}`)
		resp, b := owner.upload(t, loc, "scan", "application/octet-stream", etag, "eicar-"+c.want, c.content)
		if resp.StatusCode != 200 || slotOf(t, b, "scan")["verificationStatus"] != "pending" {
			t.Fatalf("upload: %d %s", resp.StatusCode, b)
		}
		waitFor(t, 30*time.Second, c.want, func() bool {
			_, b := owner.do(t, "GET", loc, "", "")
			return slotOf(t, b, "scan")["verificationStatus"] == c.want
		})
		resp, _ = owner.do(t, "GET", loc+"/attachments/scan?proposalVersion=1", "", "")
		if want := map[string]int{"rejected": 404, "approved": 200}[c.want]; resp.StatusCode != want {
			t.Fatalf("download of %s content: %d, want %d", c.want, resp.StatusCode, want)
		}
	}
}

// addRegionalClient registers a second client ("colleague", region south)
// in a dev issuer's folder.
func addRegionalClient(t *testing.T) func(dir string) {
	return func(dir string) {
		priv, pub := issuertest.GenerateKey(t, "ES256")
		privJSON, _ := priv.MarshalJSON()
		pubJSON, _ := pub.MarshalJSON()
		if err := os.WriteFile(filepath.Join(dir, "client-keys", "colleague.jwk"), privJSON, 0o600); err != nil {
			t.Fatal(err)
		}
		reg := fmt.Sprintf("clientId: colleague\nprincipal: service:colleague\nauthorization:\n  scopes: [\"families:write\"]\n  claims:\n    region: south\nkeys:\n  - %s\n", pubJSON)
		if err := os.WriteFile(filepath.Join(dir, "clients", "colleague.yaml"), []byte(reg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAttachmentRowBoundary: a request outside the caller's row boundary
// is not found for upload, removal and download; inside, it works.
func TestAttachmentRowBoundary(t *testing.T) {
	env := startAttachments(t, false)
	loc, etag := env.owner.create(t, "regional-claims", `{"region":"north"}`)
	resp, b := env.colleague.upload(t, loc, "evidence", "text/plain", etag, "b1", []byte("x"))
	wantProblem(t, "upload outside the boundary", 404, b, "resource.not_found")
	resp, b = env.owner.upload(t, loc, "evidence", "text/plain", etag, "b1", []byte("inside"))
	if resp.StatusCode != 200 {
		t.Fatalf("upload inside the boundary: %d %s", resp.StatusCode, b)
	}
	etag = resp.Header.Get("ETag")
	resp, b = env.colleague.do(t, "GET", loc+"/attachments/evidence?proposalVersion=1", "", "")
	wantProblem(t, "download outside the boundary", 404, b, "resource.not_found")
	resp, b = env.colleague.do(t, "DELETE", loc+"/attachments/evidence", "", "", "If-Match", etag, "Idempotency-Key", "b2")
	wantProblem(t, "removal outside the boundary", 404, b, "resource.not_found")
	resp, b = env.owner.do(t, "GET", loc+"/attachments/evidence?proposalVersion=1", "", "")
	if resp.StatusCode != 200 || string(b) != "inside" {
		t.Fatalf("download inside the boundary: %d %s", resp.StatusCode, b)
	}
}

// TestSlotsAreEngineOwnedInEffects: an effect can neither set a slot nor
// take a value from one; the compiler refuses both.
func TestSlotsAreEngineOwnedInEffects(t *testing.T) {
	for name, edit := range map[string][3]string{
		"set a slot":       {"set: {text: {value: regional}}", "set: {region: {value: north}, evidence: {value: x}}\n          target: {entity: regional_claim}", "slots are engine-owned and effects cannot write them"},
		"read from a slot": {"set: {text: {fromField: text}}", "set: {text: {fromField: evidence}}", `fromField "evidence" is not a field`},
	} {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS("testdata/attachments")); err != nil {
			t.Fatal(err)
		}
		yaml, _ := os.ReadFile(filepath.Join(dir, "registry.yaml"))
		yaml = bytes.ReplaceAll(yaml, []byte("VERIFIER_ENDPOINT"), []byte("http://127.0.0.1:9/scan"))
		doc := string(yaml)
		if name == "set a slot" {
			doc = strings.Replace(doc, "          target: {entity: note}\n          set: {text: {value: regional}}", "          "+edit[1], 1)
		} else {
			doc = strings.Replace(doc, edit[0], edit[1], 1)
		}
		if doc == string(yaml) {
			t.Fatalf("%s: the edit did not apply", name)
		}
		os.WriteFile(filepath.Join(dir, "registry.yaml"), []byte(doc), 0o644)
		_, err := project.Compile(dir, project.Options{Fingerprint: layout.Fingerprint})
		if err == nil || !strings.Contains(err.Error(), edit[2]) || strings.Count(err.Error(), "\n") != 1 {
			t.Errorf("%s: compiled (%v)", name, err)
		}
	}
}
