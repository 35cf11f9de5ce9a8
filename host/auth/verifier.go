// Package auth verifies the bearer access tokens the record host receives:
// ES256 at+jwt tokens written by the configured token issuer, checked
// against the issuer's published key set.
//
// A Verifier fetches the key set (bounded in size, time and number of
// keys), caches the parsed keys, refetches when a token names an unknown
// key id (at most once per MinimumFetchInterval however many tokens
// arrive), refreshes it every keySetRefreshSeconds (in the background after
// Start, or on the next Verify otherwise), and stops using a held set once
// keySetAllowanceSeconds have passed since its last successful fetch. With
// no key set ever retrieved every token is refused.
//
// Every refusal is a *RefusedError naming a Reason category only; the
// record host answers it with 401 authentication.refused and no detail.
package auth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/host/config"
)

var b64 = base64.RawURLEncoding

// Defaults and bounds of verification.
const (
	// MaximumTokenBytes bounds the compact token a Verify call parses.
	MaximumTokenBytes = 8192
	// MaximumLifetime is the verifier's ceiling on a token's lifetime
	// (exp minus iat, or minus the verification time when iat is absent).
	MaximumLifetime = 15 * time.Minute
	// DefaultMinimumFetchInterval is the least time between two key-set
	// fetches started by Verify (unknown kid, stale or missing set).
	DefaultMinimumFetchInterval = 5 * time.Second
	// DefaultFetchTimeout bounds one key-set fetch.
	DefaultFetchTimeout = 5 * time.Second
	// retryInterval is how soon the background loop retries a failed fetch.
	retryInterval = 10 * time.Second
)

// Option adjusts a Verifier.
type Option func(*Verifier)

// WithClock sets the clock used for token times, refresh and allowance.
func WithClock(now func() time.Time) Option { return func(v *Verifier) { v.now = now } }

// WithLogger sets the logger that records refusal categories and key-set
// fetch outcomes (never a token).
func WithLogger(l *slog.Logger) Option { return func(v *Verifier) { v.log = l } }

// WithMinimumFetchInterval sets the least time between two fetches that
// Verify starts.
func WithMinimumFetchInterval(d time.Duration) Option {
	return func(v *Verifier) { v.minFetch = d }
}

// WithFetchTimeout bounds one key-set fetch.
func WithFetchTimeout(d time.Duration) Option { return func(v *Verifier) { v.fetchTimeout = d } }

// Claims are the verified claims of a token.
type Claims struct {
	// Scopes are the members of the scope claim, split on the separator.
	Scopes []string
	// Principal is the string value of the configured principal claim, "" when absent.
	Principal string
	// Purpose is the string value of the configured purpose claim, "" when absent.
	Purpose string
	// Evidence is the authority of an Evidence-profile token (its requester
	// tags are then also its Scopes); nil for other tokens or when the
	// evidence claim names are not configured.
	Evidence *Evidence
	// TokenID is jti.
	TokenID string
	// Expiry is exp.
	Expiry time.Time
	// Raw holds every claim as decoded JSON; numbers are json.Number.
	Raw map[string]any
}

// HasScope reports whether the token carries the scope.
func (c *Claims) HasScope(s string) bool {
	for _, have := range c.Scopes {
		if have == s {
			return true
		}
	}
	return false
}

