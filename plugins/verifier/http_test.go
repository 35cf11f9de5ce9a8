package verifier_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/testslack"
	"github.com/registrum/registrum/plugins/verifier"
)

const testCredential = "s3cr3t-bearer.credential_value"

// scanner is an httptest scanner: it checks the request the way a real
// scanner service would and answers what answer returns.
type scanner struct {
	t      *testing.T
	mu     sync.Mutex
	got    []byte
	header http.Header
	answer func(w http.ResponseWriter, r *http.Request, body []byte)
}

func (s *scanner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.got, s.header = body, r.Header.Clone()
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+testCredential {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	sum := sha256.Sum256(body)
	if r.Header.Get("X-Content-Sha256") != hex.EncodeToString(sum[:]) || int64(len(body)) != r.ContentLength {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.answer(w, r, body)
}

// verdictAnswer answers rejected for EICAR content and approved otherwise.
func verdictAnswer(w http.ResponseWriter, _ *http.Request, body []byte) {
	if bytes.Contains(body, eicar()) {
		io.WriteString(w, `{"verdict":"rejected"}`)
		return
	}
	io.WriteString(w, `{"verdict":"approved"}`)
}

// credential writes content as the secret "scanner-token" under a new secret
// root and returns the config fields that reference it.
func credential(t *testing.T, content string) verifier.HTTPConfig {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "scanner-token"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return verifier.HTTPConfig{SecretRoot: root, CredentialRef: "secret:file/scanner-token"}
}

// withCredential returns cfg with the credential fields of cred.
func withCredential(cfg, cred verifier.HTTPConfig) verifier.HTTPConfig {
	cfg.SecretRoot, cfg.CredentialRef = cred.SecretRoot, cred.CredentialRef
	return cfg
}

func newHTTP(t *testing.T, s *scanner, cfg verifier.HTTPConfig) (*verifier.HTTP, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	cfg.ID = "scanner"
	cfg.Endpoint = srv.URL + "/scan"
	if cfg.CredentialRef == "" {
		cfg = withCredential(cfg, credential(t, testCredential+"\n"))
	}
	h, err := verifier.NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h, srv
}

func TestHTTPScannerGetsExactBytesAndHeaders(t *testing.T) {
	s := &scanner{t: t, answer: verdictAnswer}
	h, _ := newHTTP(t, s, verifier.HTTPConfig{})
	content := filler(300 << 10)
	att := attachment("evidence", content)
	v, err := verify(t, h, 5*time.Second, att, bytes.NewReader(content))
	if err != nil || v != (verifier.Verdict{Outcome: verifier.Approved}) {
		t.Fatalf("clean: %+v, %v", v, err)
	}
	if !bytes.Equal(s.got, content) {
		t.Fatal("scanner did not receive the exact bytes")
	}
	if s.header.Get("Content-Type") != "application/pdf" || s.header.Get("X-Content-Sha256") != att.SHA256 {
		t.Fatalf("headers %v", s.header)
	}
	withSig := append(filler(1000), eicar()...)
	v, err = verify(t, h, 5*time.Second, attachment("evidence", withSig), bytes.NewReader(withSig))
	if err != nil || v != (verifier.Verdict{Outcome: verifier.Rejected, Reason: verifier.ReasonUnspecified}) {
		t.Fatalf("eicar: %+v, %v", v, err)
	}
}

func TestHTTPAnythingButAnExactVerdictIsRetry(t *testing.T) {
	answers := map[string]struct {
		answer func(w http.ResponseWriter, r *http.Request, body []byte)
		cause  verifier.Cause
	}{
		"500": {func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(500) }, verifier.CauseStatus},
		"201 with verdict": {func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			w.WriteHeader(201)
			io.WriteString(w, `{"verdict":"approved"}`)
		}, verifier.CauseStatus},
		"redirect": {func(w http.ResponseWriter, r *http.Request, _ []byte) {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		}, verifier.CauseStatus},
		"unknown member":  {answerText(`{"verdict":"approved","secret":"x"}`), verifier.CauseAnswer},
		"duplicate":       {answerText(`{"verdict":"rejected","verdict":"approved"}`), verifier.CauseAnswer},
		"other verdict":   {answerText(`{"verdict":"retry"}`), verifier.CauseAnswer},
		"uppercase":       {answerText(`{"verdict":"APPROVED"}`), verifier.CauseAnswer},
		"not a string":    {answerText(`{"verdict":true}`), verifier.CauseAnswer},
		"array":           {answerText(`[{"verdict":"approved"}]`), verifier.CauseAnswer},
		"trailing object": {answerText(`{"verdict":"approved"}{}`), verifier.CauseAnswer},
		"trailing junk":   {answerText(`{"verdict":"approved"} ok`), verifier.CauseAnswer},
		"empty":           {answerText(``), verifier.CauseAnswer},
		"text":            {answerText(`approved`), verifier.CauseAnswer},
		"over 1 KiB":      {answerText(`{"verdict":"approved"}` + strings.Repeat(" ", 1024-21)), verifier.CauseAnswer},
		"hangs up": {func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}, verifier.CauseTransport},
	}
	for name, tc := range answers {
		t.Run(name, func(t *testing.T) {
			h, _ := newHTTP(t, &scanner{t: t, answer: tc.answer}, verifier.HTTPConfig{})
			v, err := verify(t, h, 5*time.Second, attachment("evidence", []byte("x")), strings.NewReader("x"))
			wantRetry(t, v, err, tc.cause)
		})
	}
	// At exactly 1 KiB the answer is still read.
	h, _ := newHTTP(t, &scanner{t: t, answer: answerText(`{"verdict":"approved"}` + strings.Repeat(" ", 1024-22))}, verifier.HTTPConfig{})
	if v, err := verify(t, h, 5*time.Second, attachment("evidence", []byte("x")), strings.NewReader("x")); err != nil || v.Outcome != verifier.Approved {
		t.Fatalf("1 KiB answer: %+v, %v", v, err)
	}
}

