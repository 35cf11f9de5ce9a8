// Package signer produces the ES256 signatures of the token issuer's access
// tokens, through one of two providers:
//
//   - local-jwk ([NewLocalJWK]): a private P-256 JWK read from a file secret,
//     permitted only in supervised local development;
//   - transit ([NewTransit]): a HashiCorp Vault or OpenBao Transit key reached
//     over a unix socket of a workload-local proxy, so the private key never
//     leaves the provider.
//
// Both are bound to the configured active public JWK: a signer refuses to be
// built (local-jwk) or to pass [Signer.SelfTest] (transit) unless its key is
// exactly that key, and every signature is checked against it before it is
// returned. A [Signer] is safe for concurrent use.
package signer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"

	jose "github.com/go-jose/go-jose/v4"
)

// Signer signs JWS signing inputs with the issuer's active key.
type Signer interface {
	// KeyID returns the RFC 7638 thumbprint of the active key; it is the `kid`
	// of every token this signer signs.
	KeyID() string
	// Sign returns the ES256 JWS signature (64 bytes, R||S) of signingInput,
	// which is "base64url(header).base64url(payload)". A signature that comes
	// back from a remote provider is verified against the active public key
	// before it is returned; a local key is proven to be the active key when
	// the signer is built.
	Sign(ctx context.Context, signingInput []byte) ([]byte, error)
	// SelfTest checks that the provider holds the active key under the
	// required custody controls and that a test signature verifies.
	SelfTest(ctx context.Context) error
	// Close releases the signer's resources.
	Close() error
}

// SignatureSize is the size of an ES256 JWS signature: R and S, 32 bytes each.
const SignatureSize = 64

// MaxSigningInput bounds the signing input a signer accepts.
const MaxSigningInput = 1 << 20

// selfTestInput is the fixed input SelfTest signs.
var selfTestInput = []byte("registrum-issuer-signer-self-test.v1")

// ErrSignatureInvalid reports a signature that does not verify against the
// active public key.
var ErrSignatureInvalid = errors.New("signer: signature does not verify against the active public key")

// activeP256 returns the P-256 public key of the active JWK.
func activeP256(active *jose.JSONWebKey) (*ecdsa.PublicKey, error) {
	if active == nil {
		return nil, errors.New("signer: no active public JWK")
	}
	pub, ok := active.Key.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, fmt.Errorf("signer: the active public JWK must be an EC P-256 public key, not %T", active.Key)
	}
	if active.KeyID == "" {
		return nil, errors.New("signer: the active public JWK has no kid")
	}
	return pub, nil
}

// Verify checks an ES256 JWS signature (64 bytes, R||S) of signingInput
// against the P-256 public key of active. It returns [ErrSignatureInvalid]
// when the signature does not verify.
func Verify(active *jose.JSONWebKey, signingInput, signature []byte) error {
	pub, err := activeP256(active)
	if err != nil {
		return err
	}
	return verifyP256(pub, signingInput, signature)
}

func verifyP256(pub *ecdsa.PublicKey, signingInput, signature []byte) error {
	if len(signature) != SignatureSize {
		return fmt.Errorf("%w: %d bytes, want %d", ErrSignatureInvalid, len(signature), SignatureSize)
	}
	digest := sha256.Sum256(signingInput)
	r := new(big.Int).SetBytes(signature[:32])
	s := new(big.Int).SetBytes(signature[32:])
	if !ecdsa.Verify(pub, digest[:], r, s) {
		return ErrSignatureInvalid
	}
	return nil
}

func checkInput(signingInput []byte) error {
	if len(signingInput) == 0 {
		return errors.New("signer: empty signing input")
	}
	if len(signingInput) > MaxSigningInput {
		return fmt.Errorf("signer: signing input of %d bytes exceeds %d", len(signingInput), MaxSigningInput)
	}
	return nil
}
