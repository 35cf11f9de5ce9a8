package host_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
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
	"testing"
	"time"

	"github.com/registrum/registrum/host"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// authority is a review authority in the test process, speaking the
// protocol over real HTTP: it accepts submissions (idempotently by key),
// and answers results once the test settles them.
type authority struct {
	t       *testing.T
	issuer  string
	mu      sync.Mutex
	byKey   map[string]string         // Idempotency-Key → requestId
	subs    map[string]map[string]any // requestId → submission body
	digests map[string]string         // requestId → submission digest
	results map[string][]byte         // requestId → result document
	cancels map[string]string         // requestId → Idempotency-Key of its cancel
	sends   int
	srv     *httptest.Server
}

func newAuthority(t *testing.T, issuer string) *authority {
	a := &authority{t: t, issuer: issuer, byKey: map[string]string{}, subs: map[string]map[string]any{}, digests: map[string]string{}, results: map[string][]byte{}, cancels: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/review-requests", a.submit)
	mux.HandleFunc("GET /v1/review-requests/{id}/result", a.result)
	mux.HandleFunc("POST /v1/review-requests/{id}/cancel", a.cancel)
	a.srv = httptest.NewServer(a.authenticated(mux))
	t.Cleanup(a.srv.Close)
	return a
}

// authenticated admits calls with a bearer token of the test's issuer and
// the configured profile header.
func (a *authority) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		parts := strings.Split(tok, ".")
		var claims struct {
			Iss string `json:"iss"`
		}
		if ok && len(parts) == 3 {
			payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
			json.Unmarshal(payload, &claims)
		}
		if claims.Iss != a.issuer || r.Header.Get("Registry-Casework-Profile") != "families-casework" {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *authority) submit(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	canon, err := canonjson.Transform(raw)
	var body map[string]any
	if err != nil || json.Unmarshal(raw, &body) != nil || r.Header.Get("Idempotency-Key") == "" {
		http.Error(w, "bad submission", http.StatusBadRequest)
		return
	}
	sum := sha256.Sum256(canon)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sends++
	id, seen := a.byKey[r.Header.Get("Idempotency-Key")]
	if !seen {
		id = fmt.Sprintf("rr-%d", len(a.byKey)+1)
		a.byKey[r.Header.Get("Idempotency-Key")] = id
		a.subs[id] = body
		a.digests[id] = "sha256:" + hex.EncodeToString(sum[:])
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]any{"requestId": id, "subject": a.subs[id]["subject"],
		"policy": map[string]any{"id": a.subs[id]["kind"], "version": "3", "digest": "sha256:" + strings.Repeat("ab", 32)}, "submissionDigest": a.digests[id]})
}

func (a *authority) cancel(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := r.PathValue("id")
	if _, ok := a.subs[id]; !ok || r.Header.Get("Idempotency-Key") == "" {
		http.NotFound(w, r)
		return
	}
	a.cancels[id] = r.Header.Get("Idempotency-Key")
	w.WriteHeader(http.StatusNoContent)
}

// cancelled reports the Idempotency-Key of the cancel of requestId, "" if none came.
func (a *authority) cancelled(requestID string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cancels[requestID]
}

func (a *authority) result(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.results[r.PathValue("id")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// submissionFor waits until the authority holds the submission of record id.
func (a *authority) submissionFor(id string) (string, map[string]any) {
	a.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		a.mu.Lock()
		for rid, body := range a.subs {
			if body["subject"].(map[string]any)["id"] == id {
				a.mu.Unlock()
				return rid, body
			}
		}
		a.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	a.t.Fatalf("the authority never received a submission of %s", id)
	return "", nil
}

// settle makes the authority answer a result for requestId; edit may
// change the document before it is served.
func (a *authority) settle(requestID, status string, availableUntil time.Time, edit func(map[string]any)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	doc := map[string]any{"resultId": "res-" + requestID + "-" + status, "requestId": requestID, "subject": a.subs[requestID]["subject"],
		"policy":           map[string]any{"id": a.subs[requestID]["kind"], "version": "3", "digest": "sha256:" + strings.Repeat("ab", 32)},
		"submissionDigest": a.digests[requestID], "status": status, "completedAt": time.Now().UTC().Format(time.RFC3339),
		"availableUntil": availableUntil.UTC().Format(time.RFC3339)}
	if edit != nil {
		edit(doc)
	}
	a.results[requestID], _ = json.Marshal(doc)
}

type reviewEnv struct {
	owner caller
	auth  *authority
}

// startReviewed serves the requests project with the authority "casework"
// and the executor "clerk-bot" (the second client of the issuer).
func startReviewed(t *testing.T) reviewEnv {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}}, addClient(t, `"families:write"`))
	keyFile := filepath.Join(filepath.Dir(is.Setup.ConfigPath), "client-keys", "colleague.jwk")
	a := newAuthority(t, is.Config.Issuer)
	client := fmt.Sprintf("{tokenUrl: %q, clientId: colleague, keyRef: secret:file/colleague.jwk}", is.Setup.TokenURL)
	extra := fmt.Sprintf("reviewAuthorities:\n  casework: {endpoint: %q, profile: families-casework, producerId: families, pollSeconds: 1, client: %s}\nexecutors:\n  clerk-bot: {accessProfile: family, client: %s}\n",
		a.srv.URL, client, client)
	cfg := deployment(t, requestProject(t), storetest.NewDatabase(t), is.HostAuthentication(), extra)
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Secrets.Root, "colleague.jwk"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	h, srv := serve(t, cfg)
	startWorkers(t, h)
	return reviewEnv{owner: caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}, auth: a}
}

