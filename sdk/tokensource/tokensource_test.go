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
		if c["iss"] != is.Setup.Clients[1].ID || c["sub"] != is.Setup.Clients[1].ID || c["aud"] != is.Setup.TokenURL {
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
	// Wrong audience: the issuer refuses too.
	s = source(t, is, 0, func(c *tokensource.Config) { c.Audience = "https://elsewhere/token" })
	if _, err := s.Token(context.Background()); !errors.As(err, &te) || te.Code != "invalid_client" {
		t.Fatalf("error %v", err)
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
