package keys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	jose "github.com/go-jose/go-jose/v4"
)

// Limits on key material accepted by this package.
const (
	// MaxClientKeys is the most keys one client registration may carry.
	MaxClientKeys = 8
	// MinRSABits is the smallest RSA modulus accepted for RS256.
	MinRSABits = 2048
	// GeneratedRSABits is the modulus size [Generate] uses for RS256 keys.
	GeneratedRSABits = 3072
	// maxJWKFileBytes bounds a public JWK file read from disk.
	maxJWKFileBytes = 64 << 10
)

// The signature algorithms keys may be used with.
const (
	AlgES256 = "ES256"
	AlgEdDSA = "EdDSA"
	AlgRS256 = "RS256"
)

// Thumbprint returns the RFC 7638 JWK thumbprint of k: the unpadded base64url
// encoding of the SHA-256 digest of the key's required members. For a private
// key it is the thumbprint of its public half.
func Thumbprint(k *jose.JSONWebKey) (string, error) {
	if k == nil || k.Key == nil {
		return "", errors.New("keys: thumbprint: no key")
	}
	sum, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("keys: thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(sum), nil
}

// AlgorithmFor returns the one signature algorithm a key of this kind is
// accepted for: ES256 for EC P-256, EdDSA for Ed25519, RS256 for RSA of at
// least [MinRSABits]. Any other kind of key is refused. Private keys are judged
// by their public half.
func AlgorithmFor(k *jose.JSONWebKey) (string, error) {
	if k == nil {
		return "", errors.New("no key")
	}
	switch key := k.Key.(type) {
	case *ecdsa.PublicKey:
		return ecAlgorithm(key)
	case *ecdsa.PrivateKey:
		return ecAlgorithm(&key.PublicKey)
	case ed25519.PublicKey, ed25519.PrivateKey:
		return AlgEdDSA, nil
	case *rsa.PublicKey:
		return rsaAlgorithm(key)
	case *rsa.PrivateKey:
		return rsaAlgorithm(&key.PublicKey)
	default:
		return "", fmt.Errorf("key type %T is not accepted (want EC P-256, OKP Ed25519 or RSA)", k.Key)
	}
}

func ecAlgorithm(key *ecdsa.PublicKey) (string, error) {
	if key.Curve != elliptic.P256() {
		return "", fmt.Errorf("EC curve %s is not accepted (want P-256)", key.Curve.Params().Name)
	}
	return AlgES256, nil
}

func rsaAlgorithm(key *rsa.PublicKey) (string, error) {
	if bits := key.N.BitLen(); bits < MinRSABits {
		return "", fmt.Errorf("RSA modulus of %d bits is too small (want at least %d)", bits, MinRSABits)
	}
	return AlgRS256, nil
}

// parsePublic parses one public JWK strictly: a JSON object without duplicate
// members, without any private-key member, of an accepted kind, whose optional
// `alg` matches the kind and whose optional `use` is "sig".
func parsePublic(raw []byte) (*jose.JSONWebKey, error) {
	members, err := decodeObject(raw)
	if err != nil {
		return nil, err
	}
	if name := privateMemberIn(members); name != "" {
		return nil, fmt.Errorf("contains the private-key member %q; only public keys are accepted", name)
	}
	if _, ok := members["kty"]; !ok {
		return nil, errors.New("missing member \"kty\"")
	}
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("not a usable JWK: %w", err)
	}
	if !k.IsPublic() {
		return nil, errors.New("not a public key")
	}
	alg, err := AlgorithmFor(&k)
	if err != nil {
		return nil, err
	}
	if k.Algorithm != "" && k.Algorithm != alg {
		return nil, fmt.Errorf("member \"alg\" is %q but the key is for %s", k.Algorithm, alg)
	}
	if k.Use != "" && k.Use != "sig" {
		return nil, fmt.Errorf("member \"use\" is %q; want \"sig\"", k.Use)
	}
	return &k, nil
}