// Claim returns the claim with the given name: a top-level member of that
// exact name, or else the member reached by reading the name's dots as a
// path through nested objects ("subject.id").
func (c *Claims) Claim(name string) (any, bool) {
	if v, ok := c.Raw[name]; ok {
		return v, true
	}
	if !strings.Contains(name, ".") {
		return nil, false
	}
	var cur any = c.Raw
	for _, seg := range strings.Split(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// Verifier verifies access tokens for one deployment. It is safe for
// concurrent use.
type Verifier struct {
	issuer, audience, jwksURL string
	scopeClaim, scopeSep      string
	principalClaim            string
	purposeClaim              string
	evidence                  *evidenceNames // nil when not configured
	revoked                   map[string]bool
	skew, refresh, allowance  time.Duration

	client       *http.Client
	now          func() time.Time
	log          *slog.Logger
	minFetch     time.Duration
	fetchTimeout time.Duration

	mu        sync.RWMutex
	keys      map[string]*ecdsa.PublicKey
	fetchedAt time.Time // last successful fetch; zero when none ever succeeded

	fetchMu     sync.Mutex // serializes fetches
	lastAttempt time.Time  // guarded by fetchMu

	verified verifiedCache

	runMu   sync.Mutex
	cancel  context.CancelFunc
	stopped chan struct{}
	running atomic.Bool // the background loop refreshes the set
}

// NewVerifier returns a verifier for the validated authentication settings.
// client sends the key-set requests (nil: a client with the fetch timeout).
// No key set is fetched until Start or the first Verify.
func NewVerifier(cfg *config.Authentication, client *http.Client, opts ...Option) (*Verifier, error) {
	if cfg == nil {
		return nil, errors.New("auth: no authentication settings")
	}
	if cfg.Issuer == "" || cfg.Audience == "" || cfg.JWKSURL == "" || cfg.ScopeClaim == "" || cfg.ScopeSeparator == "" {
		return nil, errors.New("auth: authentication settings need issuer, jwksUrl, audience, scopeClaim and scopeSeparator")
	}
	if cfg.Algorithm != "" && cfg.Algorithm != string(jose.ES256) {
		return nil, fmt.Errorf("auth: algorithm %q is not supported; only ES256", cfg.Algorithm)
	}
	if cfg.ClockSkewSeconds == nil || cfg.KeySetRefreshSeconds == nil || cfg.KeySetAllowanceSeconds == nil {
		return nil, errors.New("auth: authentication settings are not validated (skew, refresh and allowance unset)")
	}
	v := &Verifier{
		issuer: cfg.Issuer, audience: cfg.Audience, jwksURL: cfg.JWKSURL,
		scopeClaim: cfg.ScopeClaim, scopeSep: cfg.ScopeSeparator,
		principalClaim: cfg.AuthorityClaims.Principal, purposeClaim: cfg.AuthorityClaims.Purpose,
		evidence: newEvidenceNames(cfg.AuthorityClaims),
		revoked:  map[string]bool{},
		skew:     cfg.ClockSkew(), refresh: cfg.KeySetRefresh(), allowance: cfg.KeySetAllowance(),
		client: client, now: time.Now, log: slog.New(slog.DiscardHandler),
		minFetch: DefaultMinimumFetchInterval, fetchTimeout: DefaultFetchTimeout,
	}
	if v.principalClaim == "" {
		v.principalClaim = "sub"
	}
	for _, kid := range cfg.RevokedKeyIDs {
		v.revoked[kid] = true
	}
	for _, o := range opts {
		o(v)
	}
	if v.client == nil {
		v.client = &http.Client{Timeout: v.fetchTimeout}
	}
	return v, nil
}

// PurposeClaim returns the configured purpose claim name, "" when none.
func (v *Verifier) PurposeClaim() string { return v.purposeClaim }

// Start fetches the key set once (a failure is logged, not returned: tokens
// are refused until a fetch succeeds) and then refreshes it in the
// background every keySetRefreshSeconds, retrying a failed fetch sooner,
// until ctx ends or Close is called. Start may be called once.
func (v *Verifier) Start(ctx context.Context) error {
	v.runMu.Lock()
	defer v.runMu.Unlock()
	if v.stopped != nil {
		return errors.New("auth: verifier already started")
	}
	ctx, cancel := context.WithCancel(ctx)
	v.cancel, v.stopped = cancel, make(chan struct{})
	ok := v.fetch(ctx, true, true) == nil
	v.running.Store(true)
	go v.loop(ctx, ok)
	return nil
}

func (v *Verifier) loop(ctx context.Context, lastOK bool) {
	defer close(v.stopped)
	defer v.running.Store(false)
	for {
		wait := v.refresh
		if !lastOK {
			wait = min(v.refresh, retryInterval)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		lastOK = v.fetch(ctx, true, true) == nil
	}
}

// Close stops the background refresh and waits for it to end. It is safe to
// call without Start and more than once.
func (v *Verifier) Close() {
	v.runMu.Lock()
	cancel, stopped := v.cancel, v.stopped
	v.runMu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-stopped
}

// errRateLimited is returned by fetch when a fetch happened too recently or,
// for a caller that does not wait, is in flight.
var errRateLimited = errors.New("auth: key set fetched too recently")

// fetch retrieves the key set and installs it; ctx ending stops it. Unless forced, it does
// nothing when the previous attempt started less than minFetch ago. A
// caller that does not wait returns at once when a fetch is in flight.
func (v *Verifier) fetch(ctx context.Context, forced, wait bool) error {
	if wait {
		v.fetchMu.Lock()
	} else if !v.fetchMu.TryLock() {
		return errRateLimited
	}
	defer v.fetchMu.Unlock()
	now := v.now()
	if !forced && !v.lastAttempt.IsZero() && now.Sub(v.lastAttempt) < v.minFetch {
		return errRateLimited
	}
	v.lastAttempt = now
	fctx, cancel := context.WithTimeout(ctx, v.fetchTimeout)
	defer cancel()
	keys, err := fetchKeySet(fctx, v.client, v.jwksURL)
	if err != nil {
		v.log.Warn("auth: key set fetch failed; the held key set is kept until its allowance ends", "error", err)
		return err
	}
	v.mu.Lock()
	v.keys, v.fetchedAt = keys, v.now()
	v.mu.Unlock()
	v.log.Debug("auth: key set fetched", "keys", len(keys))
	return nil
}

// key returns the usable key for kid, whether it was found, and whether a
// usable set is held at all; stale reports a set due for refresh.
func (v *Verifier) key(kid string) (k *ecdsa.PublicKey, held, stale bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.keys == nil {
		return nil, false, true
	}
	age := v.now().Sub(v.fetchedAt)
	if age > v.allowance {
		return nil, false, true
	}
	return v.keys[kid], true, age >= v.refresh
}

// Verify checks token and returns its claims, or a *RefusedError.
func (v *Verifier) Verify(ctx context.Context, token string) (*Claims, error) {
	c, err := v.verify(ctx, token)
	if err != nil {
		if re, ok := IsRefused(err); ok {
			v.log.Info("auth: token refused", "reason", string(re.Reason))
		}
		return nil, err
	}
	return c, nil
}

var allowedAlgorithms = []jose.SignatureAlgorithm{jose.ES256}

func (v *Verifier) verify(ctx context.Context, token string) (*Claims, error) {
	if len(token) == 0 || len(token) > MaximumTokenBytes || strings.Count(token, ".") != 2 {
		return nil, refuse(ReasonMalformed, "not a compact JWS of at most %d bytes", MaximumTokenBytes)
	}
	if c, ok := v.cached(token); ok {
		return c, nil
	}
	alg, err := headerAlgorithm(token)
	if err != nil {
		return nil, err
	}
	if alg != string(jose.ES256) {
		return nil, refuse(ReasonHeader, "algorithm is not ES256")
	}
	jws, err := jose.ParseSignedCompact(token, allowedAlgorithms)
	if err != nil {
		return nil, refuse(ReasonMalformed, "unparseable JWS")
	}
	h := jws.Signatures[0].Protected
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); !strings.EqualFold(typ, "at+jwt") && !strings.EqualFold(typ, "application/at+jwt") {
		return nil, refuse(ReasonHeader, "typ is not at+jwt")
	}
	if h.KeyID == "" {
		return nil, refuse(ReasonHeader, "no kid")
	}
	// The denylist comes before any cached key is chosen.
	if v.revoked[h.KeyID] {
		return nil, refuse(ReasonKeyRevoked, "kid is revoked")
	}
	key, held, stale := v.key(h.KeyID)
	switch {
	case key == nil:
		// Unknown kid or no set: wait for a fetch (at most one per minFetch),
		// then read again whatever the outcome: another call may have fetched.
		// The fetch is shared: a caller going away does not cancel it.
		_ = v.fetch(context.WithoutCancel(ctx), false, true)
		key, held, _ = v.key(h.KeyID)
	case stale && !v.running.Load():
		// Lazy refresh of a usable set: never wait behind a fetch in flight.
		_ = v.fetch(context.WithoutCancel(ctx), false, false)
		key, held, _ = v.key(h.KeyID)
	}
	if !held {
		return nil, refuse(ReasonNoKeySet, "no key set within its allowance")
	}
	if key == nil {
		return nil, refuse(ReasonKeyUnknown, "kid not in the key set")
	}
	payload, err := jws.Verify(key)
	if err != nil {
		return nil, refuse(ReasonSignature, "signature does not verify")
	}
	c, err := v.claims(payload)
	if err != nil {
		return nil, err
	}
	vt := &verifiedToken{kid: h.KeyID, key: key, claims: c, expires: c.Expiry}
	for _, name := range []string{"nbf", "iat"} {
		if t, ok := numericDate(c.Raw[name]); ok && t.After(vt.notBefore) {
			vt.notBefore = t
		}
	}
	v.verified.add(token, vt)
	return c, nil
}

// headerAlgorithm reads alg from the protected header so that a refused
// algorithm (none, HS256, RS256, …) is told apart from a malformed token.
func headerAlgorithm(token string) (string, error) {
	enc, _, _ := strings.Cut(token, ".")
	raw, err := b64.DecodeString(enc)
	if err != nil {
		return "", refuse(ReasonMalformed, "header is not base64url")
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return "", refuse(ReasonMalformed, "header is not a JSON object")
	}
	return h.Alg, nil
}

func (v *Verifier) claims(payload []byte) (*Claims, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil || raw == nil || dec.More() {
		return nil, refuse(ReasonMalformed, "claims are not a JSON object")
	}
	if iss, _ := raw["iss"].(string); iss != v.issuer {
		return nil, refuse(ReasonIssuer, "iss is not the configured issuer")
	}
	if !v.audienceOK(raw["aud"]) {
		return nil, refuse(ReasonAudience, "aud is not this deployment's audience")
	}
	now := v.now()
	exp, ok := numericDate(raw["exp"])
	if !ok {
		return nil, refuse(ReasonClaims, "exp is missing or not a number")
	}
	if !now.Before(exp.Add(v.skew)) {
		return nil, refuse(ReasonExpired, "exp has passed")
	}
	start := now
	for _, name := range []string{"nbf", "iat"} {
		val, present := raw[name]
		if !present {
			continue
		}
		t, ok := numericDate(val)
		if !ok {
			return nil, refuse(ReasonClaims, "%s is not a number", name)
		}
		if t.After(now.Add(v.skew)) {
			return nil, refuse(ReasonNotYetValid, "%s lies in the future", name)
		}
		if name == "iat" {
			start = t
		}
	}
	if exp.Sub(start) > MaximumLifetime {
		return nil, refuse(ReasonLifetime, "token lives longer than %s", MaximumLifetime)
	}
	jti, _ := raw["jti"].(string)
	if jti == "" {
		return nil, refuse(ReasonClaims, "jti is missing")
	}
	c := &Claims{TokenID: jti, Expiry: exp, Raw: raw}
	if v.evidence != nil {
		ev, err := v.evidence.read(raw, v.scopeClaim)
		if err != nil {
			return nil, err
		}
		if ev != nil {
			c.Evidence, c.Scopes = ev, ev.RequesterTags
		}
	}
	if s, present := raw[v.scopeClaim]; present {
		str, ok := s.(string)
		if !ok {
			return nil, refuse(ReasonClaims, "the scope claim is not a string")
		}
		for _, sc := range strings.Split(str, v.scopeSep) {
			if sc != "" {
				c.Scopes = append(c.Scopes, sc)
			}
		}
	}
	if p, ok := c.Claim(v.principalClaim); ok {
		c.Principal, _ = p.(string)
	}
	if v.purposeClaim != "" {
		if p, ok := c.Claim(v.purposeClaim); ok {
			c.Purpose, _ = p.(string)
		}
	}
	return c, nil
}

// audienceOK accepts aud equal to the audience, or a one-member array of it.
func (v *Verifier) audienceOK(aud any) bool {
	switch a := aud.(type) {
	case string:
		return a == v.audience
	case []any:
		if len(a) != 1 {
			return false
		}
		s, _ := a[0].(string)
		return s == v.audience
	}
	return false
}

// numericDate reads a JSON number of seconds since the epoch.
func numericDate(v any) (time.Time, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, false
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || f < 0 || f > 1e11 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}
