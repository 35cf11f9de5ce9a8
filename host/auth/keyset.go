package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
)

// Bounds of a key-set fetch.
const (
	// MaximumKeySetBytes bounds the key set response body.
	MaximumKeySetBytes = 64 << 10
	// MaximumKeys bounds the entries of a key set document (usable or not).
	MaximumKeys = 32
)

// jwk is the part of a JSON Web Key the verifier reads.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	// D present means a private key was published: refused.
	D string `json:"d"`
}

// fetchKeySet retrieves and parses the key set at url. Only P-256 EC keys
// with use "sig" (or no use), alg ES256 (or no alg) and a kid are kept; a
// document that is too large, not a key set, has more than MaximumKeys
// entries, repeats a kid, publishes private material, or holds no usable
// key is an error, and the caller keeps the set it holds.
func fetchKeySet(ctx context.Context, client *http.Client, url string) (map[string]*ecdsa.PublicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("auth: key set request: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("auth: key set fetch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, MaximumKeySetBytes))
		return nil, fmt.Errorf("auth: key set fetch: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaximumKeySetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("auth: key set read: %w", err)
	}
	if len(body) > MaximumKeySetBytes {
		return nil, fmt.Errorf("auth: key set larger than %d bytes", MaximumKeySetBytes)
	}
	return parseKeySet(body)
}

func parseKeySet(body []byte) (map[string]*ecdsa.PublicKey, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("auth: key set is not a JSON key set: %w", err)
	}
	if doc.Keys == nil {
		return nil, errors.New("auth: key set has no keys member")
	}
	if len(doc.Keys) > MaximumKeys {
		return nil, fmt.Errorf("auth: key set has %d keys, more than %d", len(doc.Keys), MaximumKeys)
	}
	keys := make(map[string]*ecdsa.PublicKey, len(doc.Keys))
	seen := make(map[string]bool, len(doc.Keys))
	for i, raw := range doc.Keys {
		var k jwk
		if err := json.Unmarshal(raw, &k); err != nil {
			return nil, fmt.Errorf("auth: key set keys[%d]: %w", i, err)
		}
		if k.D != "" {
			return nil, fmt.Errorf("auth: key set keys[%d] publishes private key material", i)
		}
		if k.Kid != "" {
			if seen[k.Kid] {
				return nil, fmt.Errorf("auth: key set keys[%d] repeats kid %q", i, k.Kid)
			}
			seen[k.Kid] = true
		}
		pub, ok := usableKey(&k)
		if !ok {
			continue
		}
		keys[k.Kid] = pub
	}
	if len(keys) == 0 {
		return nil, errors.New("auth: key set holds no usable P-256 signing key")
	}
	return keys, nil
}

// usableKey returns the public key of k when k is a P-256 EC signing key with
// a kid whose point lies on the curve.
func usableKey(k *jwk) (*ecdsa.PublicKey, bool) {
	if k.Kid == "" || k.Kty != "EC" || k.Crv != "P-256" || (k.Use != "" && k.Use != "sig") || (k.Alg != "" && k.Alg != "ES256") {
		return nil, false
	}
	x, okx := coordinate(k.X)
	y, oky := coordinate(k.Y)
	if !okx || !oky {
		return nil, false
	}
	var buf [65]byte
	buf[0] = 4
	x.FillBytes(buf[1:33])
	y.FillBytes(buf[33:])
	// ParseUncompressedPublicKey checks the point is on the curve.
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), buf[:])
	if err != nil {
		return nil, false
	}
	return pub, true
}

func coordinate(s string) (*big.Int, bool) {
	if len(s) != 43 || strings.ContainsAny(s, "=+/") {
		return nil, false
	}
	b, err := b64.DecodeString(s)
	if err != nil || len(b) != 32 {
		return nil, false
	}
	return new(big.Int).SetBytes(b), true
}
