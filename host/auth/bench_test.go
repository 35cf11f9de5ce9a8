package auth

import (
	"context"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// BenchmarkVerify compares Verify (header checks, cached key lookup,
// signature, claim decoding and checks) with the baseline of a bare go-jose
// ES256 parse and signature verification of the same token. Each iteration
// runs both back to back so the ratio holds on a machine whose load moves;
// the ratio is reported as a custom metric.
func BenchmarkVerify(b *testing.B) {
	clk := newClock()
	k := newKey(b, "k1")
	ks := newKeyServer(b, k)
	v, err := NewVerifier(settings(ks.URL), nil, WithClock(clk.Now))
	if err != nil {
		b.Fatal(err)
	}
	tok := k.Sign(b, "at+jwt", claimsAt(clk.Now()))
	ctx := context.Background()
	if _, err := v.Verify(ctx, tok); err != nil { // fetches and caches the key set
		b.Fatal(err)
	}
	pub := &k.Private.PublicKey
	var base, full time.Duration
	for b.Loop() {
		t0 := time.Now()
		jws, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{jose.ES256})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := jws.Verify(pub); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		base, full = base+t1.Sub(t0), full+t2.Sub(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(base.Nanoseconds())/n, "baseline-ns/verify")
	b.ReportMetric(float64(full.Nanoseconds())/n, "Verify-ns/verify")
	b.ReportMetric(float64(full)/float64(base), "Verify/baseline")
	if ks.Hits() != 1 {
		b.Fatalf("Verify fetched the key set %d times; the key must stay cached", ks.Hits())
	}
}
