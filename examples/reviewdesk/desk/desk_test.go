package desk_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrum/registrum/examples/reviewdesk/desk"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/issuer/issuertest"
)

const testPassword = "correct horse battery staple"

// syncBuffer collects the desk's logs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	is   *issuertest.Issuer
	url  string
	cfg  *desk.Config
	logs *syncBuffer
	stop func()
}

var hashOnce = sync.OnceValue(func() string {
	h, err := desk.HashPassword(testPassword)
	if err != nil {
		panic(err)
	}
	return h
})

// start runs an issuer and a desk that trusts it (clients demo-standard,
// scope records:write, profile families-casework) over real HTTP.
func start(t *testing.T) *env {
	t.Helper()
	is := issuertest.Start(t, issuertest.Options{})
	e := &env{is: is}
	e.cfg = &desk.Config{
		DataFile:             filepath.Join(t.TempDir(), "requests.json"),
		ReviewerPasswordHash: hashOnce(),
		Authentication: desk.Authentication{Issuer: is.Config.Issuer, JWKSURL: is.JWKSURL, Audience: is.Config.AccessTokens.Audiences[0],
			Clients: []string{issuertest.StandardClientID}, RequiredScope: "records:write"},
		Profiles: []string{"families-casework"},
		Policies: map[string]desk.Policy{"address-review": {Title: "Address review", Version: "3"}},
	}
	e.serve(t)
	return e
}

// serve (re)starts the desk on its configuration.
func (e *env) serve(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.url = "http://" + ln.Addr().String()
	e.cfg.PublicURL = e.url
	e.logs = &syncBuffer{}
	d, err := desk.New(e.cfg, desk.Options{Log: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, ln) }()
	e.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	t.Cleanup(func() {
		if e.stop != nil {
			e.stop()
			e.stop = nil
		}
	})
}

func submissionBody(id string, version int, snapshot map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"context": map[string]any{"snapshot": snapshot, "strategy": "submitted"}, "kind": "address-review",
		"requesterReference": "parent-1", "subject": map[string]any{"digest": "sha256:" + strings.Repeat("ab", 32), "id": id, "source": "families", "type": "reviewed_change", "version": version}})
	return b
}

type call struct {
	method, path, token, profile, key, contentType string
	body                                           []byte
}