func answerText(s string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) { io.WriteString(w, s) }
}

func TestHTTPSlowScannerIsRetryAtTheTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	slow := func(w http.ResponseWriter, r *http.Request, _ []byte) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	h, _ := newHTTP(t, &scanner{t: t, answer: slow}, verifier.HTTPConfig{Timeout: 200 * time.Millisecond})
	start := time.Now()
	v, err := verify(t, h, 5*time.Second, attachment("evidence", []byte("x")), strings.NewReader("x"))
	wantRetry(t, v, err, verifier.CauseDeadline)
	if elapsed := time.Since(start); elapsed < 200*time.Millisecond || elapsed > 200*time.Millisecond+testslack.Scheduling {
		t.Fatalf("returned after %v, want at the 200 ms timeout", elapsed)
	}
	// The caller's shorter deadline wins over the configured timeout.
	start = time.Now()
	v, err = verify(t, h, 100*time.Millisecond, attachment("evidence", []byte("x")), strings.NewReader("x"))
	wantRetry(t, v, err, verifier.CauseDeadline)
	if elapsed := time.Since(start); elapsed > 100*time.Millisecond+testslack.Scheduling {
		t.Fatalf("returned after %v, want at the 100 ms deadline", elapsed)
	}
}

func TestHTTPContentMismatchDiscardsTheAnswer(t *testing.T) {
	// This scanner approves whatever it gets, without checking.
	approveAll := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"verdict":"approved"}`)
	}
	srv := httptest.NewServer(http.HandlerFunc(approveAll))
	defer srv.Close()
	h, err := verifier.NewHTTP(withCredential(verifier.HTTPConfig{ID: "s", Endpoint: srv.URL}, credential(t, testCredential)))
	if err != nil {
		t.Fatal(err)
	}
	content := filler(100 << 10)
	att := attachment("evidence", content)
	cases := map[string]struct {
		r     io.Reader
		cause verifier.Cause
	}{
		"longer":  {io.MultiReader(bytes.NewReader(content), strings.NewReader("!")), verifier.CauseLongerThanDeclared},
		"shorter": {bytes.NewReader(content[:len(content)-10]), verifier.CauseShorterThanDeclared},
		"digest":  {bytes.NewReader(append(filler(100<<10-1), '!')), verifier.CauseDigestMismatch},
	}
	for name, tc := range cases {
		v, err := verify(t, h, 5*time.Second, att, tc.r)
		if verifier.CauseOf(err) != tc.cause {
			t.Fatalf("%s: %+v, %v", name, v, err)
		}
		wantRetry(t, v, err, tc.cause)
	}
}

func TestHTTPCredentialComesFromTheSecretFileAndNeverShows(t *testing.T) {
	s := &scanner{t: t, answer: verdictAnswer}
	cred := credential(t, "wrong-credential")
	file := filepath.Join(cred.SecretRoot, "scanner-token")
	h, _ := newHTTP(t, s, cred)
	v, err := verify(t, h, 5*time.Second, attachment("evidence", []byte("x")), strings.NewReader("x"))
	wantRetry(t, v, err, verifier.CauseStatus)
	if strings.Contains(err.Error(), "wrong-credential") {
		t.Fatal("credential in error text")
	}
	// Rotated in place: the next call uses the new credential.
	if err := os.WriteFile(file, []byte(testCredential+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := verify(t, h, 5*time.Second, attachment("evidence", []byte("x")), strings.NewReader("x")); err != nil || v.Outcome != verifier.Approved {
		t.Fatalf("after rotation: %+v, %v", v, err)
	}
	// Readable by others: refused at configuration, retry at call time.
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := verifier.NewHTTP(withCredential(verifier.HTTPConfig{ID: "s", Endpoint: "https://s.example"}, cred)); err == nil || !strings.Contains(err.Error(), "owner-only") {
		t.Fatalf("group-readable secret: %v", err)
	}
	v, err = verify(t, h, 5*time.Second, attachment("evidence", []byte("x")), strings.NewReader("x"))
	wantRetry(t, v, err, verifier.CauseCredential)
	// Removed: retry with the credential cause.
	os.Remove(file)
	v, err = verify(t, h, 5*time.Second, attachment("evidence", []byte("x")), strings.NewReader("x"))
	wantRetry(t, v, err, verifier.CauseCredential)
}

func TestHTTPConfigIsChecked(t *testing.T) {
	good := credential(t, testCredential)
	cases := map[string]struct {
		cfg  verifier.HTTPConfig
		want string // "" means accepted
	}{
		"https":              {verifier.HTTPConfig{Endpoint: "https://scanner.example/scan"}, ""},
		"loopback http":      {verifier.HTTPConfig{Endpoint: "http://127.0.0.1:9000/scan"}, ""},
		"localhost http":     {verifier.HTTPConfig{Endpoint: "http://localhost:9000/scan"}, ""},
		"ipv6 loopback":      {verifier.HTTPConfig{Endpoint: "http://[::1]:9000/scan"}, ""},
		"remote http":        {verifier.HTTPConfig{Endpoint: "http://scanner.example/scan"}, "loopback"},
		"user info":          {verifier.HTTPConfig{Endpoint: "https://u:p@scanner.example/scan"}, "user information"},
		"fragment":           {verifier.HTTPConfig{Endpoint: "https://scanner.example/scan#x"}, "fragment"},
		"ftp":                {verifier.HTTPConfig{Endpoint: "ftp://scanner.example/scan"}, "scheme"},
		"timeout 99ms":       {verifier.HTTPConfig{Endpoint: "https://s.example", Timeout: 99 * time.Millisecond}, "timeout"},
		"timeout 100ms":      {verifier.HTTPConfig{Endpoint: "https://s.example", Timeout: 100 * time.Millisecond}, ""},
		"timeout 60s":        {verifier.HTTPConfig{Endpoint: "https://s.example", Timeout: 60 * time.Second}, ""},
		"timeout 60.001s":    {verifier.HTTPConfig{Endpoint: "https://s.example", Timeout: 60001 * time.Millisecond}, "timeout"},
		"missing credential": {verifier.HTTPConfig{Endpoint: "https://s.example", SecretRoot: "/nonexistent", CredentialRef: "secret:file/token"}, "secret:file/token"},
		"path as reference":  {verifier.HTTPConfig{Endpoint: "https://s.example", SecretRoot: "/", CredentialRef: "secret:file/../etc/passwd"}, "plain file name"},
		"two lines":          {withCredential(verifier.HTTPConfig{Endpoint: "https://s.example"}, credential(t, "a\nb\n")), "one bearer token"},
		"empty credential":   {withCredential(verifier.HTTPConfig{Endpoint: "https://s.example"}, credential(t, "")), "the file is empty"},
		"huge credential":    {withCredential(verifier.HTTPConfig{Endpoint: "https://s.example"}, credential(t, strings.Repeat("a", 4097))), "longer than"},
		"4 KiB credential":   {withCredential(verifier.HTTPConfig{Endpoint: "https://s.example"}, credential(t, strings.Repeat("a", 4096))), ""},
	}
	for name, tc := range cases {
		cfg := tc.cfg
		cfg.ID = "s"
		if cfg.CredentialRef == "" {
			cfg = withCredential(cfg, good)
		}
		_, err := verifier.NewHTTP(cfg)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one mentioning %q", name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), testCredential) {
			t.Errorf("%s: credential in error", name)
		}
	}
}

func TestHTTPSWithPrivateRoots(t *testing.T) {
	srv := httptest.NewTLSServer(&scanner{t: t, answer: verdictAnswer})
	defer srv.Close()
	cred := credential(t, testCredential)
	h, err := verifier.NewHTTP(withCredential(verifier.HTTPConfig{ID: "s", Endpoint: srv.URL, RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}, cred))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := verify(t, h, 5*time.Second, attachment("evidence", []byte("x")), strings.NewReader("x")); err != nil || v.Outcome != verifier.Approved {
		t.Fatalf("https: %+v, %v", v, err)
	}
	// Without the private root the certificate is not trusted: retry.
	h2, err := verifier.NewHTTP(withCredential(verifier.HTTPConfig{ID: "s", Endpoint: srv.URL}, cred))
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify(t, h2, 5*time.Second, attachment("evidence", []byte("x")), strings.NewReader("x"))
	wantRetry(t, v, err, verifier.CauseTransport)
}
