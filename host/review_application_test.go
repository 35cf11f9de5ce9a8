package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/host"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/internal/testslack"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

// applicationEntities are the request entities review_application_test.go
// adds to its copy of testdata/requests: applied by the executor without
// review (quick_change), the same with a profile that may not apply
// (stuck_change: the executor's apply is refused), and a review whose
// authority reports stages, with a lifecycle hook per stage.
const applicationEntities = `  - id: quick_change
    route: quick-changes
    dataset: families
    fields: &quick-fields
      - {id: child_id, type: reference, target: child, required: true}
      - {id: phone, type: string, maxLength: 40, required: true}
    changeRequest:
      effects: &quick-effects
        - id: call
          operation: patch
          target: {fromField: child_id}
          set: {phone: {fromField: phone}}
      review: {mode: none}
      application: {mode: automatic, executor: clerk-bot}
  - id: stuck_change
    route: stuck-changes
    dataset: families
    fields: *quick-fields
    changeRequest:
      effects: *quick-effects
      review: {mode: none}
      application: {mode: automatic, executor: clerk-bot}
  - id: staged_change
    route: staged-changes
    dataset: families
    fields: *quick-fields
    changeRequest:
      effects: *quick-effects
      review: {authority: casework, policyId: staged-review, stages: [caseworker, supervisor]}
      application: {mode: manual}
    hooks:
      - id: staged-supervisor
        phase: after
        trigger: request_lifecycle
        projection: [child_id]
        when: {kind: request_lifecycle, stages: [supervisor]}
        handler: {kind: url, destinationId: receiver}
      - id: staged-caseworker
        phase: after
        trigger: request_lifecycle
        projection: [child_id]
        when: {kind: request_lifecycle, stages: [caseworker]}
        handler: {kind: url, destinationId: receiver}
`

const applicationGrants = `      - entity: quick_change
        operations: [create, get, patch, submit_request, revise_request, cancel_request, apply_request]
        readableFields: [child_id, phone]
        writableFields: [child_id, phone]
        readableRequestFields: [review_state, actor_reference]
        applyTargets: [{entity: child, rowBoundaries: unrestricted}]
        rowBoundaries: unrestricted
      - entity: stuck_change
        operations: [create, get, patch, submit_request, revise_request, cancel_request]
        readableFields: [child_id, phone]
        writableFields: [child_id, phone]
        readableRequestFields: [review_state, actor_reference]
        rowBoundaries: unrestricted
      - entity: staged_change
        operations: [create, get, patch, submit_request, revise_request, cancel_request, apply_request]
        readableFields: [child_id, phone]
        writableFields: [child_id, phone]
        readableRequestFields: [review_state, actor_reference]
        applyTargets: [{entity: child, rowBoundaries: unrestricted}]
        rowBoundaries: unrestricted
`