func (e *env) do(t *testing.T, c call) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(c.method, e.url+c.path, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.profile != "" {
		req.Header.Set(desk.ProfileHeader, c.profile)
	}
	if c.key != "" {
		req.Header.Set("Idempotency-Key", c.key)
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func (e *env) submit(t *testing.T, token, key string, body []byte) (int, map[string]any) {
	t.Helper()
	code, h, b := e.do(t, call{method: "POST", path: "/v1/review-requests", token: token, profile: "families-casework", key: key, contentType: "application/json", body: body})
	if !regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`).MatchString(h.Get("traceparent")) {
		t.Errorf("answer without a traceparent: %q", h.Get("traceparent"))
	}
	var doc map[string]any
	json.Unmarshal(b, &doc)
	return code, doc
}

func (e *env) result(t *testing.T, token, requestID string) (int, map[string]any) {
	t.Helper()
	code, _, b := e.do(t, call{method: "GET", path: "/v1/review-requests/" + url.PathEscape(requestID) + "/result", token: token, profile: "families-casework"})
	var doc map[string]any
	json.Unmarshal(b, &doc)
	return code, doc
}

// reviewer is a browser session of the reviewer's pages.
type reviewer struct {
	t      *testing.T
	e      *env
	client *http.Client
}

func (e *env) browser(t *testing.T) *reviewer {
	jar, _ := cookiejar.New(nil)
	return &reviewer{t: t, e: e, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (r *reviewer) get(path string) (int, http.Header, string) {
	r.t.Helper()
	resp, err := r.client.Get(r.e.url + path)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func (r *reviewer) post(path string, form url.Values) (int, http.Header, string) {
	r.t.Helper()
	resp, err := r.client.PostForm(r.e.url+path, form)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field in:\n%s", page)
	}
	return m[1]
}

// signIn signs the reviewer in and returns the CSRF token of the session.
func (r *reviewer) signIn() string {
	r.t.Helper()
	_, _, page := r.get("/login")
	code, h, _ := r.post("/login", url.Values{"csrf": {csrfOf(r.t, page)}, "password": {testPassword}})
	if code != http.StatusSeeOther || h.Get("Location") != "/" {
		r.t.Fatalf("sign-in answered %d %v", code, h)
	}
	_, _, page = r.get("/")
	return csrfOf(r.t, page)
}

func TestReviewProtocolSubmitReplayAndResult(t *testing.T) {
	e := start(t)
	tok := e.is.Token(t, issuertest.StandardClientID)
	body := submissionBody("rec-1", 1, map[string]any{"address": "Oak 4", "amount": 12.5})
	// The host may send any equivalent form (it keeps the body as jsonb):
	// the digest is of the canonical form.
	var doc any
	json.Unmarshal(body, &doc)
	indented, _ := json.MarshalIndent(doc, "", "   ")
	code, bind := e.submit(t, tok, "key-1", indented)
	canon, _ := canonjson.Transform(body)
	sum := sha256.Sum256(canon)
	subject := bind["subject"].(map[string]any)
	policy := bind["policy"].(map[string]any)
	if code != http.StatusCreated || bind["submissionDigest"] != "sha256:"+hex.EncodeToString(sum[:]) || subject["id"] != "rec-1" ||
		subject["version"] != float64(1) || policy["id"] != "address-review" || policy["version"] != "3" || !strings.HasPrefix(policy["digest"].(string), "sha256:") {
		t.Fatalf("submit: %d %v", code, bind)
	}
	rid := bind["requestId"].(string)

	// The same key and body: the same binding. The same key, another body:
	// refused, nothing stored.
	if code, again := e.submit(t, tok, "key-1", body); code != http.StatusOK || again["requestId"] != rid {
		t.Fatalf("replay: %d %v", code, again)
	}
	if code, doc := e.submit(t, tok, "key-1", submissionBody("rec-1", 2, map[string]any{})); code != http.StatusConflict {
		t.Fatalf("key reused for another submission: %d %v", code, doc)
	}

	// No result while the request awaits review.
	if code, doc := e.result(t, tok, rid); code != http.StatusAccepted {
		t.Fatalf("result before review: %d %v", code, doc)
	}
	if code, _ := e.result(t, tok, "rr_unknown"); code != http.StatusNotFound {
		t.Fatalf("result of an unknown request: %d", code)
	}

	// The reviewer approves; the result echoes the binding exactly.
	br := e.browser(t)
	csrf := br.signIn()
	until := time.Now().UTC().Add(48 * time.Hour).Truncate(time.Minute)
	code, h, page := br.post("/requests/"+rid+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}, "availableUntil": {until.Format("2006-01-02T15:04")}})
	if code != http.StatusSeeOther || h.Get("Location") != "/requests/"+rid {
		t.Fatalf("approve: %d %s", code, page)
	}
	code, res := e.result(t, tok, rid)
	if code != http.StatusOK || res["status"] != "approved" || res["requestId"] != rid || res["submissionDigest"] != bind["submissionDigest"] ||
		res["availableUntil"] != until.Format(time.RFC3339) || !strings.HasPrefix(res["resultId"].(string), "res_") ||
		fmt.Sprint(res["subject"]) != fmt.Sprint(bind["subject"]) || fmt.Sprint(res["policy"]) != fmt.Sprint(bind["policy"]) {
		t.Fatalf("result: %d %v", code, res)
	}
	// Settled once.
	code, _, page = br.post("/requests/"+rid+"/decision", url.Values{"csrf": {csrf}, "decision": {"reject"}})
	if code != http.StatusUnprocessableEntity || !strings.Contains(page, "already settled") {
		t.Fatalf("second decision: %d", code)
	}
	if _, res2 := e.result(t, tok, rid); res2["status"] != "approved" {
		t.Fatalf("a second decision changed the result: %v", res2)
	}

	// Rejected and changes requested carry no availableUntil.
	for i, decision := range map[string]string{"reject": "rejected", "changes": "changesRequested"} {
		_, b := e.submit(t, tok, "key-"+i, submissionBody("rec-"+i, 1, map[string]any{}))
		id := b["requestId"].(string)
		if code, _, _ := br.post("/requests/"+id+"/decision", url.Values{"csrf": {csrf}, "decision": {i}}); code != http.StatusSeeOther {
			t.Fatalf("%s: %d", i, code)
		}
		if _, r := e.result(t, tok, id); r["status"] != decision || r["availableUntil"] != nil {
			t.Fatalf("%s: result %v", i, r)
		}
	}

	// The registry withdraws a request awaiting review: cancelled, the same
	// again answers the same, the reviewer can no longer decide; a settled
	// request is not withdrawn (409), an unknown one is 404.
	_, open := e.submit(t, tok, "key-open", submissionBody("rec-open", 1, map[string]any{}))
	openID := open["requestId"].(string)
	cancel := func(id string) (int, map[string]any) {
		code, _, b := e.do(t, call{method: "POST", path: "/v1/review-requests/" + id + "/cancel", token: tok, profile: "families-casework", key: "withdraw-" + id})
		var doc map[string]any
		json.Unmarshal(b, &doc)
		return code, doc
	}
	code, first := cancel(openID)
	if code != http.StatusOK || first["status"] != "cancelled" || first["requestId"] != openID || first["submissionDigest"] != open["submissionDigest"] {
		t.Fatalf("withdrawal: %d %v", code, first)
	}
	if code, again := cancel(openID); code != http.StatusOK || again["resultId"] != first["resultId"] {
		t.Fatalf("withdrawal again: %d %v", code, again)
	}
	if _, r := e.result(t, tok, openID); r["status"] != "cancelled" {
		t.Fatalf("result of a withdrawn request: %v", r)
	}
	if code, _, page := br.post("/requests/"+openID+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}, "availableUntil": {until.Format("2006-01-02T15:04")}}); code != http.StatusUnprocessableEntity || !strings.Contains(page, "withdrawn by the registry") {
		t.Fatalf("approving a withdrawn request: %d", code)
	}
	if code, _ := cancel(rid); code != http.StatusConflict {
		t.Fatalf("withdrawing an approved request: %d", code)
	}
	if code, _ := cancel("rr_unknown"); code != http.StatusNotFound {
		t.Fatalf("withdrawing an unknown request: %d", code)
	}

	// Requests and results survive a restart.
	e.stop()
	e.stop = nil
	e.serve(t)
	if code, res := e.result(t, tok, rid); code != http.StatusOK || res["status"] != "approved" {
		t.Fatalf("after a restart: %d %v", code, res)
	}
}

func TestReviewProtocolRefusesWhatIsNotAcceptable(t *testing.T) {
	e := start(t)
	tok := e.is.Token(t, issuertest.StandardClientID)
	body := submissionBody("rec-1", 1, map[string]any{})
	post := func(c call) int {
		t.Helper()
		c.method, c.path = "POST", "/v1/review-requests"
		code, _, _ := e.do(t, c)
		return code
	}
	ok := call{token: tok, profile: "families-casework", key: "k", contentType: "application/json", body: body}
	other := issuertest.Start(t, issuertest.Options{})
	parts := strings.Split(tok, ".")
	sig := []byte(parts[2])
	sig[len(sig)/2] ^= 1
	for _, tc := range []struct {
		name string
		edit func(*call)
		want int
	}{
		{"no token", func(c *call) { c.token = "" }, 401},
		{"a token of a client not allowed", func(c *call) { c.token = e.is.Token(t, issuertest.EvidenceClientID) }, 401},
		{"a token of another issuer", func(c *call) { c.token = other.Token(t, issuertest.StandardClientID) }, 401},
		{"a tampered signature", func(c *call) { c.token = parts[0] + "." + parts[1] + "." + string(sig) }, 401},
		{"not a JWT", func(c *call) { c.token = "secret-string" }, 401},
		{"another profile", func(c *call) { c.profile = "other" }, 403},
		{"no profile", func(c *call) { c.profile = "" }, 403},
		{"no Idempotency-Key", func(c *call) { c.key = "" }, 400},
		{"an Idempotency-Key of 257 bytes", func(c *call) { c.key = strings.Repeat("k", 257) }, 400},
		{"not JSON", func(c *call) { c.contentType = "text/plain" }, 415},
		{"an unknown member", func(c *call) { c.body = []byte(`{"kind":"address-review","extra":1}`) }, 400},
		{"an unknown kind", func(c *call) { c.body = bytes.Replace(body, []byte("address-review"), []byte("other-policy"), 1) }, 422},
		{"a digest that is not SHA-256", func(c *call) { c.body = bytes.Replace(body, []byte("sha256:abab"), []byte("md5:abab"), 1) }, 400},
		{"version 0", func(c *call) { c.body = submissionBody("rec-1", 0, map[string]any{}) }, 400},
		{"another strategy", func(c *call) { c.body = bytes.Replace(body, []byte(`"submitted"`), []byte(`"draft"`), 1) }, 400},
		{"a snapshot that is not an object", func(c *call) {
			c.body = bytes.Replace(body, []byte(`"snapshot":{}`), []byte(`"snapshot":[]`), 1)
		}, 400},
		{"two JSON values", func(c *call) { c.body = append(append([]byte{}, body...), body...) }, 400},
		{"more than 1 MiB", func(c *call) { c.body = append(bytes.Repeat([]byte(" "), 1<<20), body...) }, 413},
	} {
		c := ok
		tc.edit(&c)
		if got := post(c); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	// Exactly 1 MiB is read (and accepted).
	pad := (1 << 20) - len(body)
	exact := append(bytes.Repeat([]byte(" "), pad), body...)
	if c := ok; true {
		c.body, c.key = exact, "exact"
		if got := post(c); got != http.StatusCreated {
			t.Errorf("a submission of exactly 1 MiB: %d", got)
		}
	}
	// The results of one client are not another's.
	_, bind := e.submit(t, tok, "k2", body)
	if code, _, _ := e.do(t, call{method: "GET", path: "/v1/review-requests/" + bind["requestId"].(string) + "/result", token: "", profile: "families-casework"}); code != 401 {
		t.Errorf("result without a token: %d", code)
	}
	if strings.Contains(e.logs.String(), tok) || strings.Contains(e.logs.String(), parts[2]) {
		t.Errorf("a token reached the logs:\n%s", e.logs.String())
	}

	// An issuer whose key set cannot be fetched: 503, the host tries again.
	e.stop()
	e.stop = nil
	e.cfg.Authentication.JWKSURL = "http://127.0.0.1:1/jwks.json"
	e.serve(t)
	c := ok
	c.key = "k3"
	if got := post(c); got != http.StatusServiceUnavailable {
		t.Errorf("key set unavailable: %d, want 503", got)
	}
}

func TestReviewerSignInAndCSRF(t *testing.T) {
	e := start(t)
	tok := e.is.Token(t, issuertest.StandardClientID)
	_, bind := e.submit(t, tok, "k1", submissionBody("rec-1", 1, map[string]any{"address": "Oak 4"}))
	rid := bind["requestId"].(string)
	br := e.browser(t)

	// Signed out: pages send to the sign-in page; posts are refused.
	if code, h, _ := br.get("/"); code != http.StatusSeeOther || h.Get("Location") != "/login" {
		t.Fatalf("list signed out: %d %v", code, h)
	}
	if code, _, _ := br.post("/requests/"+rid+"/decision", url.Values{"decision": {"approve"}}); code != http.StatusForbidden {
		t.Fatalf("decision signed out: %d", code)
	}
	code, h, page := br.get("/login")
	if code != 200 || h.Get("Content-Security-Policy") == "" || h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("login page: %d %v", code, h)
	}
	cookies := (&http.Response{Header: h}).Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Path != "/" {
		t.Fatalf("session cookie: %+v", cookies)
	}
	anonymous := cookies[0].Value
	csrf := csrfOf(t, page)

	// Sign-in needs the form's token and the password.
	if code, _, _ := br.post("/login", url.Values{"password": {testPassword}}); code != http.StatusForbidden {
		t.Fatalf("sign-in without the form token: %d", code)
	}
	_, _, page = br.get("/login")
	csrf = csrfOf(t, page)
	if code, _, page := br.post("/login", url.Values{"csrf": {csrf}, "password": {testPassword + "x"}}); code != http.StatusUnauthorized || strings.Contains(page, testPassword) {
		t.Fatalf("wrong password: %d", code)
	}
	if code, _, _ := br.get("/"); code != http.StatusSeeOther {
		t.Fatalf("a failed sign-in signed in: %d", code)
	}
	code, h, _ = br.post("/login", url.Values{"csrf": {csrf}, "password": {testPassword}})
	if code != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", code)
	}
	signedIn := (&http.Response{Header: h}).Cookies()
	if len(signedIn) != 1 || signedIn[0].Value == anonymous || !signedIn[0].HttpOnly || signedIn[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("the session was not renewed at sign-in: %+v", signedIn)
	}
	_, _, page = br.get("/requests/" + rid)
	csrf = csrfOf(t, page)

	// Every post needs this session's token: none, a wrong one, or another
	// session's are refused and nothing is settled.
	other := e.browser(t)
	otherCSRF := other.signIn()
	for name, token := range map[string]string{"no token": "", "a wrong token": csrf + "x", "another session's token": otherCSRF} {
		form := url.Values{"decision": {"reject"}}
		if token != "" {
			form.Set("csrf", token)
		}
		if code, _, _ := br.post("/requests/"+rid+"/decision", form); code != http.StatusForbidden {
			t.Errorf("decision with %s: %d", name, code)
		}
		if code, _, _ := br.post("/logout", form); code != http.StatusForbidden {
			t.Errorf("sign-out with %s: %d", name, code)
		}
	}
	if code, _ := e.result(t, tok, rid); code != http.StatusAccepted {
		t.Fatalf("a refused post settled the request: %d", code)
	}

	// An approval's end: required, after now, within the configured days.
	now := time.Now().UTC()
	for _, until := range []string{"", "tomorrow", now.Add(-time.Hour).Format("2006-01-02T15:04"), now.Add(91 * 24 * time.Hour).Format("2006-01-02T15:04")} {
		if code, _, page := br.post("/requests/"+rid+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}, "availableUntil": {until}}); code != http.StatusUnprocessableEntity || !strings.Contains(page, `class="error"`) {
			t.Errorf("approve until %q: %d", until, code)
		}
	}
	if code, _, _ := br.post("/requests/"+rid+"/decision", url.Values{"csrf": {csrf}, "decision": {"maybe"}}); code != http.StatusUnprocessableEntity {
		t.Errorf("an unknown decision: %d", code)
	}
	if code, _ := e.result(t, tok, rid); code != http.StatusAccepted {
		t.Fatalf("a refused decision settled the request: %d", code)
	}

	// Sign-out ends the session: its cookie no longer admits.
	if code, _, _ := br.post("/logout", url.Values{"csrf": {csrf}}); code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", code)
	}
	if code, _, _ := br.get("/"); code != http.StatusSeeOther {
		t.Fatalf("after sign-out: %d", code)
	}

	// Neither the password, its hash, a session nor a form token reaches
	// the logs or a page.
	logs := e.logs.String()
	for _, secret := range []string{testPassword, hashOnce(), signedIn[0].Value, csrf, tok} {
		if strings.Contains(logs, secret) {
			t.Errorf("a secret reached the logs:\n%s", logs)
		}
	}
	_, _, page = other.get("/requests/" + rid)
	if strings.Contains(page, hashOnce()) || strings.Contains(page, testPassword) {
		t.Errorf("a page holds the password or its hash")
	}
}

func TestReviewerSignInIsThrottled(t *testing.T) {
	e := start(t)
	br := e.browser(t)
	_, _, page := br.get("/login")
	csrf := csrfOf(t, page)
	for i := 0; i < 10; i++ {
		if code, _, _ := br.post("/login", url.Values{"csrf": {csrf}, "password": {"guess"}}); code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i+1, code)
		}
	}
	// Even the right password waits once ten sign-ins failed.
	if code, _, _ := br.post("/login", url.Values{"csrf": {csrf}, "password": {testPassword}}); code != http.StatusTooManyRequests {
		t.Fatalf("after ten failures: %d", code)
	}
}

func TestReviewPagesEscapeEveryValue(t *testing.T) {
	e := start(t)
	tok := e.is.Token(t, issuertest.StandardClientID)
	hostile := `<script>alert(1)</script>`
	body, _ := json.Marshal(map[string]any{"context": map[string]any{"snapshot": map[string]any{"address": hostile, `"><b>field`: map[string]any{"x": "</pre><img src=x onerror=alert(2)>"}}, "strategy": "submitted"},
		"kind": "address-review", "requesterReference": `"><img src=x onerror=alert(3)>`,
		"subject": map[string]any{"digest": "sha256:" + strings.Repeat("ab", 32), "id": `rec"><svg onload=alert(4)>`, "source": "<i>families</i>", "type": "reviewed_change", "version": 1}})
	// As the registry sends it (RFC 8785): markup characters unescaped.
	body = []byte(strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(body)))
	code, bind := e.submit(t, tok, "k1", body)
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %v", code, bind)
	}
	br := e.browser(t)
	br.signIn()
	_, _, list := br.get("/")
	_, _, detail := br.get("/requests/" + bind["requestId"].(string))
	for name, page := range map[string]string{"list": list, "request": detail} {
		for _, raw := range []string{"<script>", "<img", "<svg", "<b>", "<i>families", "</pre><img"} {
			if strings.Contains(page, raw) {
				t.Errorf("the %s page holds %q unescaped", name, raw)
			}
		}
	}
	for _, escaped := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=alert(3)&gt;", "&lt;/pre&gt;&lt;img src=x onerror=alert(2)&gt;", "&lt;i&gt;families&lt;/i&gt;"} {
		if !strings.Contains(detail, escaped) {
			t.Errorf("the request page does not show %q", escaped)
		}
	}
	if !strings.Contains(detail, "has no attachment slots") {
		t.Errorf("the request page does not say what it knows of attachments")
	}
}

