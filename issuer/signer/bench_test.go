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

// BenchmarkSign compares the signers with the baseline of a bare
// crypto/ecdsa signature over the same input. Each iteration runs all three
// back to back, so the ratios hold even on a machine whose load changes during
// the run; the ratios are reported as custom metrics.
func BenchmarkSign(b *testing.B) {
	ctx := context.Background()
	privJWK, active := newP256(b)
	var priv jose.JSONWebKey
	if err := json.Unmarshal(privJWK, &priv); err != nil {
		b.Fatal(err)
	}
	raw := priv.Key.(*ecdsa.PrivateKey)
	local, err := signer.NewLocalJWK(privJWK, active)
	if err != nil {
		b.Fatal(err)
	}
	srv := transittest.Start(b)
	tr, err := signer.NewTransit(signer.TransitConfig{
		UnixSocketPath: srv.SocketPath(), Mount: srv.Mount(), KeyName: srv.KeyName(),
		KeyVersion: 1, Timeout: 2 * time.Second, Active: srv.PublicJWK(1),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()

	var base, loc, tra time.Duration
	for b.Loop() {
		t0 := time.Now()
		d := sha256.Sum256(benchInput)
		if _, _, err := ecdsa.Sign(rand.Reader, raw, d[:]); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := local.Sign(ctx, benchInput); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, err := tr.Sign(ctx, benchInput); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		base, loc, tra = base+t1.Sub(t0), loc+t2.Sub(t1), tra+t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(base.Nanoseconds())/n, "baseline-ns/sign")
	b.ReportMetric(float64(loc.Nanoseconds())/n, "local-jwk-ns/sign")
	b.ReportMetric(float64(tra.Nanoseconds())/n, "transit-ns/sign")
	b.ReportMetric(float64(loc)/float64(base), "local/baseline")
	b.ReportMetric(float64(tra)/float64(base), "transit/baseline")
}
