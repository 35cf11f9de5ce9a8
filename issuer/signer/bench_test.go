package signer_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/issuer/signer"
	"github.com/registrum/registrum/issuer/signer/transittest"
)

// benchInput is the size of a typical access token's signing input.
var benchInput = make([]byte, 600)

// BenchmarkSign compares, in one run, the signers against the baseline of a
// bare crypto/ecdsa signature over the same input.
func BenchmarkSign(b *testing.B) {
	ctx := context.Background()
	privJWK, active := newP256(b)
	var priv jose.JSONWebKey
	if err := json.Unmarshal(privJWK, &priv); err != nil {
		b.Fatal(err)
	}
	raw := priv.Key.(*ecdsa.PrivateKey)

	b.Run("baseline-crypto-ecdsa", func(b *testing.B) {
		for b.Loop() {
			d := sha256.Sum256(benchInput)
			if _, _, err := ecdsa.Sign(rand.Reader, raw, d[:]); err != nil {
				b.Fatal(err)
			}
		}
	})
	local, err := signer.NewLocalJWK(privJWK, active)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("local-jwk", func(b *testing.B) {
		for b.Loop() {
			if _, err := local.Sign(ctx, benchInput); err != nil {
				b.Fatal(err)
			}
		}
	})
	srv := transittest.Start(b)
	tr, err := signer.NewTransit(signer.TransitConfig{
		UnixSocketPath: srv.SocketPath(), Mount: srv.Mount(), KeyName: srv.KeyName(),
		KeyVersion: 1, Timeout: 2 * time.Second, Active: srv.PublicJWK(1),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	b.Run("transit-unix-socket", func(b *testing.B) {
		for b.Loop() {
			if _, err := tr.Sign(ctx, benchInput); err != nil {
				b.Fatal(err)
			}
		}
	})
}