func TestReviewPagesShowTheFrozenAttachments(t *testing.T) {
	e := start(t)
	tok := e.is.Token(t, issuertest.StandardClientID)
	withSlots := func(manifest string) []byte {
		return bytes.Replace(submissionBody("rec-1", 1, map[string]any{}), []byte(`"strategy":"submitted"`), []byte(`"attachments":`+manifest+`,"strategy":"submitted"`), 1)
	}
	hash := strings.Repeat("c", 64)
	code, bind := e.submit(t, tok, "k1", withSlots(`{"slots":[{"byteSize":5242880,"contentType":"application/pdf","sha256":"`+hash+`","slotId":"medical-certificate","verificationPolicyDigest":"sha256:`+strings.Repeat("d", 64)+`","verificationStatus":"approved"},{"byteSize":3,"contentType":"image/png","sha256":"`+hash+`","slotId":"birth-certificate","verificationStatus":"notRequired"}]}`))
	if code != http.StatusCreated {
		t.Fatalf("submit with slots: %d %v", code, bind)
	}
	_, none := e.submit(t, tok, "k2", withSlots(`{"slots":[]}`))
	for name, manifest := range map[string]string{
		"not an object":     `[]`,
		"no slots":          `{}`,
		"a slot without id": `{"slots":[{"byteSize":1,"contentType":"application/pdf","sha256":"` + hash + `","verificationStatus":"approved"}]}`,
		"a bad hash":        `{"slots":[{"byteSize":1,"contentType":"application/pdf","sha256":"abc","slotId":"s","verificationStatus":"approved"}]}`,
	} {
		if code, doc := e.submit(t, tok, "bad-"+name, withSlots(manifest)); code != http.StatusBadRequest {
			t.Errorf("manifest %s: %d %v", name, code, doc)
		}
	}
	br := e.browser(t)
	br.signIn()
	_, _, page := br.get("/requests/" + bind["requestId"].(string))
	for _, want := range []string{"medical-certificate", "application/pdf", "5242880", `class="verification-approved">approved<`, "birth-certificate", `class="verification-notRequired">notRequired<`} {
		if !strings.Contains(page, want) {
			t.Errorf("the request page does not show %q", want)
		}
	}
	_, _, page = br.get("/requests/" + none["requestId"].(string))
	if !strings.Contains(page, "The proposal has no attachments.") {
		t.Errorf("a proposal with empty slots: %s", page)
	}
}