// applicationProject is requestProject with applicationEntities.
func applicationProject(t *testing.T) string {
	dir := requestProject(t)
	reg := filepath.Join(dir, "registry.yaml")
	b, err := os.ReadFile(reg)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, "\nprofiles:\n") || !strings.HasSuffix(s, "rowBoundaries: unrestricted\n") {
		t.Fatal("testdata/requests/registry.yaml no longer ends with the family profile's grants")
	}
	s = strings.Replace(s, "\nprofiles:\n", "\n"+applicationEntities+"profiles:\n", 1) + applicationGrants
	if err := os.WriteFile(reg, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// applicationOptions vary the host of an application test.
type applicationOptions struct {
	// pollSeconds is the authority's poll interval (default 1).
	pollSeconds int
	// staticToken calls the authority with this static token (a file
	// secret) instead of a client of the issuer.
	staticToken string
	// executorTokenURL replaces the executor's token endpoint.
	executorTokenURL string
	// noWorkers leaves the jobs to startJobs.
	noWorkers bool
	// destination replaces the receiver's URL as the destination of the
	// project's url hooks.
	destination string
	// poolMaxConns sizes the host's pool (default the host's own).
	poolMaxConns int
	// childCreatedHook adds a url hook on the child's creation.
	childCreatedHook bool
}

// childCreatedHook is the hook applicationOptions.childCreatedHook adds to
// the child entity.
const childCreatedHook = `      - {id: case_notes, type: text, maxLength: 2000}
    hooks:
      - id: child-created
        phase: after
        trigger: created
        projection: [name]
        handler: {kind: url, destinationId: receiver}
`

type applicationEnv struct {
	h       *host.Host
	owner   caller
	auth    *authority
	rcv     *receiver
	childID string
	// authHeaders are the Authorization headers the authority saw.
	mu          sync.Mutex
	authHeaders []string
}

func startApplication(t *testing.T, o applicationOptions) *applicationEnv {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}}, addClient(t, `"families:write"`))
	keyFile := filepath.Join(filepath.Dir(is.Setup.ConfigPath), "client-keys", "colleague.jwk")
	env := &applicationEnv{rcv: newReceiver(t)}
	if o.staticToken == "" {
		env.auth = newAuthority(t, is.Config.Issuer)
	} else {
		// The same authority, admitting only the static token it issued.
		a := &authority{t: t, byKey: map[string]string{}, subs: map[string]map[string]any{}, digests: map[string]string{}, results: map[string][]byte{}, cancels: map[string]string{}}
		mux := http.NewServeMux()
		mux.HandleFunc("POST /v1/review-requests", a.submit)
		mux.HandleFunc("GET /v1/review-requests/{id}/result", a.result)
		mux.HandleFunc("POST /v1/review-requests/{id}/cancel", a.cancel)
		a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			env.mu.Lock()
			env.authHeaders = append(env.authHeaders, r.Header.Get("Authorization"))
			env.mu.Unlock()
			if r.Header.Get("Authorization") != "Bearer "+o.staticToken || r.Header.Get("Registry-Casework-Profile") != "families-casework" {
				http.Error(w, "unauthenticated", http.StatusUnauthorized)
				return
			}
			mux.ServeHTTP(w, r)
		}))
		t.Cleanup(a.srv.Close)
		env.auth = a
	}
	if o.pollSeconds == 0 {
		o.pollSeconds = 1
	}
	client := fmt.Sprintf("{tokenUrl: %q, clientId: colleague, keyRef: secret:file/colleague.jwk}", is.Setup.TokenURL)
	credential := "client: " + client
	if o.staticToken != "" {
		credential = "staticTokenRef: secret:file/casework-token"
	}
	executorClient := client
	if o.executorTokenURL != "" {
		executorClient = fmt.Sprintf("{tokenUrl: %q, clientId: colleague, keyRef: secret:file/colleague.jwk}", o.executorTokenURL)
	}
	extra := fmt.Sprintf("reviewAuthorities:\n  casework: {endpoint: %q, profile: families-casework, producerId: families, pollSeconds: %d, %s}\n"+
		"executors:\n  clerk-bot: {accessProfile: family, client: %s}\n", env.auth.srv.URL, o.pollSeconds, credential, executorClient)
	project := applicationProject(t)
	if o.childCreatedHook {
		reg := filepath.Join(project, "registry.yaml")
		b, err := os.ReadFile(reg)
		if err != nil {
			t.Fatal(err)
		}
		child := "      - {id: case_notes, type: text, maxLength: 2000}\n"
		if !strings.Contains(string(b), "  - id: child\n") || strings.Index(string(b), child) < strings.Index(string(b), "  - id: child\n") {
			t.Fatal("testdata/requests/registry.yaml: the child entity no longer ends with case_notes")
		}
		if err := os.WriteFile(reg, []byte(strings.Replace(string(b), child, childCreatedHook, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if o.destination == "" {
		o.destination = env.rcv.srv.URL + "/hooks/registry"
	}
	dsn := storetest.NewDatabase(t)
	if o.poolMaxConns != 0 {
		dsn = withPoolMaxConns(dsn, o.poolMaxConns)
	}
	cfg := deployment(t, project, dsn, is.HostAuthentication(), extra, hosttest.Destination(o.destination))
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string][]byte{"colleague.jwk": key, "webhook-key": eventKey, "casework-token": []byte(o.staticToken + "\n")}
	for name, b := range secrets {
		if err := os.WriteFile(filepath.Join(cfg.Secrets.Root, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var srv *httptest.Server
	env.h, srv = serve(t, cfg)
	if !o.noWorkers {
		startWorkers(t, env.h)
	}
	env.owner = caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	childLoc, _ := env.owner.create(t, "children", `{"name":"Flo","phone":"100"}`)
	env.childID = filepath.Base(childLoc)
	return env
}

// submitted creates a request of route for the child and submits it.
func (env *applicationEnv) submitted(t *testing.T, route, phone string) string {
	t.Helper()
	loc, tag := env.owner.create(t, route, `{"childId":"`+env.childID+`","phone":"`+phone+`"}`)
	if code, b := env.owner.act(t, loc+"/actions/submit", tag, "k-submit-"+phone, `{"actorReference":"parent"}`); code != 200 {
		t.Fatalf("submit %s: %d %s", route, code, b)
	}
	return loc
}

// child reads the child's stored record (its revision counts the writes).
func (env *applicationEnv) child(t *testing.T) *store.Record {
	t.Helper()
	rec, err := env.h.Store().Get(context.Background(), env.h.Package().EntityByID("child"), env.childID)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func applicationState(r *requestDoc) string {
	a, _ := r.Review["application"].(map[string]any)
	s, _ := a["state"].(string)
	return s
}

// Review mode none with automatic application: the submit queues the
// executor's apply in its own transaction, and the executor applies once.
func TestAutomaticApplicationWithoutReviewAppliesOnce(t *testing.T) {
	env := startApplication(t, applicationOptions{noWorkers: true})
	loc := env.submitted(t, "quick-changes", "222")
	got, _ := env.owner.read(t, loc)
	r := got.Data.Request
	if r.EngineState != "submitted" || applicationState(r) != "queued" || r.action("apply_request") != nil {
		t.Fatalf("submitted without review, before any worker: %s %s %+v", r.EngineState, applicationState(r), r.Actions)
	}
	startWorkers(t, env.h)
	r = env.owner.until(t, loc, func(r *requestDoc) bool { return r.EngineState == "applied" })
	if r.ApplierReference != "executor:clerk-bot" || applicationState(r) != "applied" || r.Application["proposalVersion"] != float64(1) {
		t.Fatalf("applied by the executor: %+v", r)
	}
	if c := env.child(t); c.Values["phone"] != "222" || c.Revision != 2 {
		t.Fatalf("child after the automatic apply: revision %d, %v", c.Revision, c.Values)
	}
	// Exactly once: nothing writes the child again.
	time.Sleep(500 * time.Millisecond)
	if c := env.child(t); c.Revision != 2 {
		t.Fatalf("the automatic apply wrote the child again: revision %d", c.Revision)
	}
}

// A receiver that holds every delivery for the attempt's whole timeout
// (it takes the request and never answers) holds delivery workers only:
// on a pool of 4 (8 delivery workers, 2 for the other jobs), with
// 20 deliveries waiting on it, an automatic application is still applied
// at once. When the deliveries shared the other jobs' workers (2 on that
// pool), the application waited behind the 20 deliveries queued before
// it, two at a time, 5 s each, and was still queued when this test gave
// up (15 s).
func TestASlowReceiverDoesNotDelayAutomaticApplication(t *testing.T) {
	slow, hanging, stop := silentReceiver(t)
	env := startApplication(t, applicationOptions{destination: slow.URL + "/hooks/registry", poolMaxConns: 4, childCreatedHook: true})
	t.Cleanup(stop) // before the host stops its workers
	for i := range 20 {
		env.owner.create(t, "children", fmt.Sprintf(`{"name":"C%d"}`, i))
	}
	deadline := time.Now().Add(testslack.Scheduling)
	for hanging.Load() < 8 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := hanging.Load(); n != 8 {
		t.Fatalf("%d deliveries wait on the receiver, want the 8 delivery workers of a pool of 4", n)
	}
	start := time.Now()
	loc := env.submitted(t, "quick-changes", "555")
	env.owner.until(t, loc, func(r *requestDoc) bool { return r.EngineState == "applied" })
	if c := env.child(t); c.Values["phone"] != "555" {
		t.Fatalf("child after the automatic apply: %v", c.Values)
	}
	t.Logf("applied %v after the submit, %d deliveries waiting on the receiver", time.Since(start).Round(time.Millisecond), hanging.Load())
}

// An automatic apply the executor's profile may not do is refused: the
// application is blocked for an operator, never applied, never retried.
func TestRefusedAutomaticApplyIsBlocked(t *testing.T) {
	env := startApplication(t, applicationOptions{})
	loc := env.submitted(t, "stuck-changes", "333")
	r := env.owner.until(t, loc, func(r *requestDoc) bool { return applicationState(r) != "queued" && applicationState(r) != "applying" })
	rec, _ := r.Review["recovery"].(map[string]any)
	if applicationState(r) != "blocked" || r.EngineState != "submitted" || rec["state"] != "operatorAttention" || rec["code"] != "automatic_apply_refused" {
		t.Fatalf("refused automatic apply: %s %+v", r.EngineState, r.Review)
	}
	if c := env.child(t); c.Revision != 1 {
		t.Fatalf("a refused apply wrote the child: revision %d", c.Revision)
	}
}

// An automatic apply whose executor cannot get a token stays applying
// while River retries it, also once the approval's availability passed; an
// approval that expires while its application is queued reports expired.
func TestApplyingKeepsItsStateAndExpiredOverridesQueued(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/token"
	dead.Close()
	env := startApplication(t, applicationOptions{executorTokenURL: deadURL})
	loc := env.submitted(t, "auto-changes", "444")
	rid, _ := env.auth.submissionFor(filepath.Base(loc))
	until := time.Now().Add(2 * time.Second)
	env.auth.settle(rid, "approved", until, nil)
	r := env.owner.until(t, loc, func(r *requestDoc) bool { return applicationState(r) == "applying" })
	if r.EngineState != "submitted" {
		t.Fatalf("applying: %+v", r)
	}
	time.Sleep(time.Until(until) + 500*time.Millisecond)
	got, _ := env.owner.read(t, loc)
	if st := applicationState(got.Data.Request); st != "applying" {
		t.Fatalf("an application already applying reported %s once the approval expired", st)
	}

	// Queued, then expired: the poller's transaction (result and queued
	// application) without a worker to take the job.
	loc2, tag := env.owner.create(t, "auto-changes", `{"childId":"`+env.childID+`","phone":"555"}`)
	if code, b := env.owner.act(t, loc2+"/actions/submit", tag, "k-q", `{"actorReference":"p"}`); code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}
	env.auth.submissionFor(filepath.Base(loc2))
	env.owner.until(t, loc2, func(r *requestDoc) bool { return submission(r)["state"] == "accepted" })
	e := env.h.Package().EntityByID("auto_change")
	until = time.Now().Add(time.Second)
	rid2 := filepath.Base(loc2)
	_, _, err := env.h.Store().Write(context.Background(), nil, func(w *store.Writer) (*store.Outcome, error) {
		if _, err := w.StoreResult(context.Background(), e.ID, rid2, 1, &store.ReviewResult{ResultID: "r-q", Status: "approved", CompletedAt: time.Now(), AvailableUntil: &until, Body: []byte(`{}`)}); err != nil {
			return nil, err
		}
		_, err := w.QueueAutoApplication(context.Background(), e.ID, rid2, 1)
		return &store.Outcome{}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = env.owner.read(t, loc2)
	if st := applicationState(got.Data.Request); st != "queued" {
		t.Fatalf("approved, automatic, not started: %s", st)
	}
	time.Sleep(time.Until(until) + 200*time.Millisecond)
	got, _ = env.owner.read(t, loc2)
	if st := applicationState(got.Data.Request); st != "expired" {
		t.Fatalf("an approval that expired while queued reports %s", st)
	}
}

// Apply is authoritative: it fetches the authority's result itself, so an
// approval the poller has not stored yet is applied, and stored on the
// way (shown with its delivery's receivedAt).
func TestApplyFetchesAResultThePollerHasNotStored(t *testing.T) {
	env := startApplication(t, applicationOptions{pollSeconds: 3600})
	loc, tag := env.owner.create(t, "reviewed-changes", `{"childId":"`+env.childID+`","address":"Pine 7"}`)
	code, b := env.owner.act(t, loc+"/actions/submit", tag, "k1", `{"actorReference":"parent"}`)
	if code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}
	digest := decodeAction(t, b).Request.EffectDigest
	rid, _ := env.auth.submissionFor(filepath.Base(loc))
	r := env.owner.until(t, loc, func(r *requestDoc) bool { return submission(r)["state"] == "accepted" })
	time.Sleep(300 * time.Millisecond) // the first poll found nothing and sleeps an hour
	env.auth.settle(rid, "approved", time.Now().Add(time.Hour), nil)
	got, tag := env.owner.read(t, loc)
	r = got.Data.Request
	if resultState(r) != "" || applicationState(r) != "awaitingReview" || r.action("apply_request") != nil {
		t.Fatalf("before the poller stored the result: %+v %+v", r.Review, r.Actions)
	}
	code, b = env.owner.act(t, loc+"/actions/apply", tag, "k-apply", fmt.Sprintf(`{"actorReference":"clerk","proposalVersion":1,"effectDigest":%q}`, digest))
	if code != 200 || decodeAction(t, b).Request.EngineState != "applied" {
		t.Fatalf("apply over a result only the authority holds: %d %s", code, b)
	}
	got, _ = env.owner.read(t, loc)
	r = got.Data.Request
	delivery, _ := r.Review["delivery"].(map[string]any)
	received, err := time.Parse(time.RFC3339Nano, fmt.Sprint(delivery["receivedAt"]))
	if resultState(r) != "approved" || delivery["state"] != "received" || err != nil || time.Since(received) > time.Minute {
		t.Fatalf("the result apply fetched is stored: %+v", r.Review)
	}
	if c := env.child(t); c.Values["address"] != "Pine 7" {
		t.Fatalf("child after apply: %v", c.Values)
	}
}

// A lifecycle hook filtered on review stages fires on the stage the
// authority reports with its result, and only on its own stage.
func TestStagedLifecycleHookFiresOnTheReportedStage(t *testing.T) {
	env := startApplication(t, applicationOptions{})
	loc := env.submitted(t, "staged-changes", "666")
	rid, _ := env.auth.submissionFor(filepath.Base(loc))
	env.owner.until(t, loc, func(r *requestDoc) bool { return submission(r)["state"] == "accepted" })
	env.auth.settle(rid, "approved", time.Now().Add(time.Hour), func(d map[string]any) { d["stage"] = "supervisor" })
	r := env.owner.until(t, loc, func(r *requestDoc) bool { return resultState(r) == "approved" })
	if res, _ := r.Review["result"].(map[string]any); res["stage"] != "supervisor" {
		t.Fatalf("result without its stage: %+v", r.Review)
	}
	v := verifier(t, env.h)
	v.Source = "urn:engine:registry:families:instance:test-1"
	d := verify(t, v, env.rcv.wait(t, 1, 10*time.Second)[0])
	var data lifecycleData
	if err := json.Unmarshal(d.Event.Data, &data); err != nil {
		t.Fatal(err)
	}
	lr := data.Request
	if d.Type != "staged-supervisor-v1" || lr == nil || lr.Stage == nil || *lr.Stage != "supervisor" || lr.Transition != "review" ||
		lr.FromState != "submitted" || lr.ToState != "submitted" || lr.ProposalVersion != 1 || lr.EffectDigest == nil {
		t.Fatalf("staged event %s %s", d.Type, d.Event.Data)
	}
	// The caseworker hook does not fire for the supervisor stage.
	time.Sleep(500 * time.Millisecond)
	if n := env.rcv.count(); n != 1 {
		t.Fatalf("%d deliveries, want only the supervisor stage's", n)
	}
}

// A review authority called with a static token (a file secret) instead
// of a client of Registrum's issuer: every call carries it as the bearer.
func TestReviewAuthorityWithAStaticToken(t *testing.T) {
	env := startApplication(t, applicationOptions{staticToken: "casework-issued-token-1"})
	loc := env.submitted(t, "staged-changes", "777")
	rid, _ := env.auth.submissionFor(filepath.Base(loc))
	env.auth.settle(rid, "rejected", time.Now().Add(time.Hour), nil)
	env.owner.until(t, loc, func(r *requestDoc) bool { return resultState(r) == "rejected" })
	env.mu.Lock()
	defer env.mu.Unlock()
	if len(env.authHeaders) < 2 {
		t.Fatalf("the authority saw %d calls", len(env.authHeaders))
	}
	for _, h := range env.authHeaders {
		if h != "Bearer casework-issued-token-1" {
			t.Fatalf("Authorization %q, want the static token without its file's newline", h)
		}
	}
}

// A review authority takes exactly one credential: a client or a static
// token reference.
func TestReviewAuthorityCredentialIsExactlyOne(t *testing.T) {
	for name, cred := range map[string]string{
		"both":    "client: {tokenUrl: \"https://issuer.example.org/token\", clientId: c, keyRef: secret:file/c.jwk}, staticTokenRef: secret:file/t",
		"neither": "recoveryDays: 3",
		"bad ref": "staticTokenRef: file/t",
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "registrum.yaml")
		doc := "version: 1\nlistener: {address: 127.0.0.1, port: 0}\ndatabase: {url: \"postgres://x@127.0.0.1/x\"}\npackage: package\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n" +
			"reviewAuthorities:\n  casework: {endpoint: \"https://casework.example.org\", profile: p, producerId: f, " + cred + "}\n"
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := config.Load(path)
		if err == nil || !strings.Contains(err.Error(), "reviewAuthorities.casework") {
			t.Errorf("%s: %v, want a refusal naming reviewAuthorities.casework", name, err)
		}
	}
}

// revise_request with rebase true and with rebase false leave different
// traces on the proposal they replace, in the request's history.
func TestReviseRecordsRebaseOrRevisionInHistory(t *testing.T) {
	env := startApplication(t, applicationOptions{pollSeconds: 3600})
	history := func(loc string) []map[string]any {
		t.Helper()
		_, b := env.owner.do(t, "GET", loc, "", "")
		var doc struct {
			Data struct {
				Request struct {
					History struct {
						Items []map[string]any `json:"items"`
					} `json:"history"`
				} `json:"request"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		return doc.Data.Request.History.Items
	}
	revise := func(loc string, rebase bool) {
		t.Helper()
		got, tag := env.owner.read(t, loc)
		rv := got.Data.Request.action("revise_request")
		if rv == nil || *rv.Rebase != rebase {
			t.Fatalf("revise with rebase %t not offered: %+v", rebase, got.Data.Request.Actions)
		}
		if code, b := env.owner.act(t, rv.Href, tag, fmt.Sprintf("k-rev-%t", rebase), fmt.Sprintf(`{"actorReference":"p","rebase":%t}`, rebase)); code != 200 {
			t.Fatalf("revise: %d %s", code, b)
		}
	}
	// Review mode none counts as approved: revised by a rebase.
	none, tag := env.owner.create(t, "address-changes", `{"childId":"`+env.childID+`","address":"Ash 1"}`)
	if code, b := env.owner.act(t, none+"/actions/submit", tag, "k-s1", `{"actorReference":"p"}`); code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}
	revise(none, true)
	// Under review, no result yet: revised by a revision.
	reviewed, tag := env.owner.create(t, "reviewed-changes", `{"childId":"`+env.childID+`","address":"Ash 2"}`)
	if code, b := env.owner.act(t, reviewed+"/actions/submit", tag, "k-s2", `{"actorReference":"p"}`); code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}
	revise(reviewed, false)
	for loc, want := range map[string]string{none: "rebase", reviewed: "revision"} {
		items := history(loc)
		if len(items) != 1 || items[0]["revisedAs"] != want || items[0]["revisedAt"] == nil {
			t.Errorf("%s: history %v, want proposal 1 revisedAs %s", loc, items, want)
		}
	}
}

// Under review mode none, apply checks the proposal's slots against the
// manifest frozen at submit: an attachment erased since refuses the apply.
func TestApplyChecksTheFrozenAttachmentManifest(t *testing.T) {
	env := startAttachments(t, false)
	owner := env.owner
	loc, etag := owner.create(t, "claims", `{"text":"bound"}`)
	if resp, b := owner.upload(t, loc, "evidence", "text/plain", etag, "u1", []byte("the evidence")); resp.StatusCode != 200 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	_, tag := owner.read(t, loc)
	if code, b := owner.act(t, loc+"/actions/submit", tag, "k-s", `{"actorReference":"a"}`); code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}
	pool, err := pgxpool.New(context.Background(), env.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if res, err := store.EraseAttachment(context.Background(), pool, "claim", filepath.Base(loc), "evidence", strings.Repeat("cd", 16)); err != nil || res.Slots != 1 {
		t.Fatalf("erase: %+v %v", res, err)
	}
	got, tag := owner.read(t, loc)
	ap := got.Data.Request.action("apply_request")
	if ap == nil {
		t.Fatalf("apply not offered: %+v", got.Data.Request.Actions)
	}
	_, b := owner.act(t, ap.Href, tag, "k-a", fmt.Sprintf(`{"actorReference":"a","proposalVersion":%d,"effectDigest":%q}`, ap.ProposalVersion, ap.EffectDigest))
	wantProblem(t, "apply over an erased attachment", 412, b, "precondition.failed")
}
