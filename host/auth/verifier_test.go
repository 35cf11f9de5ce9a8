package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/testslack"
)

// rawToken builds a compact token with any header and a given signature.
func rawToken(header, claims map[string]any, sign func(input string) []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	input := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	return input + "." + b64.EncodeToString(sign(input))
}

func TestVerifyAcceptsAndRefusesEachCheck(t *testing.T) {
	clk := newClock()
	k1, other := newKey(t, "k1"), newKey(t, "k1")
	revoked := newKey(t, "old")
	ks := newKeyServer(t, k1, revoked)
	cfg := settings(ks.URL)
	cfg.RevokedKeyIDs = []string{"old"}
	v, err := NewVerifier(cfg, nil, WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	base := claimsAt(now)
	es256 := func(typ string, c map[string]any) func() string {
		return func() string { return k1.Sign(t, typ, c) }
	}
	hs256 := func(input string) []byte {
		m := hmac.New(sha256.New, []byte(fmt.Sprint(k1.PublicJWK()["x"])))
		m.Write([]byte(input))
		return m.Sum(nil)
	}
	cases := []struct {
		name  string
		token func() string
		want  Reason // "" accepts
	}{
		{"issued token", es256("at+jwt", base), ""},
		{"typ application/at+jwt", es256("application/at+jwt", base), ""},
		{"typ JWT", es256("JWT", base), ReasonHeader},
		{"typ missing", es256("", base), ReasonHeader},
		{"alg none", func() string {
			return rawToken(map[string]any{"alg": "none", "typ": "at+jwt", "kid": "k1"}, base, func(string) []byte { return nil })
		}, ReasonHeader},
		{"alg HS256 keyed with the public key", func() string {
			return rawToken(map[string]any{"alg": "HS256", "typ": "at+jwt", "kid": "k1"}, base, hs256)
		}, ReasonHeader},
		{"alg RS256", func() string {
			return rawToken(map[string]any{"alg": "RS256", "typ": "at+jwt", "kid": "k1"}, base, func(string) []byte { return make([]byte, 256) })
		}, ReasonHeader},
		{"no kid", func() string {
			return k1.Renamed("").Sign(t, "at+jwt", base)
		}, ReasonHeader},
		{"revoked kid although cached", func() string { return revoked.Sign(t, "at+jwt", base) }, ReasonKeyRevoked},
		{"unknown kid", func() string { return newKey(t, "k9").Sign(t, "at+jwt", base) }, ReasonKeyUnknown},
		{"bad signature under a known kid", func() string { return other.Sign(t, "at+jwt", base) }, ReasonSignature},
		{"tampered claims", func() string {
			parts := strings.Split(k1.Sign(t, "at+jwt", base), ".")
			c, _ := json.Marshal(with(base, "scope", "records:admin"))
			return parts[0] + "." + b64.EncodeToString(c) + "." + parts[2]
		}, ReasonSignature},
		{"wrong issuer", es256("at+jwt", with(base, "iss", "https://other.test")), ReasonIssuer},
		{"missing issuer", es256("at+jwt", with(base, "iss", nil)), ReasonIssuer},
		{"wrong audience", es256("at+jwt", with(base, "aud", "urn:other")), ReasonAudience},
		{"missing audience", es256("at+jwt", with(base, "aud", nil)), ReasonAudience},
		{"audience as a one-member array", es256("at+jwt", with(base, "aud", []string{testAudience})), ""},
		{"audience among several", es256("at+jwt", with(base, "aud", []string{testAudience, "urn:other"})), ReasonAudience},
		{"missing exp", es256("at+jwt", with(base, "exp", nil)), ReasonClaims},
		{"exp not a number", es256("at+jwt", with(base, "exp", "soon")), ReasonClaims},
		{"expired beyond the skew", es256("at+jwt", with(base, "iat", now.Add(-5*time.Minute).Unix(), "nbf", nil, "exp", now.Add(-30*time.Second).Unix())), ReasonExpired},
		{"expired within the skew", es256("at+jwt", with(base, "iat", now.Add(-5*time.Minute).Unix(), "nbf", nil, "exp", now.Add(-29*time.Second).Unix())), ""},
		{"nbf beyond the skew", es256("at+jwt", with(base, "nbf", now.Add(31*time.Second).Unix())), ReasonNotYetValid},
		{"nbf within the skew", es256("at+jwt", with(base, "nbf", now.Add(30*time.Second).Unix())), ""},
		{"iat beyond the skew", es256("at+jwt", with(base, "iat", now.Add(31*time.Second).Unix())), ReasonNotYetValid},
		{"lifetime at the ceiling", es256("at+jwt", with(base, "exp", now.Add(15*time.Minute).Unix())), ""},
		{"lifetime over the ceiling", es256("at+jwt", with(base, "exp", now.Add(15*time.Minute+time.Second).Unix())), ReasonLifetime},
		{"no iat and exp too far", es256("at+jwt", with(base, "iat", nil, "exp", now.Add(16*time.Minute).Unix())), ReasonLifetime},
		{"missing jti", es256("at+jwt", with(base, "jti", nil)), ReasonClaims},
		{"scope not a string", es256("at+jwt", with(base, "scope", []string{"records:read"})), ReasonClaims},
		{"claims not an object", func() string {
			return k1.Sign(t, "at+jwt", nil)
		}, ReasonMalformed},
		{"garbage", func() string { return "not.a.token" }, ReasonMalformed},
		{"empty", func() string { return "" }, ReasonMalformed},
		{"over the size bound", func() string {
			return k1.Sign(t, "at+jwt", with(base, "pad", strings.Repeat("x", MaximumTokenBytes)))
		}, ReasonMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok := tc.token()
			c, err := v.Verify(context.Background(), tok)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if c.Principal != "service:c1" || !c.HasScope("records:read") || !c.HasScope("records:write") || c.Purpose != "audit" || c.TokenID != "tok-1" {
					t.Fatalf("claims = %+v", c)
				}
				return
			}
			re, ok := IsRefused(err)
			if !ok {
				t.Fatalf("err = %v, want a refusal %s", err, tc.want)
			}
			if re.Reason != tc.want {
				t.Fatalf("reason = %s (%v), want %s", re.Reason, err, tc.want)
			}
			msg := err.Error()
			for _, secret := range []string{tok, "service:c1", "records:read", "tok-1"} {
				if secret != "" && strings.Contains(msg, secret) {
					t.Fatalf("refusal %q leaks %q", msg, secret)
				}
			}
		})
	}
}