func TestConfigIsChecked(t *testing.T) {
	dir := t.TempDir()
	good := `{"publicUrl":"http://127.0.0.1:8082","dataFile":"r.json","reviewerPasswordHash":"` + hashOnce() + `",
"authentication":{"issuer":"https://localhost:1","jwksUrl":"http://127.0.0.1:1/jwks","audience":"a","clients":["c"]},
"profiles":["p"],"policies":{"x":{"version":"1"}}}`
	for name, tc := range map[string]struct {
		doc, want string
	}{
		"good":             {good, ""},
		"unknown member":   {strings.Replace(good, `"profiles"`, `"profile":1,"profiles"`, 1), "unknown field"},
		"plain http":       {strings.Replace(good, "http://127.0.0.1:8082", "http://desk.example.test", 1), "publicUrl"},
		"a plain password": {strings.Replace(good, hashOnce(), "hunter2", 1), "reviewerPasswordHash"},
		"no clients":       {strings.Replace(good, `"clients":["c"]`, `"clients":[]`, 1), "clients"},
		"no policy":        {strings.Replace(good, `{"x":{"version":"1"}}`, `{}`, 1), "policies"},
	} {
		p := filepath.Join(dir, "c.json")
		os.WriteFile(p, []byte(tc.doc), 0o600)
		_, err := desk.LoadConfig(p)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the configured value", name)
		}
	}
}

