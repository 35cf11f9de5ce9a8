// Package client is a typed Go client of a Registrum record host's /v1
// routes: records (create, read, conditional read, JSON Patch under
// If-Match, tombstone, batch), collection reads with their query options
// and an iterator that follows cursors, history (revisions, :current,
// :as-of, :snapshot), change-request actions followed through the hrefs a
// read offers and the request history they leave, attachments, immediate
// actions, ingestion runs, the registry document and the spatial adapter.
//
// # Credentials
//
// Tokens come from a TokenSource: a *tokensource.Source (the
// private-key-JWT client of sdk/tokensource) fits as it is, StaticToken
// holds a token at hand, and nil calls anonymous profiles only. The host
// answers 401 authentication.refused to a token it rejects, an expired one
// included; the client then asks the source once for another token (Refresh
// on a TokenRefresher, Token otherwise) and sends the call once more when a
// retry is safe (below) and the source gave a different token. A second 401
// is the answer: the client never loops.
//
// # Idempotency and retries
//
// Every write that accepts an Idempotency-Key gets a fresh random key
// unless the caller names one (WithIdempotencyKey) or asks for none
// (WithoutIdempotencyKey), so a write can be retried without writing
// twice. Reads, and writes carrying an Idempotency-Key, are retried after a
// transport failure or a 502/503/504 answer (503 waits for Retry-After, at
// most MaxRetryAfter), at most Options.MaxRetries times; nothing else is.
//
// # Refusals
//
// Refusals come back as *Problem, the host's problem document: branch on
// its Code with IsCode (client.IsCode(err, client.CodePreconditionFailed)).
//
// # Paging
//
// Collection reads, revisions, temporal reads, snapshots, features and the
// request history are iterators (iter.Seq2[T, error]) that follow the
// host's cursors under the same access profile and stop at the first error,
// which they yield; List and ListNext, SnapshotPage and FeaturePage read
// one page at a time.
//
// The client speaks HTTP only: it never imports the host, the store or the
// issuer (a test at the repository root fails if it does).
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/registrum/registrum/sdk/tokensource"
)

// Defaults of Options.
const (
	// DefaultMaxRetries is how many times a retryable call is retried.
	DefaultMaxRetries = 3
	// DefaultRetryWait is the first wait between attempts; it doubles.
	DefaultRetryWait = 200 * time.Millisecond
	// MaxRetryAfter caps a Retry-After the client is willing to wait.
	MaxRetryAfter = 30 * time.Second
	// MaxResponseBytes bounds a response body the client reads.
	MaxResponseBytes = 64 << 20
	// MaxProblemBytes bounds the body of a refusal the client reads and
	// parses; a larger one is taken for no problem document.
	MaxProblemBytes = 64 << 10
	// MaxDetailBytes bounds the detail of a Problem as the client keeps it.
	MaxDetailBytes = 512
)

// TokenSource hands out access tokens. *tokensource.Source implements it.
type TokenSource interface {
	Token(ctx context.Context) (*tokensource.Token, error)
}

// StaticToken is a TokenSource that always returns the same access token.
type StaticToken string

// Token returns the token.
func (s StaticToken) Token(context.Context) (*tokensource.Token, error) {
	return &tokensource.Token{AccessToken: string(s), TokenType: "Bearer"}, nil
}

// Options configure a Client.
type Options struct {
	// BaseURL is the record host's address, for example http://127.0.0.1:8080.
	BaseURL string
	// Tokens supplies bearer tokens; nil calls without a token (anonymous
	// profiles only).
	Tokens TokenSource
	// HTTPClient sends the requests (default: a client with a 60 s time-out).
	HTTPClient *http.Client
	// MaxRetries bounds the retries of a retryable call (default
	// DefaultMaxRetries; negative: none).
	MaxRetries int
	// RetryWait is the first wait between attempts (default DefaultRetryWait).
	RetryWait time.Duration
	// NewIdempotencyKey makes the key of a write the caller gave none
	// (default: 128 random bits in hex).
	NewIdempotencyKey func() string
}

// Client calls one record host. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	tokens  TokenSource
	http    *http.Client
	retries int
	wait    time.Duration
	newKey  func() string
}

