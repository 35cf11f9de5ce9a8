package auth

import (
	"context"
	"strings"
	"testing"
)

// FuzzVerify feeds arbitrary tokens to a verifier holding a key set: it
// must never panic, and everything it does not accept is a RefusedError.
func FuzzVerify(f *testing.F) {
	clk := newClock()
	k := newKey(f, "k1")
	ks := newKeyServer(f, k)
	v, err := NewVerifier(settings(ks.URL), nil, WithClock(clk.Now))
	if err != nil {
		f.Fatal(err)
	}
	good := k.Sign(f, "at+jwt", claimsAt(clk.Now()))
	if _, err := v.Verify(context.Background(), good); err != nil {
		f.Fatal(err)
	}
	parts := strings.Split(good, ".")
	for _, seed := range []string{good, "", "..", "a.b.c", parts[0] + ".." + parts[2], parts[0] + "." + parts[1] + ".", "e30.e30.", good + good} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := v.Verify(context.Background(), tok)
		if err != nil {
			if _, ok := IsRefused(err); !ok {
				t.Fatalf("error that is not a refusal: %v", err)
			}
			return
		}
		if c == nil || c.TokenID == "" {
			t.Fatal("accepted without claims")
		}
	})
}
