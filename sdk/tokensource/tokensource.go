// Package tokensource obtains access tokens from a Registrum issuer (or any
// OAuth 2.0 token endpoint accepting client_credentials with RFC 7523
// private-key-JWT client authentication) and caches them until shortly before
// they expire.
//
// Each token request carries a freshly signed client assertion with a new
// jti: an assertion is never reused, not even on retry. At most 16 KiB of a
// response is read.
//
// The assertion's audience is the issuer identifier, as
// draft-ietf-oauth-rfc7523bis asks of clients (and as a Registrum issuer
// requires: docs/decisions/client-assertion-audience.md). Unless Audience is
// set, the source learns the identifier once from the issuer's RFC 8414
// discovery document (see Config.Issuer and Config.TokenURL).
package tokensource

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// MaximumResponseBytes is the most of a token response the source reads.
const MaximumResponseBytes = 16384

// DefaultAssertionLifetime is the lifetime of each client assertion.
const DefaultAssertionLifetime = 60 * time.Second

// DefaultExpiryMargin is how long before expiry a cached token is renewed.
const DefaultExpiryMargin = 30 * time.Second

// Config configures a Source.
type Config struct {
	// Issuer is the URL the issuer's discovery document is served under:
	// its identifier (https://issuer.example), or the URL it is reached at
	// (for `registrum dev`, its loopback listener http://127.0.0.1:PORT), or
	// the full URL of a discovery document (one holding /.well-known/). The
	// document at <Issuer>/.well-known/oauth-authorization-server names the
	// identifier (the assertion audience, unless Audience is set) and the
	// token endpoint (TokenURL, unless set). Its identifier must name the
	// host and port of Issuer (loopback names count as one host).
	Issuer string
	// TokenURL is the token endpoint. With Issuer empty and Audience empty,
	// the source reads the discovery document of TokenURL's origin and takes
	// its identifier as the audience when that document names TokenURL as
	// its token endpoint and its identifier names TokenURL's host and port
	// (loopback names count as one host); an origin serving no discovery
	// document leaves the audience TokenURL (RFC 7523's first choice).
	TokenURL string
	// ClientID is the client id (the assertion iss and sub).
	ClientID string
	// Key is the client's private JWK (ES256, EdDSA or RS256).
	Key *jose.JSONWebKey
	// Audience is the assertion aud, as the issuer is configured to expect it
	// (clientAssertion.audience). Default: the issuer identifier, learned by
	// discovery.
	Audience string
	// HTTPClient sends the requests (default: a client with a 30 s time-out).
	HTTPClient *http.Client
	// AssertionLifetime is exp - iat of each assertion (default DefaultAssertionLifetime).
	AssertionLifetime time.Duration
	// ExpiryMargin renews a cached token this long before it expires
	// (default DefaultExpiryMargin).
	ExpiryMargin time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Token is an access token and its expiry.
type Token struct {
	// AccessToken is the compact JWS to send as a bearer token.
	AccessToken string
	// TokenType is "Bearer".
	TokenType string
	// Scope is the granted scope string, when the issuer returns one.
	Scope string
	// Expiry is when the token stops being valid, by the local clock.
	Expiry time.Time
}

// Error is a refusal from the token endpoint.
type Error struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the OAuth error code (for example "invalid_client"), or empty
	// when the body carried none.
	Code string
	// Body is the response body as received (at most MaximumResponseBytes).
	Body []byte
}

// Error names the status and the OAuth error code.
func (e *Error) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("tokensource: token endpoint answered %d %s", e.StatusCode, e.Code)
	}
	return fmt.Sprintf("tokensource: token endpoint answered %d", e.StatusCode)
}

// Source hands out a cached token, requesting a new one when needed. It is
// safe for concurrent use; concurrent callers share one request.
type Source struct {
	cfg    Config
	signer jose.Signer
	mu     sync.Mutex
	token  *Token
	// resolved is set once the audience and token URL are known.
	resolved bool
}

