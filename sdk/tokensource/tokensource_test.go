package tokensource_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/sdk/tokensource"
)

// startIssuer runs a real issuer from a dev setup; count counts token requests.
func startIssuer(t *testing.T, clock func() time.Time) (*issuertest.Issuer, *atomic.Int64) {
	t.Helper()
	var count atomic.Int64
	is := issuertest.Start(t, issuertest.Options{Clock: clock, Wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/token" {
				count.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	}})
	return is, &count
}

// source is a token source for the dev setup's i-th client.
func source(t *testing.T, is *issuertest.Issuer, i int, mutate func(*tokensource.Config)) *tokensource.Source {
	t.Helper()
	return is.Source(t, is.Setup.Clients[i].ID, mutate)
}

func TestTokenFromRealIssuerIsCached(t *testing.T) {
	// The issuer and the client share one clock that the test moves.
	var now atomic.Int64
	now.Store(time.Now().Unix())
	clock := func() time.Time { return time.Unix(now.Load(), 0) }
	is, count := startIssuer(t, clock)
	s := source(t, is, 0, func(c *tokensource.Config) { c.Now = clock })
	tok, err := s.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tok.TokenType != "Bearer" || tok.Scope != "records:read records:write" || tok.Expiry.Sub(clock()) != 900*time.Second {
		t.Fatalf("token %+v", tok)
	}
	// Concurrent callers within the validity share the cached token.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			t2, err := s.Token(context.Background())
			if err != nil || t2.AccessToken != tok.AccessToken {
				t.Errorf("cached token differs: %v", err)
			}
		})
	}
	wg.Wait()
	if count.Load() != 1 {
		t.Fatalf("%d token requests, want 1", count.Load())
	}
	// Shortly before expiry (inside the margin) a new token is fetched,
	// with a new assertion (the issuer would refuse a reused jti).
	now.Add(900 - 29)
	tok2, err := s.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tok2.AccessToken == tok.AccessToken || count.Load() != 2 {
		t.Fatalf("token not renewed inside the expiry margin (%d requests)", count.Load())
	}
}

func TestAssertionsAreFresh(t *testing.T) {
	is, _ := startIssuer(t, nil)
	s := source(t, is, 1, nil)
	seen := map[string]bool{}
	for range 20 {
		a, err := s.Assertion()
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(a, ".")
		raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
		var c map[string]any
		json.Unmarshal(raw, &c)
		jti := c["jti"].(string)
		if seen[jti] {
			t.Fatal("jti reused")
		}
		seen[jti] = true
		if c["iss"] != is.Setup.Clients[1].ID || c["sub"] != is.Setup.Clients[1].ID || c["aud"] != is.Setup.Issuer {
			t.Fatalf("assertion claims %v", c)
		}
	}
}

func TestRefusalCarriesTheErrorCode(t *testing.T) {
	is, _ := startIssuer(t, nil)
	other, _ := issuertest.GenerateKey(t, "ES256")
	s, err := tokensource.New(tokensource.Config{TokenURL: is.Setup.TokenURL, ClientID: is.Setup.Clients[0].ID, Key: other})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Token(context.Background())
	var te *tokensource.Error
	if !errors.As(err, &te) || te.Code != "invalid_client" || te.StatusCode != 401 {
		t.Fatalf("error %v", err)
	}
	// Wrong audience: the issuer refuses too, the token URL (the dev
	// issuer's assertion audience before #20) as any other.
	for _, aud := range []string{"https://elsewhere/token", is.Setup.TokenURL} {
		s = source(t, is, 0, func(c *tokensource.Config) { c.Audience = aud })
		if _, err := s.Token(context.Background()); !errors.As(err, &te) || te.Code != "invalid_client" || te.StatusCode != 401 {
			t.Fatalf("audience %s: error %v", aud, err)
		}
	}
}

// The audience is learned from discovery, given the token URL (as
// `registrum dev` prints it), the issuer's listener URL, or its discovery
// document's URL.
func TestAudienceIsTheIssuerIdentifierByDiscovery(t *testing.T) {
	is, count := startIssuer(t, nil)
	key, err := tokensource.LoadKeyFile(is.Setup.Clients[0].KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []tokensource.Config{
		{TokenURL: is.Setup.TokenURL},
		{Issuer: is.BaseURL},
		{Issuer: is.BaseURL + "/"},
		{Issuer: is.BaseURL + "/.well-known/oauth-authorization-server"},
		{Issuer: is.BaseURL, Audience: is.Setup.Issuer},
	} {
		cfg.ClientID, cfg.Key = is.Setup.Clients[0].ID, key
		s, err := tokensource.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		aud, err := s.Audience(context.Background())
		if err != nil || aud != is.Setup.Issuer || !strings.HasPrefix(aud, "https://") {
			t.Fatalf("%+v: audience %q, %v; want the issuer identifier %q", cfg, aud, err, is.Setup.Issuer)
		}
		before := count.Load()
		if _, err := s.Token(context.Background()); err != nil || count.Load() != before+1 {
			t.Fatalf("%+v: %v", cfg, err)
		}
	}
}

// A discovery document naming an identifier on another host is never used as
// the audience: a server the client talks to could otherwise make it sign an
// assertion for another issuer (the audience injection of
// draft-ietf-oauth-rfc7523bis).
func TestForeignIdentifierIsRefused(t *testing.T) {
	is, _ := startIssuer(t, nil)
	var tokenRequests atomic.Int64
	var evil *httptest.Server
	evil = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case tokensource.DiscoveryPath:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]string{"issuer": "https://honest.example", "token_endpoint": evil.URL + "/token"})
		case "/token":
			tokenRequests.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer evil.Close()
	for _, cfg := range []tokensource.Config{{TokenURL: evil.URL + "/token"}, {Issuer: evil.URL}} {
		s := source(t, is, 0, func(c *tokensource.Config) {
			*c = tokensource.Config{ClientID: c.ClientID, Key: c.Key, TokenURL: cfg.TokenURL, Issuer: cfg.Issuer}
		})
		if _, err := s.Token(context.Background()); err == nil || !strings.Contains(err.Error(), "honest.example") {
			t.Fatalf("%+v: %v", cfg, err)
		}
		if _, err := s.Assertion(); err == nil {
			t.Fatalf("%+v: assertion signed for a foreign identifier", cfg)
		}
	}
	if tokenRequests.Load() != 0 {
		t.Fatal("an assertion reached the token endpoint")
	}
}