// until reads path until cond holds (15 s at most).
func (c caller) until(t *testing.T, path string, cond func(*requestDoc) bool) *requestDoc {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		env, _ := c.read(t, path)
		if cond(env.Data.Request) {
			return env.Data.Request
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached the awaited state: %+v", path, env.Data.Request)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func submission(r *requestDoc) map[string]any {
	s, _ := r.Review["submission"].(map[string]any)
	return s
}

func resultState(r *requestDoc) string {
	res, _ := r.Review["result"].(map[string]any)
	s, _ := res["state"].(string)
	return s
}

func TestReviewAuthorityApprovesAndAPersonApplies(t *testing.T) {
	env := startReviewed(t)
	owner := env.owner
	childLoc, _ := owner.create(t, "children", `{"name":"Cy"}`)
	childID := filepath.Base(childLoc)
	loc, tag := owner.create(t, "reviewed-changes", `{"childId":"`+childID+`","address":"Oak 4"}`)
	code, b := owner.act(t, loc+"/actions/submit", tag, "k1", `{"actorReference":"parent-1"}`)
	if code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}
	digest := decodeAction(t, b).Request.EffectDigest

	// The job sends the frozen submission after commit; the authority
	// accepts it; the host records the binding.
	rid, body := env.auth.submissionFor(filepath.Base(loc))
	subject := body["subject"].(map[string]any)
	if body["kind"] != "address-review" || subject["source"] != "families" || subject["type"] != "reviewed_change" ||
		subject["version"] != float64(1) || subject["digest"] != digest || body["requesterReference"] != "parent-1" {
		t.Fatalf("submission body: %v", body)
	}
	r := owner.until(t, loc, func(r *requestDoc) bool { return submission(r)["state"] == "accepted" })
	if submission(r)["requestId"] != rid || r.Review["application"].(map[string]any)["state"] != "awaitingReview" {
		t.Fatalf("accepted submission: %+v", r.Review)
	}
	// No result yet: revise (as a revision) and cancel, never apply.
	if r.operations() != "revise_request,cancel_request" || *r.action("revise_request").Rebase {
		t.Fatalf("offered before a result: %+v", r.Actions)
	}

	// Approved, available for an hour: the result is pulled and stored.
	env.auth.settle(rid, "approved", time.Now().Add(time.Hour), nil)
	r = owner.until(t, loc, func(r *requestDoc) bool { return resultState(r) == "approved" })
	if r.operations() != "apply_request,revise_request,cancel_request" || !*r.action("revise_request").Rebase ||
		r.Review["application"].(map[string]any)["state"] != "ready" || r.Review["delivery"].(map[string]any)["state"] != "received" {
		t.Fatalf("approved request: %+v %+v", r.Actions, r.Review)
	}
	apply := r.action("apply_request")

	// Apply is authoritative: it fetches the result again. An authority
	// that now answers another submission's digest is not evidence.
	env.auth.settle(rid, "approved", time.Now().Add(time.Hour), func(d map[string]any) { d["submissionDigest"] = "sha256:" + strings.Repeat("0", 64) })
	_, b = owner.act(t, apply.Href, apply.IfMatch, "k-apply-1", fmt.Sprintf(`{"actorReference":"clerk","proposalVersion":1,"effectDigest":%q}`, digest))
	wantProblem(t, "apply over a result that does not match", 412, b, "precondition.failed")
	env.auth.settle(rid, "approved", time.Now().Add(time.Hour), nil)
	code, b = owner.act(t, apply.Href, apply.IfMatch, "k-apply-2", fmt.Sprintf(`{"actorReference":"clerk","proposalVersion":1,"effectDigest":%q}`, digest))
	if code != 200 || decodeAction(t, b).Request.EngineState != "applied" {
		t.Fatalf("apply: %d %s", code, b)
	}
	if child, _ := owner.read2(t, childLoc); child["address"] != "Oak 4" {
		t.Fatalf("child after apply: %v", child)
	}
	env.auth.mu.Lock()
	sends := env.auth.sends
	env.auth.mu.Unlock()
	if sends != 1 {
		t.Errorf("the submission was sent %d times", sends)
	}
}