// New checks cfg and returns a Source.
func New(cfg Config) (*Source, error) {
	if cfg.TokenURL == "" && cfg.Issuer == "" {
		return nil, errors.New("tokensource: TokenURL or Issuer is required")
	}
	for name, v := range map[string]string{"TokenURL": cfg.TokenURL, "Issuer": cfg.Issuer} {
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("tokensource: %s %q must be an http or https URL with a host and no credentials, query or fragment", name, v)
		}
	}
	if cfg.ClientID == "" {
		return nil, errors.New("tokensource: ClientID is required")
	}
	if cfg.Key == nil || cfg.Key.IsPublic() {
		return nil, errors.New("tokensource: Key must be a private JWK")
	}
	alg := jose.SignatureAlgorithm(cfg.Key.Algorithm)
	if alg == "" {
		alg = algorithmFor(cfg.Key)
	}
	switch alg {
	case jose.ES256, jose.EdDSA, jose.RS256:
	default:
		return nil, fmt.Errorf("tokensource: key algorithm %q is not ES256, EdDSA or RS256", alg)
	}
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if cfg.Key.KeyID != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), cfg.Key.KeyID)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: cfg.Key.Key}, opts)
	if err != nil {
		return nil, fmt.Errorf("tokensource: key: %w", err)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.AssertionLifetime <= 0 {
		cfg.AssertionLifetime = DefaultAssertionLifetime
	}
	if cfg.ExpiryMargin <= 0 {
		cfg.ExpiryMargin = DefaultExpiryMargin
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Source{cfg: cfg, signer: s, resolved: cfg.Audience != "" && cfg.TokenURL != ""}, nil
}

func algorithmFor(k *jose.JSONWebKey) jose.SignatureAlgorithm {
	raw, _ := k.Public().MarshalJSON()
	var m struct{ Kty, Crv string }
	_ = json.Unmarshal(raw, &m)
	switch {
	case m.Kty == "EC" && m.Crv == "P-256":
		return jose.ES256
	case m.Kty == "OKP" && m.Crv == "Ed25519":
		return jose.EdDSA
	case m.Kty == "RSA":
		return jose.RS256
	}
	return ""
}

// LoadKeyFile reads a private JWK file, refusing a file readable by group or others.
func LoadKeyFile(path string) (*jose.JSONWebKey, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokensource: key file: %w", err)
	}
	if !st.Mode().IsRegular() || st.Size() > 64<<10 {
		return nil, fmt.Errorf("tokensource: key file %s must be a regular file of at most 64 KiB", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("tokensource: key file %s has mode %04o; it must be readable by its owner only", path, st.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokensource: key file: %w", err)
	}
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(raw); err != nil || k.IsPublic() {
		return nil, fmt.Errorf("tokensource: key file %s is not a private JWK", path)
	}
	return &k, nil
}

// Token returns a valid token, from the cache when it is not about to expire.
func (s *Source) Token(ctx context.Context) (*Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != nil && s.cfg.Now().Add(s.cfg.ExpiryMargin).Before(s.token.Expiry) {
		t := *s.token
		return &t, nil
	}
	if err := s.resolve(ctx); err != nil {
		return nil, err
	}
	t, err := s.fetch(ctx)
	if err != nil {
		return nil, err
	}
	s.token = t
	c := *t
	return &c, nil
}

// Refresh replaces a token a resource server refused although the cache
// still held it valid (its clock runs ahead of the issuer's, or the token
// was revoked): when the cached token is refused it is dropped and a new
// one fetched; when the cache already holds another token (a concurrent
// caller refreshed first), that one is returned without a request.
func (s *Source) Refresh(ctx context.Context, refused string) (*Token, error) {
	s.mu.Lock()
	if s.token != nil && s.token.AccessToken == refused {
		s.token = nil
	}
	s.mu.Unlock()
	return s.Token(ctx)
}

// Assertion returns a freshly signed client assertion (new jti each call),
// learning the audience by discovery first when it is not known yet.
func (s *Source) Assertion() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.resolve(context.Background()); err != nil {
		return "", err
	}
	return s.assertion()
}

// Audience returns the audience the source's assertions carry, learning it
// by discovery first when it is not known yet.
func (s *Source) Audience(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.resolve(ctx); err != nil {
		return "", err
	}
	return s.cfg.Audience, nil
}

func (s *Source) assertion() (string, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", fmt.Errorf("tokensource: random jti: %w", err)
	}
	now := s.cfg.Now()
	claims := map[string]any{
		"iss": s.cfg.ClientID,
		"sub": s.cfg.ClientID,
		"aud": s.cfg.Audience,
		"jti": base64.RawURLEncoding.EncodeToString(id[:]),
		"iat": now.Unix(),
		"exp": now.Add(s.cfg.AssertionLifetime).Unix(),
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("tokensource: encode assertion: %w", err)
	}
	jws, err := s.signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("tokensource: sign assertion: %w", err)
	}
	return jws.CompactSerialize()
}

func (s *Source) fetch(ctx context.Context) (*Token, error) {
	assertion, err := s.assertion()
	if err != nil {
		return nil, err
	}
	form := url.Values{
		"grant_type":            {"client_credentials"},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion":      {assertion},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("tokensource: build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	sent := s.cfg.Now()
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("tokensource: token request: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaximumResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("tokensource: read token response: %w", err)
	}
	if len(body) > MaximumResponseBytes {
		return nil, fmt.Errorf("tokensource: token response larger than %d bytes", MaximumResponseBytes)
	}
	if resp.StatusCode != http.StatusOK {
		e := &Error{StatusCode: resp.StatusCode, Body: body}
		var eb struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &eb) == nil {
			e.Code = eb.Error
		}
		return nil, e
	}
	var tr struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
		Scope       string `json:"scope"`
	}
	if err := json.Unmarshal(body, &tr); err != nil {
		return nil, fmt.Errorf("tokensource: token response is not JSON: %w", err)
	}
	if tr.AccessToken == "" || !strings.EqualFold(tr.TokenType, "bearer") || tr.ExpiresIn <= 0 {
		return nil, errors.New("tokensource: token response lacks access_token, a Bearer token_type or a positive expires_in")
	}
	return &Token{AccessToken: tr.AccessToken, TokenType: tr.TokenType, Scope: tr.Scope, Expiry: sent.Add(time.Duration(tr.ExpiresIn) * time.Second)}, nil
}
