package tokensource_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrum/registrum/issuer"
	"github.com/registrum/registrum/issuer/keys"
	"github.com/registrum/registrum/sdk/tokensource"
)

// startIssuer runs a real issuer from a dev setup; counting counts token requests.
func startIssuer(t *testing.T, opts ...issuer.Option) (*issuer.DevSetup, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	setup, err := issuer.WriteDevSetup(t.TempDir(), issuer.DevOptions{Port: ln.Addr().(*net.TCPAddr).Port})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := issuer.LoadConfig(setup.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := issuer.New(cfg, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	var count atomic.Int64
	h := srv.Handler()
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			count.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	hs.Listener.Close()
	hs.Listener = ln // the port the dev setup's token URL names
	hs.Start()
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return setup, &count
}

func source(t *testing.T, setup *issuer.DevSetup, i int, mutate func(*tokensource.Config)) *tokensource.Source {
	t.Helper()
	c := setup.Clients[i]
	key, err := tokensource.LoadKeyFile(c.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tokensource.Config{TokenURL: setup.TokenURL, ClientID: c.ID, Key: key, Audience: c.Audience}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := tokensource.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTokenFromRealIssuerIsCached(t *testing.T) {
	// The issuer and the client share one clock that the test moves.
	var now atomic.Int64
	now.Store(time.Now().Unix())
	clock := func() time.Time { return time.Unix(now.Load(), 0) }
	setup, count := startIssuer(t, issuer.WithClock(clock))
	s := source(t, setup, 0, func(c *tokensource.Config) { c.Now = clock })
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
	setup, _ := startIssuer(t)
	s := source(t, setup, 1, nil)
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
		if c["iss"] != setup.Clients[1].ID || c["sub"] != setup.Clients[1].ID || c["aud"] != setup.TokenURL {
			t.Fatalf("assertion claims %v", c)
		}
	}
}

func TestRefusalCarriesTheErrorCode(t *testing.T) {
	setup, _ := startIssuer(t)
	other, _, _ := keys.Generate("ES256")
	s, err := tokensource.New(tokensource.Config{TokenURL: setup.TokenURL, ClientID: setup.Clients[0].ID, Key: other})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Token(context.Background())
	var te *tokensource.Error
	if !errors.As(err, &te) || te.Code != "invalid_client" || te.StatusCode != 401 {
		t.Fatalf("error %v", err)
	}
	// Wrong audience: the issuer refuses too.
	s = source(t, setup, 0, func(c *tokensource.Config) { c.Audience = "https://elsewhere/token" })
	if _, err := s.Token(context.Background()); !errors.As(err, &te) || te.Code != "invalid_client" {
		t.Fatalf("error %v", err)
	}
}

func TestResponseReadIsBounded(t *testing.T) {
	setup, _ := startIssuer(t)
	for _, size := range []int{tokensource.MaximumResponseBytes, tokensource.MaximumResponseBytes + 1} {
		big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body := `{"access_token":"` + strings.Repeat("a", size-len(`{"access_token":"","token_type":"Bearer","expires_in":60}`)) + `","token_type":"Bearer","expires_in":60}`
			w.Write([]byte(body))
		}))
		s := source(t, setup, 0, func(c *tokensource.Config) { c.TokenURL = big.URL + "/token" })
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
	priv, pub, _ := keys.Generate("EdDSA")
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