func TestReviewOutcomesDecideWhatIsOffered(t *testing.T) {
	env := startReviewed(t)
	owner := env.owner
	childLoc, _ := owner.create(t, "children", `{"name":"Di"}`)
	childID := filepath.Base(childLoc)
	submitted := func(address string) (string, string) {
		loc, tag := owner.create(t, "reviewed-changes", `{"childId":"`+childID+`","address":"`+address+`"}`)
		if code, b := owner.act(t, loc+"/actions/submit", tag, "k-"+address, `{"actorReference":"p"}`); code != 200 {
			t.Fatalf("submit: %d %s", code, b)
		}
		rid, _ := env.auth.submissionFor(filepath.Base(loc))
		owner.until(t, loc, func(r *requestDoc) bool { return submission(r)["state"] == "accepted" })
		return loc, rid
	}
	for _, tc := range []struct {
		status, offered string
		until           time.Time
		rebase          bool
		reviseCode      int
	}{
		{"rejected", "cancel_request", time.Now().Add(time.Hour), false, 409},
		{"changesRequested", "revise_request,cancel_request", time.Now().Add(time.Hour), false, 0},
		{"approved", "apply_request,revise_request,cancel_request", time.Now().Add(-time.Minute), false, 0}, // expired: no apply
		{"answered", "revise_request,cancel_request", time.Now().Add(time.Hour), true, 0},
		{"superseded", "revise_request,cancel_request", time.Now().Add(time.Hour), true, 0},
	} {
		loc, rid := submitted(tc.status)
		env.auth.settle(rid, tc.status, tc.until, nil)
		r := owner.until(t, loc, func(r *requestDoc) bool { return resultState(r) == tc.status })
		want := tc.offered
		if tc.status == "approved" {
			want = "revise_request,cancel_request" // availableUntil passed by the database clock
			if st := r.Review["application"].(map[string]any)["state"]; st != "expired" {
				t.Errorf("expired approval: application state %v", st)
			}
		}
		if r.operations() != want {
			t.Errorf("%s: offered %s, want %s", tc.status, r.operations(), want)
			continue
		}
		_, tag := owner.read(t, loc)
		_, b := owner.act(t, loc+"/actions/apply", tag, "k-apply-"+tc.status, fmt.Sprintf(`{"actorReference":"c","proposalVersion":1,"effectDigest":%q}`, r.EffectDigest))
		wantProblem(t, tc.status+": apply", 412, b, "precondition.failed")
		if tc.reviseCode == 409 {
			_, b = owner.act(t, loc+"/actions/revise", tag, "k-rev-"+tc.status, `{"actorReference":"p","rebase":false}`)
			wantProblem(t, tc.status+": revise", 409, b, "mutation.conflict")
			continue
		}
		rv := r.action("revise_request")
		if *rv.Rebase != tc.rebase {
			t.Errorf("%s: revise offered with rebase %v", tc.status, *rv.Rebase)
		}
		_, b = owner.act(t, rv.Href, tag, "k-wrong-"+tc.status, fmt.Sprintf(`{"actorReference":"p","rebase":%t}`, !tc.rebase))
		wantProblem(t, tc.status+": revise with the other rebase", 409, b, "mutation.conflict")
	}

	// A result that does not match the submission is not stored: the
	// request needs an operator.
	loc, rid := submitted("unmatched")
	env.auth.settle(rid, "approved", time.Now().Add(time.Hour), func(d map[string]any) { d["policy"] = map[string]any{"id": "other-policy"} })
	r := owner.until(t, loc, func(r *requestDoc) bool { return r.Review["recovery"].(map[string]any)["state"] == "operatorAttention" })
	if resultState(r) != "" || r.Review["delivery"].(map[string]any)["state"] != "unmatched" {
		t.Fatalf("unmatched result: %+v", r.Review)
	}
}