// New checks o and returns a Client.
func New(o Options) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(o.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: BaseURL %q is not an http(s) URL", o.BaseURL)
	}
	c := &Client{base: u, tokens: o.Tokens, http: o.HTTPClient, retries: o.MaxRetries, wait: o.RetryWait, newKey: o.NewIdempotencyKey}
	if c.http == nil {
		c.http = &http.Client{Timeout: 60 * time.Second}
	}
	if c.retries == 0 {
		c.retries = DefaultMaxRetries
	}
	if c.retries < 0 {
		c.retries = 0
	}
	if c.wait <= 0 {
		c.wait = DefaultRetryWait
	}
	if c.newKey == nil {
		c.newKey = RandomKey
	}
	return c, nil
}

// RandomKey returns 128 random bits in hex: the default idempotency key.
func RandomKey() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// CallOption adjusts one call.
type CallOption func(*call)

type call struct {
	profile string
	key     string
	noKey   bool
}

// WithAccessProfile selects an access profile other than the route's default.
func WithAccessProfile(id string) CallOption { return func(c *call) { c.profile = id } }

// WithIdempotencyKey sets the Idempotency-Key of a write instead of a fresh
// random one: repeat a write with the same key to get its first answer.
func WithIdempotencyKey(key string) CallOption { return func(c *call) { c.key = key } }

// WithoutIdempotencyKey sends a write without an Idempotency-Key (it is then
// never retried).
func WithoutIdempotencyKey() CallOption { return func(c *call) { c.noKey = true } }

func options(opts []CallOption) call {
	var c call
	for _, o := range opts {
		o(&c)
	}
	return c
}

// request is one HTTP call to make.
type request struct {
	method string
	// path is a path below the base URL, or an href the host gave (a path
	// with its own query).
	path  string
	query url.Values
	body  []byte
	// stream, when set, is the body instead; it is retried only when it
	// can be rewound (an io.Seeker).
	stream io.Reader
	size   int64
	ctype  string
	header http.Header
	// idempotent marks a write that carries an Idempotency-Key.
	idempotent bool
	// open keeps the body of a 2xx answer open for the caller to stream.
	open bool
	// notModified accepts a 304 answer (a read sent with If-None-Match).
	notModified bool
}

// response is an answer with a 2xx status.
type response struct {
	status int
	header http.Header
	body   []byte
	// stream is the open body of a request with open set.
	stream io.ReadCloser
}

// write prepares a write's Idempotency-Key.
func (c *Client) write(r *request, o call) {
	if o.noKey {
		return
	}
	key := o.key
	if key == "" {
		key = c.newKey()
	}
	if r.header == nil {
		r.header = http.Header{}
	}
	r.header.Set("Idempotency-Key", key)
	r.idempotent = true
}

