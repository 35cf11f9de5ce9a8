package signer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync/atomic"

	jose "github.com/go-jose/go-jose/v4"
)

// localJWK signs with a private P-256 key held in memory.
type localJWK struct {
	key    *ecdsa.PrivateKey
	pub    *ecdsa.PublicKey
	keyID  string
	closed atomic.Bool
}

// NewLocalJWK builds the local-jwk signer from the bytes of a private JWK
// (the resolved `privateKeyRef` secret). The key must be an EC P-256 private
// key whose public half equals the active public JWK; anything else is
// refused. Errors never include key bytes.
func NewLocalJWK(privateJWK []byte, active *jose.JSONWebKey) (Signer, error) {
	pub, err := activeP256(active)
	if err != nil {
		return nil, err
	}
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(privateJWK); err != nil {
		return nil, errors.New("signer: local-jwk: the private key secret is not a usable JWK")
	}
	priv, ok := k.Key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("signer: local-jwk: the private key secret must be an EC P-256 private key, not %s", keyKind(k.Key))
	}
	if priv.Curve != elliptic.P256() {
		return nil, fmt.Errorf("signer: local-jwk: the private key is on curve %s, want P-256", priv.Curve.Params().Name)
	}
	// The JWK decoder takes x and y as given; derive the public point from d so
	// a document whose d does not belong to its x/y is refused here.
	d, err := priv.Bytes()
	if err != nil {
		return nil, errors.New("signer: local-jwk: the private scalar d is not a valid P-256 key")
	}
	derived, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d)
	if err != nil {
		return nil, errors.New("signer: local-jwk: the private scalar d is not a valid P-256 key")
	}
	if !derived.PublicKey.Equal(&priv.PublicKey) {
		return nil, errors.New("signer: local-jwk: the private scalar d does not belong to the key's x and y")
	}
	priv = derived
	if !priv.PublicKey.Equal(pub) {
		return nil, fmt.Errorf("signer: local-jwk: the private key does not match the active public JWK %q", active.KeyID)
	}
	if k.Algorithm != "" && k.Algorithm != "ES256" {
		return nil, fmt.Errorf("signer: local-jwk: the private key has alg %q, want ES256", k.Algorithm)
	}
	return &localJWK{key: priv, pub: pub, keyID: active.KeyID}, nil
}

func keyKind(k any) string {
	switch k.(type) {
	case *ecdsa.PublicKey:
		return "an EC public key"
	case nil:
		return "no key"
	default:
		return fmt.Sprintf("%T", k)
	}
}

func (l *localJWK) KeyID() string { return l.keyID }

func (l *localJWK) Sign(ctx context.Context, signingInput []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("signer: local-jwk: %w", err)
	}
	if l.closed.Load() {
		return nil, errors.New("signer: local-jwk: signer is closed")
	}
	if err := checkInput(signingInput); err != nil {
		return nil, err
	}
	digest := sha256.Sum256(signingInput)
	r, s, err := ecdsa.Sign(rand.Reader, l.key, digest[:])
	if err != nil {
		return nil, fmt.Errorf("signer: local-jwk: sign: %w", err)
	}
	sig := make([]byte, SignatureSize)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	// No verification per signature: NewLocalJWK proved that the private
	// scalar yields the active public key, and SelfTest verifies a signature.
	return sig, nil
}

func (l *localJWK) SelfTest(ctx context.Context) error {
	sig, err := l.Sign(ctx, selfTestInput)
	if err != nil {
		return fmt.Errorf("signer: local-jwk self-test: %w", err)
	}
	if err := verifyP256(l.pub, selfTestInput, sig); err != nil {
		return fmt.Errorf("signer: local-jwk self-test: %w", err)
	}
	return nil
}

func (l *localJWK) Close() error {
	l.closed.Store(true)
	return nil
}
