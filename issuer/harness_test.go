package issuer

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/issuer/keys"
)

// deployment is a dev setup on disk with a running server.
type deployment struct {
	t       testing.TB
	dir     string
	setup   *DevSetup
	cfg     *Config
	srv     *Server
	baseURL string
	keys    map[string]*jose.JSONWebKey // client id -> private key
	cancel  context.CancelFunc
	done    chan error
}

// newSetup writes a dev deployment for a listener it opens, without starting.
func newSetup(t testing.TB) (*DevSetup, net.Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	dir := t.TempDir()
	setup, err := WriteDevSetup(dir, DevOptions{Port: ln.Addr().(*net.TCPAddr).Port})
	if err != nil {
		t.Fatal(err)
	}
	return setup, ln
}

// startDeployment writes a dev setup, lets edit change files, then loads and serves it.
func startDeployment(t testing.TB, edit func(dir string), opts ...Option) *deployment {
	t.Helper()
	setup, ln := newSetup(t)
	dir := filepath.Dir(setup.ConfigPath)
	if edit != nil {
		edit(dir)
	}
	cfg, err := LoadConfig(setup.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &deployment{t: t, dir: dir, setup: setup, cfg: cfg, srv: srv, baseURL: "http://" + ln.Addr().String(), keys: map[string]*jose.JSONWebKey{}, cancel: cancel, done: make(chan error, 1)}
	for _, c := range setup.Clients {
		d.keys[c.ID] = readPrivateKey(t, c.KeyFile)
	}
	go func() { d.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-d.done
		srv.Close()
	})
	return d
}

func readPrivateKey(t testing.TB, path string) *jose.JSONWebKey {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return &k
}

// assertion builds a signed client assertion for client with claims
// overriding the defaults (a nil value deletes a claim).
func (d *deployment) assertion(clientID string, key *jose.JSONWebKey, override map[string]any) string {
	d.t.Helper()
	now := time.Now()
	claims := map[string]any{
		"iss": clientID, "sub": clientID, "aud": d.cfg.ClientAssertion.Audience,
		"jti": newTokenID(), "iat": now.Unix(), "exp": now.Add(time.Minute).Unix(),
	}
	for k, v := range override {
		if v == nil {
			delete(claims, k)
		} else {
			claims[k] = v
		}
	}
	return signAssertion(d.t, key, claims, nil)
}

func signAssertion(t testing.TB, key *jose.JSONWebKey, claims map[string]any, headers map[jose.HeaderKey]any) string {
	t.Helper()
	alg, err := keys.AlgorithmFor(key)
	if err != nil {
		t.Fatal(err)
	}
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if key.KeyID != "" {
		opts = opts.WithHeader("kid", key.KeyID)
	}
	for k, v := range headers {
		opts = opts.WithHeader(k, v)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: key.Key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func formBody(assertion string) string {
	return url.Values{
		"grant_type":            {"client_credentials"},
		"client_assertion_type": {jwtBearerAssertionType},
		"client_assertion":      {assertion},
	}.Encode()
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

func (d *deployment) post(body string) response {
	return d.postType("application/x-www-form-urlencoded", body)
}

func (d *deployment) postType(contentType, body string) response {
	d.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, d.baseURL+"/token", strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return d.do(req)
}

func (d *deployment) get(path string) response {
	d.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.baseURL+path, nil)
	return d.do(req)
}

func (d *deployment) do(req *http.Request) response {
	d.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, b}
}

// issue requests a token for client with overriding claims and expects 200.
func (d *deployment) issue(clientID string, override map[string]any) (map[string]any, map[string]any, map[string]any) {
	d.t.Helper()
	r := d.post(formBody(d.assertion(clientID, d.keys[clientID], override)))
	if r.status != http.StatusOK {
		d.t.Fatalf("token for %s: %d %s", clientID, r.status, r.body)
	}
	body := r.json(d.t)
	header, claims := decodeJWT(d.t, body["access_token"].(string))
	return body, header, claims
}

func decodeJWT(t testing.TB, tok string) (map[string]any, map[string]any) {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a compact JWS", tok)
	}
	var h, c map[string]any
	for i, dst := range []*map[string]any{&h, &c} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			t.Fatal(err)
		}
	}
	return h, c
}

// expectError checks an error answer.
func expectError(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d (body %s)", r.status, status, r.body)
	}
	if got := string(r.body); got != fmt.Sprintf(`{"error":"%s"}`, code) {
		t.Fatalf("body %s, want error %s", got, code)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}
	wa := r.header.Get("WWW-Authenticate")
	if code == ErrorInvalidClient && wa != `Bearer error="invalid_client"` {
		t.Fatalf("WWW-Authenticate %q", wa)
	}
	if code != ErrorInvalidClient && wa != "" {
		t.Fatalf("unexpected WWW-Authenticate %q", wa)
	}
}

// writeFile writes content to dir/name.
func writeFile(t testing.TB, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// auditLines returns the lines of the active audit segment.
func (d *deployment) auditLines() []string {
	d.t.Helper()
	raw, err := os.ReadFile(d.cfg.Audit.Path)
	if err != nil {
		d.t.Fatal(err)
	}
	if len(raw) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
}