// target resolves a request's path and query against the base URL.
func (c *Client) target(r *request, profile string) (string, error) {
	ref, err := url.Parse(r.path)
	if err != nil || ref.Scheme != "" || ref.Host != "" || !strings.HasPrefix(ref.Path, "/") {
		return "", fmt.Errorf("client: %q is not a path of the host", r.path)
	}
	u := *c.base
	u.Path = strings.TrimRight(c.base.Path, "/") + ref.Path
	u.RawPath = ""
	q := ref.Query()
	for k, vs := range r.query {
		for _, v := range vs {
			q.Add(k, v)
		}
	}
	if profile != "" && q.Get("accessProfile") == "" {
		q.Set("accessProfile", profile)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// do sends r, retrying where that is safe, and returns a 2xx answer (or a
// 304 to a request with notModified set) or the refusal as a *Problem.
//
// A retry-safe call (a read, a write carrying an Idempotency-Key) is sent
// again after a transport failure or a 502/503/504, at most c.retries
// times. A 401 to a call that carried a token renews the token once (see
// TokenRefresher) and, when the call is retry-safe and the source gave
// another token, sends it once more: a second 401 is the answer.
func (c *Client) do(ctx context.Context, r *request, profile string) (*response, error) {
	target, err := c.target(r, profile)
	if err != nil {
		return nil, err
	}
	retryable := r.method == http.MethodGet || r.method == http.MethodHead || r.idempotent
	var seeker io.Seeker
	if r.stream != nil {
		seeker, _ = r.stream.(io.Seeker)
		retryable = retryable && seeker != nil
	}
	wait := c.wait
	renewed := false // the one token renewal of this call is spent
	next := ""       // the renewed token, for the next send
	for attempt, sent := 0, 0; ; sent++ {
		if sent > 0 && seeker != nil {
			if _, err := seeker.Seek(0, io.SeekStart); err != nil {
				return nil, fmt.Errorf("client: rewind the body: %w", err)
			}
		}
		token := next
		if token == "" && c.tokens != nil {
			tok, err := c.tokens.Token(ctx)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", errToken, err)
			}
			token = tok.AccessToken
		}
		next = ""
		resp, err := c.once(ctx, r, target, token)
		again := retryable && attempt < c.retries && ctx.Err() == nil
		switch {
		case err != nil && again && !errors.As(err, new(*Problem)):
		case err != nil:
			return nil, err
		case resp.status == http.StatusUnauthorized && token != "" && !renewed:
			renewed = true
			refused := problemOf(resp)
			fresh, err := c.renew(ctx, token)
			if err != nil {
				return nil, fmt.Errorf("%w (renewing the refused token failed: %w)", refused, err)
			}
			if !retryable || fresh == token || ctx.Err() != nil {
				return nil, refused
			}
			next = fresh
			continue // at once, and not counted as a retry
		case resp.status == http.StatusBadGateway || resp.status == http.StatusServiceUnavailable || resp.status == http.StatusGatewayTimeout:
			if !again {
				return nil, problemOf(resp)
			}
			if d, ok := retryAfter(resp.header.Get("Retry-After")); ok {
				wait = d
			}
		case resp.status >= 200 && resp.status < 300, resp.status == http.StatusNotModified && r.notModified:
			return resp, nil
		default:
			return nil, problemOf(resp)
		}
		attempt++
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
}

var errToken = errors.New("client: no access token")

// TokenRefresher is a TokenSource that can replace a token the host
// refused before it would renew it by itself (a host whose clock runs
// ahead of the issuer's sees a token expire early). *tokensource.Source
// implements it.
type TokenRefresher interface {
	TokenSource
	// Refresh returns a token other than refused: it drops refused from
	// its cache and fetches a new one, unless a newer one is already there.
	Refresh(ctx context.Context, refused string) (*tokensource.Token, error)
}

// renew asks the token source for a token to replace refused: Refresh
// when the source has it, else Token again.
func (c *Client) renew(ctx context.Context, refused string) (string, error) {
	var tok *tokensource.Token
	var err error
	if tr, ok := c.tokens.(TokenRefresher); ok {
		tok, err = tr.Refresh(ctx, refused)
	} else {
		tok, err = c.tokens.Token(ctx)
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", errToken, err)
	}
	return tok.AccessToken, nil
}

func (c *Client) once(ctx context.Context, r *request, target, token string) (*response, error) {
	var body io.Reader
	switch {
	case r.stream != nil:
		body = io.NopCloser(r.stream)
	case r.body != nil:
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
	}
	if r.stream != nil {
		req.ContentLength = r.size // -1: unknown, sent chunked
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if r.ctype != "" {
		req.Header.Set("Content-Type", r.ctype)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json, application/geo+json, application/problem+json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
	}
	if r.open && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return &response{status: resp.StatusCode, header: resp.Header, stream: resp.Body}, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		// A refusal is small: read no more of it than a problem document
		// may hold.
		b, err := io.ReadAll(io.LimitReader(resp.Body, MaxProblemBytes+1))
		if err != nil || len(b) > MaxProblemBytes {
			b = nil
		}
		return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: read the answer: %w", r.method, r.path, err)
	}
	if len(b) > MaxResponseBytes {
		return nil, fmt.Errorf("client: %s %s: the answer is larger than %d bytes", r.method, r.path, MaxResponseBytes)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func retryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return min(time.Duration(s)*time.Second, MaxRetryAfter), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(time.Until(t), 0), MaxRetryAfter), true
	}
	return 0, false
}

// Problem is a refusal of the host: its RFC 9457 problem document.
type Problem struct {
	// Type is the problem type URI (the registry's base, then the code).
	Type string `json:"type"`
	// Title is a short title; Detail explains this refusal.
	Title string `json:"title"`
	// Status is the HTTP status.
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// Code is the short code to branch on (resource.not_found, …).
	Code string `json:"code"`
	// TraceID names the request in the host's request log.
	TraceID string `json:"traceId"`
	// FieldPath names the offending body member; "" when none does.
	FieldPath string `json:"fieldPath"`
}

// Error renders the status, the code and the detail.
func (p *Problem) Error() string {
	s := fmt.Sprintf("registrum: %d %s", p.Status, p.Code)
	if p.Detail != "" {
		s += ": " + p.Detail
	}
	if p.FieldPath != "" {
		s += " (at " + p.FieldPath + ")"
	}
	return s
}

// Problem codes of the record host.
const (
	CodeAuthenticationRefused = "authentication.refused"
	CodeNotFound              = "resource.not_found"
	CodeQueryInvalid          = "query.invalid"
	CodeCursorInvalid         = "query.cursor_invalid"
	CodeRequestInvalid        = "request.invalid"
	CodePlanRefused           = "request.plan_refused"
	CodePreconditionRequired  = "precondition.required"
	CodePreconditionFailed    = "precondition.failed"
	CodeIdempotencyConflict   = "idempotency.conflict"
	CodeMutationConflict      = "mutation.conflict"
	CodeReceiptErased         = "ingestion.receipt_erased"
	CodeSourceUnavailable     = "source.unavailable"
	CodeServiceUnavailable    = "service.unavailable"
)

// IsCode reports whether err is a *Problem with that code.
func IsCode(err error, code string) bool {
	var p *Problem
	return errors.As(err, &p) && p.Code == code
}

// problemOf reads a refusal; an answer that is not a problem document
// becomes a Problem with its status and no code.
func problemOf(r *response) error {
	p := &Problem{}
	mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type"))
	if mt != "application/problem+json" || json.Unmarshal(r.body, p) != nil || p.Status == 0 {
		p = &Problem{Status: r.status, Title: http.StatusText(r.status), Detail: "the host answered without a problem document"}
	}
	// The answer's status is the refusal's, whatever the document says.
	p.Status = r.status
	p.Detail, p.Title, p.FieldPath = cut(p.Detail), cut(p.Title), cut(p.FieldPath)
	return p
}

// cut cuts s to at most MaxDetailBytes of valid UTF-8.
func cut(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxDetailBytes {
		return s
	}
	const more = "…"
	n := MaxDetailBytes - len(more)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + more
}

// decode reads a JSON answer into v.
func decode(r *response, v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
		return fmt.Errorf("client: the answer is not the expected JSON: %w", err)
	}
	return nil
}