func TestVerifyTokenSizeBoundEdge(t *testing.T) {
	clk := newClock()
	// base64url skips one length in four, so vary the kid too to reach the bound exactly.
	var keys []*signingKey
	for n := 1; n <= 4; n++ {
		keys = append(keys, newKey(t, strings.Repeat("k", n)))
	}
	v := mustVerifier(t, newKeyServer(t, keys...).URL, clk)
	base := claimsAt(clk.Now())
	var tok string
	for _, k := range keys {
		for pad := MaximumTokenBytes*3/4 - 400; pad < MaximumTokenBytes; pad++ {
			tok = k.Sign(t, "at+jwt", with(base, "pad", strings.Repeat("x", pad)))
			if len(tok) >= MaximumTokenBytes {
				break
			}
		}
		if len(tok) == MaximumTokenBytes {
			break
		}
	}
	if len(tok) != MaximumTokenBytes {
		t.Fatalf("could not build a token of exactly %d bytes (got %d)", MaximumTokenBytes, len(tok))
	}
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("token at the bound refused: %v", err)
	}
	_, err := v.Verify(context.Background(), tok+"A")
	if re, ok := IsRefused(err); !ok || re.Reason != ReasonMalformed {
		t.Fatalf("token over the bound: err = %v", err)
	}
}