// A token endpoint whose origin serves no discovery document gets RFC 7523's
// audience, the token endpoint URL.
func TestNoDiscoveryKeepsTheTokenURL(t *testing.T) {
	is, _ := startIssuer(t, nil)
	var aud atomic.Value
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/oauth/token" {
			http.NotFound(w, r)
			return
		}
		r.ParseForm()
		parts := strings.Split(r.PostForm.Get("client_assertion"), ".")
		raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
		var c map[string]any
		json.Unmarshal(raw, &c)
		aud.Store(c["aud"])
		w.Write([]byte(`{"access_token":"t","token_type":"Bearer","expires_in":60}`))
	}))
	defer plain.Close()
	s := source(t, is, 0, func(c *tokensource.Config) { c.TokenURL = plain.URL + "/oauth/token" })
	if _, err := s.Token(context.Background()); err != nil || aud.Load() != plain.URL+"/oauth/token" {
		t.Fatalf("audience %v, %v", aud.Load(), err)
	}
}

func TestResponseReadIsBounded(t *testing.T) {
	is, _ := startIssuer(t, nil)
	for _, size := range []int{tokensource.MaximumResponseBytes, tokensource.MaximumResponseBytes + 1} {
		big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body := `{"access_token":"` + strings.Repeat("a", size-len(`{"access_token":"","token_type":"Bearer","expires_in":60}`)) + `","token_type":"Bearer","expires_in":60}`
			w.Write([]byte(body))
		}))
		s := source(t, is, 0, func(c *tokensource.Config) { c.TokenURL = big.URL + "/token" })
		_, err := s.Token(context.Background())
		big.Close()
		if size == tokensource.MaximumResponseBytes && err != nil {
			t.Fatalf("response of exactly %d bytes: %v", size, err)
		}
		if size > tokensource.MaximumResponseBytes && (err == nil || !strings.Contains(err.Error(), "larger than")) {
			t.Fatalf("response of %d bytes: %v", size, err)
		}
	}
}

func TestLoadKeyFileRules(t *testing.T) {
	dir := t.TempDir()
	priv, pub := issuertest.GenerateKey(t, "EdDSA")
	raw, _ := priv.MarshalJSON()
	p := dir + "/k.jwk"
	os.WriteFile(p, raw, 0o600)
	if _, err := tokensource.LoadKeyFile(p); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o644)
	if _, err := tokensource.LoadKeyFile(p); err == nil || !strings.Contains(err.Error(), "owner only") {
		t.Fatalf("group-readable key accepted: %v", err)
	}
	praw, _ := pub.MarshalJSON()
	os.WriteFile(dir+"/pub.jwk", praw, 0o600)
	if _, err := tokensource.LoadKeyFile(dir + "/pub.jwk"); err == nil {
		t.Fatal("public key accepted as a client key")
	}
}

// TestRefreshReplacesOnlyTheRefusedToken: a refused cached token is
// dropped and a new one fetched; a refusal of a token the cache no longer
// holds returns the cached one without a request.
func TestRefreshReplacesOnlyTheRefusedToken(t *testing.T) {
	is, count := startIssuer(t, nil)
	s := source(t, is, 0, nil)
	ctx := context.Background()
	first, err := s.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Refresh(ctx, first.AccessToken)
	if err != nil || second.AccessToken == first.AccessToken || count.Load() != 2 {
		t.Fatalf("refresh of the cached token: %v (%d requests)", err, count.Load())
	}
	// A late refusal of the first token (a concurrent call) keeps the second.
	third, err := s.Refresh(ctx, first.AccessToken)
	if err != nil || third.AccessToken != second.AccessToken || count.Load() != 2 {
		t.Fatalf("refresh of a token no longer cached: %v (%d requests)", err, count.Load())
	}
	if cached, err := s.Token(ctx); err != nil || cached.AccessToken != second.AccessToken || count.Load() != 2 {
		t.Fatalf("the renewed token is not cached: %v (%d requests)", err, count.Load())
	}
}