func jsonBody(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("client: encode the body: %w", err)
	}
	return b, nil
}

// Registry reads GET /v1/registry: the registry as the caller's profile
// sees it (a document that describes and grants nothing).
func (c *Client) Registry(ctx context.Context, opts ...CallOption) (json.RawMessage, error) {
	o := options(opts)
	r, err := c.do(ctx, &request{method: http.MethodGet, path: "/v1/registry"}, o.profile)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(r.body), nil
}

// ErrPackageMismatch is returned by CheckPackage when the host serves
// another package revision than the one a typed client was generated from.
var ErrPackageMismatch = errors.New("client: the host serves another package revision")

// PackageRevision reads the revision (sha256:<hex>) of the package the
// host serves, from the registry document.
func (c *Client) PackageRevision(ctx context.Context, opts ...CallOption) (string, error) {
	b, err := c.Registry(ctx, opts...)
	if err != nil {
		return "", err
	}
	var doc struct {
		PackageRevision string `json:"packageRevision"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.PackageRevision == "" {
		return "", fmt.Errorf("client: the registry document names no packageRevision")
	}
	return doc.PackageRevision, nil
}

// CheckPackage checks that the host serves the package revision want (the
// PackageRevision constant of code from `registrum generate go`): typed
// clients are exact for one compiled package. A mismatch wraps
// ErrPackageMismatch and names both revisions.
func (c *Client) CheckPackage(ctx context.Context, want string, opts ...CallOption) error {
	got, err := c.PackageRevision(ctx, opts...)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%w: %s, generated from %s", ErrPackageMismatch, got, want)
	}
	return nil
}