func mustVerifier(t *testing.T, url string, clk *clock) *Verifier {
	t.Helper()
	v, err := NewVerifier(settings(url), nil, WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestScopesSplitOnTheConfiguredSeparatorAndClaimsFromConfiguredNames(t *testing.T) {
	clk := newClock()
	k := newKey(t, "k1")
	ks := newKeyServer(t, k)
	cfg := settings(ks.URL)
	cfg.ScopeClaim, cfg.ScopeSeparator = "permissions", ","
	cfg.AuthorityClaims.Principal, cfg.AuthorityClaims.Purpose = "client_id", "ctx.purpose"
	v, err := NewVerifier(cfg, nil, WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	claims := with(claimsAt(clk.Now()), "permissions", "a:read,,b:write", "ctx", map[string]any{"purpose": "inspection"})
	c, err := v.Verify(context.Background(), k.Sign(t, "at+jwt", claims))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.Scopes) != "[a:read b:write]" || c.HasScope("records:read") {
		t.Fatalf("scopes = %v", c.Scopes)
	}
	if c.Principal != "c1" || c.Purpose != "inspection" {
		t.Fatalf("principal %q purpose %q", c.Principal, c.Purpose)
	}
	if got, ok := c.Claim("ctx.purpose"); !ok || got != "inspection" {
		t.Fatalf("Claim(ctx.purpose) = %v %v", got, ok)
	}
	if n, ok := c.Claim("iat"); !ok || n.(json.Number).String() != fmt.Sprint(clk.Now().Unix()) {
		t.Fatalf("numbers must stay exact: %v", n)
	}
}

func TestKeyRotationIsPickedUpOnUnknownKid(t *testing.T) {
	clk := newClock()
	a, b := newKey(t, "a"), newKey(t, "b")
	ks := newKeyServer(t, a)
	v := mustVerifier(t, ks.URL, clk)
	ctx := context.Background()
	if _, err := v.Verify(ctx, a.Sign(t, "at+jwt", claimsAt(clk.Now()))); err != nil {
		t.Fatal(err)
	}
	if got := ks.Hits(); got != 1 {
		t.Fatalf("fetches = %d, want 1", got)
	}
	// The issuer rotates to b; the first b token triggers a fetch.
	ks.SetKeys(a, b)
	clk.Advance(DefaultMinimumFetchInterval)
	if _, err := v.Verify(ctx, b.Sign(t, "at+jwt", claimsAt(clk.Now()))); err != nil {
		t.Fatalf("rotated key refused: %v", err)
	}
	if got := ks.Hits(); got != 2 {
		t.Fatalf("fetches = %d, want 2", got)
	}
	// Known keys need no fetch.
	for range 5 {
		if _, err := v.Verify(ctx, a.Sign(t, "at+jwt", claimsAt(clk.Now()))); err != nil {
			t.Fatal(err)
		}
	}
	if got := ks.Hits(); got != 2 {
		t.Fatalf("fetches = %d after known-key tokens, want 2", got)
	}
}

func TestUnknownKidFetchesAreRateLimited(t *testing.T) {
	clk := newClock()
	a := newKey(t, "a")
	ks := newKeyServer(t, a)
	v := mustVerifier(t, ks.URL, clk)
	ctx := context.Background()
	if _, err := v.Verify(ctx, a.Sign(t, "at+jwt", claimsAt(clk.Now()))); err != nil {
		t.Fatal(err)
	}
	clk.Advance(DefaultMinimumFetchInterval)
	// A flood of tokens naming unknown kids, concurrently: one fetch.
	tokens := make([]string, 64)
	for i := range tokens {
		tokens[i] = newKey(t, fmt.Sprintf("bogus-%d", i)).Sign(t, "at+jwt", claimsAt(clk.Now()))
	}
	var wg sync.WaitGroup
	for _, tok := range tokens {
		wg.Go(func() {
			if _, err := v.Verify(ctx, tok); err == nil {
				t.Error("unknown kid accepted")
			}
		})
	}
	wg.Wait()
	if got := ks.Hits(); got != 2 {
		t.Fatalf("fetches = %d after a flood, want 2", got)
	}
	clk.Advance(DefaultMinimumFetchInterval - time.Nanosecond)
	v.Verify(ctx, tokens[0])
	if got := ks.Hits(); got != 2 {
		t.Fatalf("fetches = %d just inside the interval, want 2", got)
	}
	clk.Advance(time.Nanosecond)
	v.Verify(ctx, tokens[0])
	if got := ks.Hits(); got != 3 {
		t.Fatalf("fetches = %d once the interval passed, want 3", got)
	}
}

func TestNoKeySetEverRetrievedRefusesEveryToken(t *testing.T) {
	clk := newClock()
	a := newKey(t, "a")
	ks := newKeyServer(t, a)
	ks.SetBody(http.StatusServiceUnavailable, []byte("down"))
	v := mustVerifier(t, ks.URL, clk)
	for range 3 {
		_, err := v.Verify(context.Background(), a.Sign(t, "at+jwt", claimsAt(clk.Now())))
		if re, ok := IsRefused(err); !ok || re.Reason != ReasonNoKeySet {
			t.Fatalf("err = %v, want %s", err, ReasonNoKeySet)
		}
	}
	if got := ks.Hits(); got != 1 {
		t.Fatalf("fetches = %d, want 1 (rate limited)", got)
	}
	// Once the issuer answers, the next attempt after the interval succeeds.
	ks.SetKeys(a)
	clk.Advance(DefaultMinimumFetchInterval)
	if _, err := v.Verify(context.Background(), a.Sign(t, "at+jwt", claimsAt(clk.Now()))); err != nil {
		t.Fatal(err)
	}
}

func TestHeldKeySetIsUsedOnlyUntilItsAllowanceEnds(t *testing.T) {
	clk := newClock()
	a := newKey(t, "a")
	ks := newKeyServer(t, a)
	cfg := settings(ks.URL)
	v, err := NewVerifier(cfg, nil, WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := v.Verify(ctx, a.Sign(t, "at+jwt", claimsAt(clk.Now()))); err != nil {
		t.Fatal(err)
	}
	ks.SetBody(http.StatusInternalServerError, []byte("{}"))
	// Past the refresh interval a stale set triggers a fetch, which fails: the set is kept.
	clk.Advance(cfg.KeySetRefresh())
	if _, err := v.Verify(ctx, a.Sign(t, "at+jwt", claimsAt(clk.Now()))); err != nil {
		t.Fatalf("held set refused after a failed refresh: %v", err)
	}
	if got := ks.Hits(); got != 2 {
		t.Fatalf("fetches = %d, want 2 (one refresh attempt)", got)
	}
	clk.Advance(cfg.KeySetAllowance() - cfg.KeySetRefresh())
	if _, err := v.Verify(ctx, a.Sign(t, "at+jwt", claimsAt(clk.Now()))); err != nil {
		t.Fatalf("held set refused at the end of its allowance: %v", err)
	}
	clk.Advance(time.Second)
	_, err = v.Verify(ctx, a.Sign(t, "at+jwt", claimsAt(clk.Now())))
	if re, ok := IsRefused(err); !ok || re.Reason != ReasonNoKeySet {
		t.Fatalf("err = %v after the allowance, want %s", err, ReasonNoKeySet)
	}
}

func TestStaleKeySetIsRefreshedOnVerify(t *testing.T) {
	clk := newClock()
	a, b := newKey(t, "a"), newKey(t, "b")
	ks := newKeyServer(t, a)
	cfg := settings(ks.URL)
	v, _ := NewVerifier(cfg, nil, WithClock(clk.Now))
	ctx := context.Background()
	if _, err := v.Verify(ctx, a.Sign(t, "at+jwt", claimsAt(clk.Now()))); err != nil {
		t.Fatal(err)
	}
	// The issuer drops a from its set: after the refresh interval a is refused.
	ks.SetKeys(b)
	clk.Advance(cfg.KeySetRefresh())
	_, err := v.Verify(ctx, a.Sign(t, "at+jwt", claimsAt(clk.Now())))
	if re, ok := IsRefused(err); !ok || re.Reason != ReasonKeyUnknown {
		t.Fatalf("err = %v, want %s", err, ReasonKeyUnknown)
	}
}

func TestBadKeySetDocumentsAreNotInstalled(t *testing.T) {
	good := newKey(t, "good")
	g := good.PublicJWK()
	set := func(keys ...any) []byte { b, _ := json.Marshal(map[string]any{"keys": keys}); return b }
	many := make([]any, MaximumKeys+1)
	for i := range many {
		many[i] = with(g, "kid", fmt.Sprintf("k%d", i))
	}
	offCurve := with(g, "x", b64.EncodeToString(make([]byte, 32)))
	cases := map[string][]byte{
		"not JSON":                   []byte("<html>"),
		"no keys member":             []byte(`{"kids":[]}`),
		"more than MaximumKeys":      set(many...),
		"repeated kid":               set(g, g),
		"private key material":       set(with(g, "d", "AAAA")),
		"only an RSA key":            set(map[string]any{"kty": "RSA", "kid": "r", "n": "AQAB", "e": "AQAB"}),
		"only a P-384 key":           set(with(g, "crv", "P-384")),
		"only an encryption key":     set(with(g, "use", "enc")),
		"only an ES384 key":          set(with(g, "alg", "ES384")),
		"only a key without kid":     set(with(g, "kid", nil)),
		"only a point off the curve": set(offCurve),
		"over the byte bound":        append(set(g), []byte(strings.Repeat(" ", MaximumKeySetBytes))...),
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			ks := newKeyServer(t, good)
			ks.SetBody(http.StatusOK, body)
			v := mustVerifier(t, ks.URL, clk)
			_, err := v.Verify(context.Background(), good.Sign(t, "at+jwt", claimsAt(clk.Now())))
			if re, ok := IsRefused(err); !ok || re.Reason != ReasonNoKeySet {
				t.Fatalf("err = %v, want %s", err, ReasonNoKeySet)
			}
		})
	}
	t.Run("unusable keys beside a usable one are skipped", func(t *testing.T) {
		keys, err := parseKeySet(set(with(g, "kid", "enc", "use", "enc"), with(g, "kid", "p384", "crv", "P-384"), g))
		if err != nil || len(keys) != 1 || keys["good"] == nil {
			t.Fatalf("keys = %v, err = %v", keys, err)
		}
	})
	t.Run("exactly MaximumKeys and exactly MaximumKeySetBytes", func(t *testing.T) {
		body := set(many[:MaximumKeys]...)
		body = append(body, []byte(strings.Repeat(" ", MaximumKeySetBytes-len(body)))...)
		clk := newClock()
		ks := newKeyServer(t, good)
		ks.SetBody(http.StatusOK, body)
		v := mustVerifier(t, ks.URL, clk)
		if _, err := v.Verify(context.Background(), good.Renamed("k0").Sign(t, "at+jwt", claimsAt(clk.Now()))); err != nil {
			t.Fatal(err)
		}
	})
}

func TestKeySetFetchIsBoundedInTime(t *testing.T) {
	a := newKey(t, "a")
	release := make(chan struct{})
	ks := newKeyServer(t, a)
	ks.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	clk := newClock()
	v, err := NewVerifier(settings(ks.URL), nil, WithClock(clk.Now), WithFetchTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = v.Verify(context.Background(), a.Sign(t, "at+jwt", claimsAt(clk.Now())))
	if re, ok := IsRefused(err); !ok || re.Reason != ReasonNoKeySet {
		t.Fatalf("err = %v, want %s", err, ReasonNoKeySet)
	}
	testslack.Stopped(t, "Verify behind a hanging key set", time.Since(start), 100*time.Millisecond)
}

func TestStartRefreshesInTheBackgroundAndCloseStopsIt(t *testing.T) {
	a := newKey(t, "a")
	ks := newKeyServer(t, a)
	cfg := settings(ks.URL)
	cfg.KeySetRefreshSeconds = intp(1) // below the configurable floor, to keep the test short
	v, err := NewVerifier(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ks.Hits(); got != 1 {
		t.Fatalf("fetches after Start = %d, want 1", got)
	}
	if err := v.Start(context.Background()); err == nil {
		t.Fatal("second Start accepted")
	}
	deadline := time.Now().Add(5 * time.Second)
	for ks.Hits() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no background refresh")
		}
		time.Sleep(20 * time.Millisecond)
	}
	v.Close()
	v.Close()
	if loopRunning() {
		t.Fatal("refresh loop still running after Close")
	}
	// A cancelled context stops it too.
	v2, _ := NewVerifier(cfg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	v2.Start(ctx)
	cancel()
	v2.Close()
	if loopRunning() {
		t.Fatal("refresh loop still running after its context ended")
	}
}

func loopRunning() bool {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return strings.Contains(string(buf[:n]), "(*Verifier).loop")
}

func TestARefreshInFlightDoesNotHoldTokensWithAKnownKey(t *testing.T) {
	clk := newClock()
	a := newKey(t, "a")
	ks := newKeyServer(t, a)
	release := make(chan struct{})
	var arrived atomic.Int64
	good := ks.Config.Handler
	ks.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) > 1 { // every fetch after the first hangs until released
			<-release
		}
		good.ServeHTTP(w, r)
	})
	cfg := settings(ks.URL)
	v, _ := NewVerifier(cfg, nil, WithClock(clk.Now))
	ctx := context.Background()
	if _, err := v.Verify(ctx, a.Sign(t, "at+jwt", claimsAt(clk.Now()))); err != nil {
		t.Fatal(err)
	}
	clk.Advance(cfg.KeySetRefresh())
	first := make(chan error, 1)
	go func() {
		_, err := v.Verify(ctx, a.Sign(t, "at+jwt", claimsAt(clk.Now())))
		first <- err
	}()
	// Wait until the lazy refresh is in flight.
	deadline := time.Now().Add(5 * time.Second)
	for arrived.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	second := make(chan error, 1)
	tok := a.Sign(t, "at+jwt", claimsAt(clk.Now()))
	go func() {
		_, err := v.Verify(ctx, tok)
		second <- err
	}()
	select {
	case err := <-second:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		close(release)
		t.Fatal("a known-key token waited behind a refresh in flight")
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

func TestAStartedVerifierLeavesRefreshToItsLoop(t *testing.T) {
	clk := newClock()
	a := newKey(t, "a")
	ks := newKeyServer(t, a)
	cfg := settings(ks.URL)
	v, _ := NewVerifier(cfg, nil, WithClock(clk.Now))
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	clk.Advance(cfg.KeySetRefresh() + time.Second)
	if _, err := v.Verify(context.Background(), a.Sign(t, "at+jwt", claimsAt(clk.Now()))); err != nil {
		t.Fatal(err)
	}
	if got := ks.Hits(); got != 1 {
		t.Fatalf("fetches = %d, want 1: the request path refreshed a set the loop keeps", got)
	}
}

func TestCloseCancelsABackgroundFetchInFlight(t *testing.T) {
	a := newKey(t, "a")
	ks := newKeyServer(t, a)
	var arrived atomic.Int64
	good := ks.Config.Handler
	ks.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) > 1 { // the refresh hangs until the client goes away
			<-r.Context().Done()
			return
		}
		good.ServeHTTP(w, r)
	})
	cfg := settings(ks.URL)
	cfg.KeySetRefreshSeconds = intp(1) // below the configurable floor, to keep the test short
	v, _ := NewVerifier(cfg, nil, WithFetchTimeout(time.Minute))
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for arrived.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no background refresh")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	v.Close()
	// The fetch would hang for its one-minute timeout without Close's cancel.
	testslack.Stopped(t, "Close beside a hanging fetch", time.Since(start), 0)
	if loopRunning() {
		t.Fatal("refresh loop still running after Close")
	}
}

