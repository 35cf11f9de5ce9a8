package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/host/config"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_900_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// signingKey is a test ES256 key with its kid.
type signingKey struct {
	kid  string
	priv *ecdsa.PrivateKey
}

func newKey(t testing.TB, kid string) *signingKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &signingKey{kid: kid, priv: priv}
}

// jwk returns the key's public JWK as the issuer publishes it.
func (k *signingKey) jwk() map[string]any {
	return map[string]any{
		"kty": "EC", "crv": "P-256", "kid": k.kid, "use": "sig", "alg": "ES256",
		"x": b64.EncodeToString(k.priv.X.FillBytes(make([]byte, 32))),
		"y": b64.EncodeToString(k.priv.Y.FillBytes(make([]byte, 32))),
	}
}

// sign writes a compact JWS with the given typ over claims.
func (k *signingKey) sign(t testing.TB, typ string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithHeader(jose.HeaderKey("kid"), k.kid)
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.priv}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// keyServer serves a key set that tests change, counting fetches.
type keyServer struct {
	*httptest.Server
	mu     sync.Mutex
	body   []byte
	status int
	hits   atomic.Int64
}

func newKeyServer(t testing.TB, keys ...*signingKey) *keyServer {
	ks := &keyServer{status: http.StatusOK}
	ks.setKeys(keys...)
	ks.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ks.hits.Add(1)
		ks.mu.Lock()
		body, status := ks.body, ks.status
		ks.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(ks.Close)
	return ks
}

func (ks *keyServer) setKeys(keys ...*signingKey) {
	list := []any{}
	for _, k := range keys {
		list = append(list, k.jwk())
	}
	body, _ := json.Marshal(map[string]any{"keys": list})
	ks.setBody(http.StatusOK, body)
}

func (ks *keyServer) setBody(status int, body []byte) {
	ks.mu.Lock()
	ks.status, ks.body = status, body
	ks.mu.Unlock()
}

const (
	testIssuer   = "https://issuer.test"
	testAudience = "urn:registrum:test"
)

func intp(v int) *int { return &v }

// settings returns validated-shape authentication settings for url.
func settings(url string) *config.Authentication {
	return &config.Authentication{
		Issuer: testIssuer, JWKSURL: url, Audience: testAudience, Algorithm: "ES256",
		ScopeClaim: "scope", ScopeSeparator: " ",
		AuthorityClaims:        config.AuthorityClaims{Principal: "sub", Purpose: "purpose"},
		ClockSkewSeconds:       intp(30),
		KeySetRefreshSeconds:   intp(300),
		KeySetAllowanceSeconds: intp(3600),
	}
}

// claimsAt returns a valid claim set issued at now.
func claimsAt(now time.Time) map[string]any {
	return map[string]any{
		"iss": testIssuer, "aud": testAudience, "iat": now.Unix(), "nbf": now.Unix(),
		"exp": now.Add(10 * time.Minute).Unix(), "jti": "tok-1", "client_id": "c1",
		"sub": "service:c1", "scope": "records:read records:write", "purpose": "audit",
	}
}

func with(m map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}
