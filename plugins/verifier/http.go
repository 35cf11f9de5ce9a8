package verifier

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/registrum/registrum/internal/secrets"
	"github.com/registrum/registrum/internal/telemetry"
)

// The limits of the http kind.
const (
	// MinHTTPTimeout and MaxHTTPTimeout bound HTTPConfig.Timeout.
	MinHTTPTimeout = 100 * time.Millisecond
	MaxHTTPTimeout = 60 * time.Second
	// DefaultHTTPTimeout is used when HTTPConfig.Timeout is zero.
	DefaultHTTPTimeout = 10 * time.Second
	// MaxAnswerBytes is the largest scanner answer read.
	MaxAnswerBytes = 1 << 10
	// maxCredentialBytes bounds the secret file.
	maxCredentialBytes = 4 << 10
)

// HTTPConfig configures a scanner reached over HTTP.
type HTTPConfig struct {
	// ID names the verifier in errors and logs.
	ID string
	// Endpoint is the URL the bytes are POSTed to: https, or plain http to a
	// loopback address only. It may not carry credentials or a fragment.
	Endpoint string
	// SecretRoot is the folder secret references are resolved under.
	SecretRoot string
	// CredentialRef names the secret holding the bearer credential (one
	// line), "secret:file/<name>". The file follows the secret-file rules of
	// the issuer (owner-only, inside the root, one link). It is read on every
	// call, so it can be rotated in place, and is never logged.
	CredentialRef string
	// Timeout bounds each call, 100 ms to 60 s; zero means 10 s. A call's own
	// deadline bounds it further.
	Timeout time.Duration
	// MaxBytes is the largest attachment sent; 0 means MaxContentBytes.
	MaxBytes int64
	// RootCAs, when set, replaces the system roots for https endpoints.
	RootCAs *x509.CertPool
}

// HTTP is the http verifier kind: POST of the exact bytes with
// Content-Type (the media type), X-Content-Sha256 (lowercase hex) and a
// bearer credential; the answer must be status 200 with exactly
// {"verdict":"approved"} or {"verdict":"rejected"}. Anything else — another
// status, another document, a redirect, a transport error, a timeout — is a
// Retry. Redirects are not followed and no proxy is used.
type HTTP struct {
	cfg    HTTPConfig
	url    string
	client *http.Client
}

var _ VerifyCloser = (*HTTP)(nil)

// NewHTTP checks the configuration and that the credential file holds a
// usable credential.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	if cfg.ID == "" {
		return nil, errors.New("verifier: http verifier: id is empty")
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = MaxContentBytes
	}
	if cfg.MaxBytes < 1 || cfg.MaxBytes > MaxContentBytes {
		return nil, fmt.Errorf("verifier %q: maximum bytes %d outside 1..%d", cfg.ID, cfg.MaxBytes, MaxContentBytes)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultHTTPTimeout
	}
	if cfg.Timeout < MinHTTPTimeout || cfg.Timeout > MaxHTTPTimeout {
		return nil, fmt.Errorf("verifier %q: timeout %v outside %v..%v", cfg.ID, cfg.Timeout, MinHTTPTimeout, MaxHTTPTimeout)
	}
	u, err := checkEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("verifier %q: endpoint: %w", cfg.ID, err)
	}
	if _, err := readCredential(cfg.SecretRoot, cfg.CredentialRef); err != nil {
		return nil, fmt.Errorf("verifier %q: %w", cfg.ID, err)
	}
	transport := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: cfg.Timeout}).DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: cfg.Timeout,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &HTTP{cfg: cfg, url: u.String(), client: &http.Client{
		Transport:     telemetry.Transport(transport),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}, nil
}

// checkEndpoint accepts https URLs and http URLs whose host is a loopback
// address, without user information or fragment.
func checkEndpoint(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a URL")
	}
	switch {
	case u.User != nil:
		return nil, errors.New("must not carry user information; the credential comes from a secret file")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, errors.New("must not carry a fragment")
	case u.Hostname() == "":
		return nil, errors.New("has no host")
	case u.Scheme == "https":
		return u, nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return u, nil
	case u.Scheme == "http":
		return nil, fmt.Errorf("plain http is allowed only to a loopback address, not %q", u.Hostname())
	}
	return nil, fmt.Errorf("scheme %q is not https", u.Scheme)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// b64token is RFC 6750's bearer credential syntax.