func TestAVerifiedTokenIsRecheckedAfterItsKeyChanges(t *testing.T) {
	clk := newClock()
	a := newKey(t, "a")
	ks := newKeyServer(t, a)
	cfg := settings(ks.URL)
	v, _ := NewVerifier(cfg, nil, WithClock(clk.Now))
	ctx := context.Background()
	tok := a.Sign(t, "at+jwt", claimsAt(clk.Now()))
	for i := 0; i < 2; i++ { // the second time from the cache of verified signatures
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatalf("verify %d: %v", i, err)
		}
	}
	// The same token, its signature altered: not a cache hit, refused.
	bad := tok[:len(tok)-2] + map[bool]string{true: "AA", false: "AB"}[tok[len(tok)-2:] != "AA"]
	if _, err := v.Verify(ctx, bad); err == nil {
		t.Fatal("a token with an altered signature was accepted")
	}
	// The issuer replaces the key behind kid "a": the cached verification no
	// longer counts, and the token is refused under the new key.
	ks.SetKeys(newKey(t, "a"))
	clk.Advance(cfg.KeySetRefresh())
	if _, err := v.Verify(ctx, tok); err == nil {
		t.Fatal("a token verified under a replaced key was still accepted")
	}
	// Lifetime is checked on every request, cached or not.
	v2, _ := NewVerifier(cfg, nil, WithClock(clk.Now))
	ks.SetKeys(a)
	tok2 := a.Sign(t, "at+jwt", claimsAt(clk.Now()))
	if _, err := v2.Verify(ctx, tok2); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if _, err := v2.Verify(ctx, tok2); err == nil {
		t.Fatal("an expired token was accepted from the cache")
	}
}
