// Package authtest provides test doubles of a token issuer for packages that
// verify access tokens: ES256 signing keys that mint compact tokens with any
// header type and claims, and an HTTP server publishing a key set that a
// test can change and whose fetches it can count.
package authtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// Key is an ES256 signing key and the kid tokens name it by.
type Key struct {
	KID     string
	Private *ecdsa.PrivateKey
}

// NewKey generates a P-256 key named kid; it fails the test on error.
func NewKey(t testing.TB, kid string) *Key {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{KID: kid, Private: priv}
}

// Renamed returns the same key under another kid.
func (k *Key) Renamed(kid string) *Key { return &Key{KID: kid, Private: k.Private} }

// PublicJWK returns the public key as an issuer publishes it in its key set.
func (k *Key) PublicJWK() map[string]any {
	enc := base64.RawURLEncoding
	return map[string]any{
		"kty": "EC", "crv": "P-256", "kid": k.KID, "use": "sig", "alg": "ES256",
		"x": enc.EncodeToString(k.Private.X.FillBytes(make([]byte, 32))),
		"y": enc.EncodeToString(k.Private.Y.FillBytes(make([]byte, 32))),
	}
}

// Sign returns a compact ES256 JWS over claims with header typ (omitted
// when "") and the key's kid (omitted when ""). It fails the test on error.
func (k *Key) Sign(t testing.TB, typ string, claims map[string]any) string {
	t.Helper()
	opts := &jose.SignerOptions{}
	if k.KID != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), k.KID)
	}
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.Private}, opts)
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

// KeyServer publishes a key set over real HTTP and counts its fetches.
type KeyServer struct {
	*httptest.Server
	mu     sync.Mutex
	body   []byte
	status int
	hits   atomic.Int64
}

// NewKeyServer serves a key set of keys until the test ends.
func NewKeyServer(t testing.TB, keys ...*Key) *KeyServer {
	t.Helper()
	ks := &KeyServer{}
	ks.SetKeys(keys...)
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

// SetKeys publishes keys from now on.
func (ks *KeyServer) SetKeys(keys ...*Key) {
	list := []any{}
	for _, k := range keys {
		list = append(list, k.PublicJWK())
	}
	body, _ := json.Marshal(map[string]any{"keys": list})
	ks.SetBody(http.StatusOK, body)
}

// SetBody answers every fetch with status and body from now on.
func (ks *KeyServer) SetBody(status int, body []byte) {
	ks.mu.Lock()
	ks.status, ks.body = status, body
	ks.mu.Unlock()
}

// Hits returns how many fetches the server answered.
func (ks *KeyServer) Hits() int64 { return ks.hits.Load() }