// LoadPublic reads a public JWK file. The file must be a regular file of at
// most 64 KiB holding one JSON object with no private-key member; the key must
// be of an accepted kind (see [AlgorithmFor]) and its `kid` must be present and
// equal to its RFC 7638 thumbprint.
func LoadPublic(path string) (*jose.JSONWebKey, error) {
	raw, err := readSmallRegular(path, maxJWKFileBytes)
	if err != nil {
		return nil, fmt.Errorf("keys: public JWK file %q: %w", path, err)
	}
	k, err := parsePublic(raw)
	if err != nil {
		return nil, fmt.Errorf("keys: public JWK file %q: %w", path, err)
	}
	tp, err := Thumbprint(k)
	if err != nil {
		return nil, fmt.Errorf("keys: public JWK file %q: %w", path, err)
	}
	if k.KeyID == "" {
		return nil, fmt.Errorf("keys: public JWK file %q: missing member \"kid\" (want the RFC 7638 thumbprint %q)", path, tp)
	}
	if k.KeyID != tp {
		return nil, fmt.Errorf("keys: public JWK file %q: kid %q is not the key's RFC 7638 thumbprint %q", path, k.KeyID, tp)
	}
	return k, nil
}

// LoadActiveP256 is [LoadPublic] for the issuer's own signing keys, which must
// be EC P-256 keys for ES256.
func LoadActiveP256(path string) (*jose.JSONWebKey, error) {
	k, err := LoadPublic(path)
	if err != nil {
		return nil, err
	}
	if _, ok := k.Key.(*ecdsa.PublicKey); !ok {
		return nil, fmt.Errorf("keys: public JWK file %q: the issuer's signing key must be EC P-256, not %T", path, k.Key)
	}
	return k, nil
}

// ParsePublicSet parses the public keys of one client registration. It
// refuses an empty list, more than [MaxClientKeys] keys, any key carrying a
// private-key member (d, p, q, dp, dq, qi, k, oth), any key that is not Ed25519
// (EdDSA), EC P-256 (ES256) or RSA of at least 2048 bits (RS256), an `alg`
// that does not match the key, and two keys sharing one non-empty `kid`.
// Errors name the offending entry as keys[i]. A missing `kid` is allowed.
func ParsePublicSet(raw []json.RawMessage) ([]jose.JSONWebKey, error) {
	if len(raw) == 0 {
		return nil, errors.New("keys: client keys: at least one public key is required")
	}
	if len(raw) > MaxClientKeys {
		return nil, fmt.Errorf("keys: client keys: %d keys given, at most %d are allowed", len(raw), MaxClientKeys)
	}
	out := make([]jose.JSONWebKey, 0, len(raw))
	kids := map[string]int{}
	for i, r := range raw {
		k, err := parsePublic(r)
		if err != nil {
			return nil, fmt.Errorf("keys: client keys: keys[%d]: %w", i, err)
		}
		if k.KeyID != "" {
			if j, dup := kids[k.KeyID]; dup {
				return nil, fmt.Errorf("keys: client keys: keys[%d]: kid %q is already used by keys[%d]", i, k.KeyID, j)
			}
			kids[k.KeyID] = i
		}
		out = append(out, *k)
	}
	return out, nil
}

// Generate creates a new signing key pair for alg ("ES256" → P-256, "EdDSA" →
// Ed25519, "RS256" → RSA of [GeneratedRSABits] bits). Both returned JWKs carry
// kid = RFC 7638 thumbprint, alg and use "sig"; public holds only the public key.
func Generate(alg string) (private, public *jose.JSONWebKey, err error) {
	var priv, pub any
	switch alg {
	case AlgES256:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("keys: generate %s: %w", alg, err)
		}
		priv, pub = k, &k.PublicKey
	case AlgEdDSA:
		p, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("keys: generate %s: %w", alg, err)
		}
		priv, pub = k, p
	case AlgRS256:
		k, err := rsa.GenerateKey(rand.Reader, GeneratedRSABits)
		if err != nil {
			return nil, nil, fmt.Errorf("keys: generate %s: %w", alg, err)
		}
		priv, pub = k, &k.PublicKey
	default:
		return nil, nil, fmt.Errorf("keys: generate: algorithm %q is not one of ES256, EdDSA, RS256", alg)
	}
	public = &jose.JSONWebKey{Key: pub, Algorithm: alg, Use: "sig"}
	kid, err := Thumbprint(public)
	if err != nil {
		return nil, nil, fmt.Errorf("keys: generate %s: %w", alg, err)
	}
	public.KeyID = kid
	private = &jose.JSONWebKey{Key: priv, KeyID: kid, Algorithm: alg, Use: "sig"}
	return private, public, nil
}

// readSmallRegular reads a regular file (symbolic links are followed) of at most limit bytes.
func readSmallRegular(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (mode %s)", info.Mode())
	}
	raw, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return raw, nil
}