var b64token = regexp.MustCompile(`^[A-Za-z0-9._~+/-]+=*$`)

// readCredential reads the bearer credential the reference names. Errors
// name the reference and never the content.
func readCredential(root, ref string) (string, error) {
	b, err := secrets.ResolveFile(root, ref)
	if err != nil {
		return "", fmt.Errorf("credential: %w", err)
	}
	if len(b) > maxCredentialBytes {
		return "", fmt.Errorf("credential %q: longer than %d bytes", ref, maxCredentialBytes)
	}
	cred := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if !b64token.MatchString(cred) {
		return "", fmt.Errorf("credential %q: must hold one bearer token (RFC 6750 characters) on one line", ref)
	}
	return cred, nil
}

// Verify POSTs the bytes to the scanner and returns its verdict. See [Verifier].
func (h *HTTP) Verify(ctx context.Context, att Attachment, content io.Reader) (v Verdict, err error) {
	ctx, span := startVerifySpan(ctx, h.cfg.ID, "http")
	defer func() { endVerifySpan(span, v, err) }()
	if err := att.Validate(h.cfg.MaxBytes); err != nil {
		return retry(h.cfg.ID, CauseInvalidAttachment, nil)
	}
	cred, err := readCredential(h.cfg.SecretRoot, h.cfg.CredentialRef)
	if err != nil {
		return retry(h.cfg.ID, CauseCredential, nil)
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()

	body := newExactReader(content, att)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, body)
	if err != nil {
		return retry(h.cfg.ID, CauseTransport, nil)
	}
	req.ContentLength = att.DeclaredSize
	req.Header.Set("Content-Type", att.MediaType)
	req.Header.Set("X-Content-Sha256", att.SHA256)
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Accept", "application/json")

	resp, err := h.client.Do(req)
	if err != nil {
		// The client's error may quote the URL; only the cause is kept.
		if c := body.cause(); c != "" {
			return retry(h.cfg.ID, c, nil)
		}
		if ctx.Err() != nil {
			return retry(h.cfg.ID, CauseDeadline, ctx.Err())
		}
		return retry(h.cfg.ID, CauseTransport, nil)
	}
	answer, readErr := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	_ = resp.Body.Close()

	// The verdict counts only for exactly the declared bytes: wait until the
	// transport is done with the request body, then look at what it read.
	select {
	case <-body.closed:
	case <-ctx.Done():
		return retry(h.cfg.ID, CauseDeadline, ctx.Err())
	}
	if c := body.cause(); c != "" {
		return retry(h.cfg.ID, c, nil)
	}
	if !body.verified() {
		return retry(h.cfg.ID, CauseTransport, nil)
	}
	if readErr != nil {
		if ctx.Err() != nil {
			return retry(h.cfg.ID, CauseDeadline, ctx.Err())
		}
		return retry(h.cfg.ID, CauseTransport, nil)
	}
	if resp.StatusCode != http.StatusOK {
		return retry(h.cfg.ID, CauseStatus, nil)
	}
	outcome, ok := parseAnswer(answer)
	if !ok {
		return retry(h.cfg.ID, CauseAnswer, nil)
	}
	if outcome == Rejected {
		return Verdict{Outcome: Rejected, Reason: ReasonUnspecified}, nil
	}
	return Verdict{Outcome: Approved}, nil
}

// parseAnswer accepts exactly one JSON object with the single member
// "verdict" whose value is "approved" or "rejected", at most MaxAnswerBytes
// long. Unknown or repeated members, other values and trailing data are
// refused.
func parseAnswer(b []byte) (Outcome, bool) {
	if len(b) > MaxAnswerBytes {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	want := func(check func(json.Token) bool) bool {
		tok, err := dec.Token()
		return err == nil && check(tok)
	}
	var value string
	ok := want(func(t json.Token) bool { return t == json.Delim('{') }) &&
		want(func(t json.Token) bool { return t == "verdict" }) &&
		want(func(t json.Token) bool { s, isStr := t.(string); value = s; return isStr }) &&
		want(func(t json.Token) bool { return t == json.Delim('}') })
	if !ok {
		return "", false
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", false
	}
	switch Outcome(value) {
	case Approved, Rejected:
		return Outcome(value), true
	}
	return "", false
}

// Close releases idle connections.
func (h *HTTP) Close() error {
	h.client.CloseIdleConnections()
	return nil
}