// TestSessionCookieUnderHTTPS: with an https publicUrl the session cookie
// is Secure and __Host- prefixed (HttpOnly, SameSite=Strict, path /).
func TestSessionCookieUnderHTTPS(t *testing.T) {
	e := start(t)
	e.stop()
	e.stop = nil
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.PublicURL = "https://desk.example.test"
	d, err := desk.New(e.cfg, desk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c := resp.Cookies()
	if len(c) != 1 || c[0].Name != "__Host-reviewdesk" || !c[0].Secure || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode || c[0].Path != "/" || c[0].Domain != "" {
		t.Fatalf("session cookie under https: %+v", c)
	}
}

// fromAddress is a browser whose connections come from the loopback
// address local (any of 127/8 on Linux): another client of the desk.
func (e *env) fromAddress(t *testing.T, local string) *reviewer {
	br := e.browser(t)
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	br.client.Transport = &http.Transport{DialContext: dialer.DialContext}
	return br
}

// One guesser's failures throttle its own address only: the reviewer,
// from another address, still signs in.
func TestSignInThrottleIsPerAddress(t *testing.T) {
	e := start(t)
	guesser := e.fromAddress(t, "127.0.0.2")
	_, _, page := guesser.get("/login")
	csrf := csrfOf(t, page)
	for i := 0; i < 12; i++ {
		guesser.post("/login", url.Values{"csrf": {csrf}, "password": {"guess"}})
	}
	if code, _, _ := guesser.post("/login", url.Values{"csrf": {csrf}, "password": {testPassword}}); code != http.StatusTooManyRequests {
		t.Fatalf("the guesser's address after twelve failures: %d, want 429", code)
	}
	reviewer := e.fromAddress(t, "127.0.0.3")
	_, _, page = reviewer.get("/login")
	if code, hdr, _ := reviewer.post("/login", url.Values{"csrf": {csrfOf(t, page)}, "password": {testPassword}}); code != http.StatusSeeOther || hdr.Get("Location") != "/" {
		t.Fatalf("the reviewer from another address: %d, want a signed-in redirect", code)
	}
}
