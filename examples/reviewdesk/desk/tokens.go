package desk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Errors of token verification: a token that is not acceptable, and a key
// set that could not be fetched (the caller may try again later).
var (
	errUnauthenticated = errors.New("reviewdesk: the bearer token is not acceptable")
	errKeysUnavailable = errors.New("reviewdesk: the issuer's key set is unavailable")
)

// Bounds of token verification.
const (
	maximumTokenBytes = 8192
	maximumJWKSBytes  = 256 << 10
	clockLeeway       = 30 * time.Second
	// keyRefreshFloor is the least time between two fetches of the key set
	// that an unknown key id may cause.
	keyRefreshFloor = 10 * time.Second
)

// verifier checks the review protocol's bearer tokens: at+jwt access tokens
// of the configured issuer, signed by a key of its published key set
// (fetched again when a token names an unknown key, at most every ten
// seconds), unexpired, for the desk's audience, of an allowed client, with
// the required scope.
type verifier struct {
	cfg  Authentication
	http *http.Client
	now  func() time.Time

	mu      sync.Mutex
	keys    jose.JSONWebKeySet
	fetched time.Time
}

// caller is who a verified token names.
type caller struct {
	ClientID string
}

type accessClaims struct {
	jwt.Claims
	ClientID string `json:"client_id"`
	Scope    string `json:"scope"`
}

func newVerifier(cfg Authentication) *verifier {
	return &verifier{cfg: cfg, http: &http.Client{Timeout: 10 * time.Second}, now: time.Now}
}

// verify checks an Authorization header value.
func (v *verifier) verify(ctx context.Context, header string) (*caller, error) {
	raw, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || raw == "" || len(raw) > maximumTokenBytes {
		return nil, errUnauthenticated
	}
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.ES256, jose.EdDSA, jose.RS256})
	if err != nil || len(tok.Headers) != 1 {
		return nil, errUnauthenticated
	}
	h := tok.Headers[0]
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); !strings.EqualFold(typ, "at+jwt") || h.KeyID == "" || slices.Contains(v.cfg.RevokedKeyIDs, h.KeyID) {
		return nil, errUnauthenticated
	}
	key, err := v.key(ctx, h.KeyID)
	if err != nil {
		return nil, err
	}
	var c accessClaims
	if err := tok.Claims(key.Key, &c); err != nil {
		return nil, errUnauthenticated
	}
	if c.Expiry == nil || c.ValidateWithLeeway(jwt.Expected{Issuer: v.cfg.Issuer, AnyAudience: jwt.Audience{v.cfg.Audience}, Time: v.now()}, clockLeeway) != nil {
		return nil, errUnauthenticated
	}
	if !slices.Contains(v.cfg.Clients, c.ClientID) {
		return nil, errUnauthenticated
	}
	if v.cfg.RequiredScope != "" && !slices.Contains(strings.Fields(c.Scope), v.cfg.RequiredScope) {
		return nil, errUnauthenticated
	}
	return &caller{ClientID: c.ClientID}, nil
}

// key returns the signing key kid, fetching the key set when it is not
// known yet.
func (v *verifier) key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k := v.keys.Key(kid); len(k) == 1 {
		return &k[0], nil
	}
	if !v.fetched.IsZero() && v.now().Sub(v.fetched) < keyRefreshFloor {
		return nil, errUnauthenticated
	}
	set, err := v.fetch(ctx)
	if err != nil {
		return nil, err
	}
	v.keys, v.fetched = *set, v.now()
	if k := v.keys.Key(kid); len(k) == 1 && k[0].IsPublic() && k[0].Use != "enc" {
		return &k[0], nil
	}
	return nil, errUnauthenticated
}

func (v *verifier) fetch(ctx context.Context) (*jose.JSONWebKeySet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.JWKSURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errKeysUnavailable, err)
	}
	resp, err := v.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errKeysUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: answered %d", errKeysUnavailable, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maximumJWKSBytes+1))
	if err != nil || len(b) > maximumJWKSBytes {
		return nil, fmt.Errorf("%w: unreadable or larger than %d bytes", errKeysUnavailable, maximumJWKSBytes)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("%w: %v", errKeysUnavailable, err)
	}
	return &set, nil
}