func TestReviewAuthorityApprovalIsAppliedByTheExecutor(t *testing.T) {
	env := startReviewed(t)
	owner := env.owner
	childLoc, _ := owner.create(t, "children", `{"name":"Ed"}`)
	loc, tag := owner.create(t, "auto-changes", `{"childId":"`+filepath.Base(childLoc)+`","phone":"777"}`)
	if code, b := owner.act(t, loc+"/actions/submit", tag, "k1", `{"actorReference":"parent-2"}`); code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}
	rid, _ := env.auth.submissionFor(filepath.Base(loc))
	r := owner.until(t, loc, func(r *requestDoc) bool { return submission(r)["state"] == "accepted" })
	if r.action("apply_request") != nil {
		t.Fatalf("automatic application offered apply to a person: %+v", r.Actions)
	}
	env.auth.settle(rid, "approved", time.Now().Add(time.Hour), nil)
	r = owner.until(t, loc, func(r *requestDoc) bool { return r.EngineState == "applied" })
	if r.ApplierReference != "executor:clerk-bot" || r.Review["application"].(map[string]any)["state"] != "applied" {
		t.Fatalf("applied by the executor: %+v", r)
	}
	if child, _ := owner.read2(t, childLoc); child["phone"] != "777" {
		t.Fatalf("child after the automatic apply: %v", child)
	}
}

// startWorkers runs the host's job workers until the test ends.
func startWorkers(t *testing.T, h *host.Host) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.RunWorkers(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("workers: %v", err)
		}
	})
}

// TestWithdrawnSubmissions checks that cancelling or revising a request
// whose proposal the authority is still reviewing tells the authority
// (POST …/cancel with a stable key, sent by a job after commit), and that
// a settled review is not withdrawn.
func TestWithdrawnSubmissions(t *testing.T) {
	env := startReviewed(t)
	owner := env.owner
	childLoc, _ := owner.create(t, "children", `{"name":"Ed"}`)
	childID := filepath.Base(childLoc)
	submitted := func(address string) (string, string, string) {
		loc, tag := owner.create(t, "reviewed-changes", `{"childId":"`+childID+`","address":"`+address+`"}`)
		if code, b := owner.act(t, loc+"/actions/submit", tag, "k-"+address, `{"actorReference":"p"}`); code != 200 {
			t.Fatalf("submit: %d %s", code, b)
		}
		rid, _ := env.auth.submissionFor(filepath.Base(loc))
		owner.until(t, loc, func(r *requestDoc) bool { return submission(r)["state"] == "accepted" })
		_, tag = owner.read(t, loc)
		return loc, rid, tag
	}

	// Cancelled under review: the authority is told, the submission ends cancelled.
	loc, rid, tag := submitted("Elm 1")
	if code, b := owner.act(t, loc+"/actions/cancel", tag, "k-cancel", `{"actorReference":"p"}`); code != 200 {
		t.Fatalf("cancel: %d %s", code, b)
	}
	r := owner.until(t, loc, func(r *requestDoc) bool { return submission(r)["state"] == "cancelled" })
	if key := env.auth.cancelled(rid); !strings.HasPrefix(key, "registrum-withdrawal:reviewed_change:") {
		t.Fatalf("the authority saw cancel key %q for %s", key, rid)
	}
	if r.EngineState != "cancelled" || len(r.Actions) != 0 {
		t.Fatalf("cancelled request: %+v", r)
	}

	// Revised under review (offered as a revision before any result): the
	// replaced proposal's review is withdrawn too.
	loc, rid, tag = submitted("Elm 2")
	r = owner.until(t, loc, func(r *requestDoc) bool { return r.action("revise_request") != nil })
	if code, b := owner.act(t, r.action("revise_request").Href, tag, "k-revise", `{"actorReference":"p","rebase":false}`); code != 200 {
		t.Fatalf("revise: %d %s", code, b)
	}
	deadline := time.Now().Add(15 * time.Second)
	for env.auth.cancelled(rid) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("the review of the revised proposal %s was never withdrawn", rid)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A settled review is not withdrawn: cancelling a rejected request
	// sends nothing.
	loc, rid, _ = submitted("Elm 3")
	env.auth.settle(rid, "rejected", time.Now().Add(time.Hour), nil)
	owner.until(t, loc, func(r *requestDoc) bool { return resultState(r) == "rejected" })
	_, tag = owner.read(t, loc)
	if code, b := owner.act(t, loc+"/actions/cancel", tag, "k-cancel-3", `{"actorReference":"p"}`); code != 200 {
		t.Fatalf("cancel of a rejected request: %d %s", code, b)
	}
	time.Sleep(300 * time.Millisecond)
	r = owner.until(t, loc, func(r *requestDoc) bool { return r.EngineState == "cancelled" })
	if key := env.auth.cancelled(rid); key != "" || submission(r)["state"] != "accepted" {
		t.Fatalf("a settled review was withdrawn: key %q, submission %+v", key, submission(r))
	}
}
