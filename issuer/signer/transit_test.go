package signer_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/internal/testslack"
	"github.com/registrum/registrum/issuer/signer"
	"github.com/registrum/registrum/issuer/signer/transittest"
)

// transitErrors are the distinct failure classes of the transit signer.
var transitErrors = []error{
	signer.ErrTransitUnavailable, signer.ErrTransitRefused, signer.ErrTransitKeyNotFound,
	signer.ErrTransitResponse, signer.ErrTransitKeyType, signer.ErrTransitExportable,
	signer.ErrTransitPlaintextBackup, signer.ErrTransitDeletionAllowed, signer.ErrTransitDerived,
	signer.ErrTransitKeyVersion, signer.ErrTransitPublicKey, signer.ErrSignatureInvalid,
}

// wantOnly checks that err is want and none of the other failure classes.
func wantOnly(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v is not %v", err, want)
	}
	for _, other := range transitErrors {
		if other != want && errors.Is(err, other) {
			t.Fatalf("error %v is also %v", err, other)
		}
	}
}

func transitConfig(srv *transittest.Server, version int) signer.TransitConfig {
	return signer.TransitConfig{
		UnixSocketPath: srv.SocketPath(),
		Mount:          srv.Mount(),
		KeyName:        srv.KeyName(),
		KeyVersion:     version,
		Timeout:        2 * time.Second,
		Active:         srv.PublicJWK(version),
	}
}

func newTransit(t *testing.T, cfg signer.TransitConfig) signer.Signer {
	t.Helper()
	s, err := signer.NewTransit(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestTransitSignsThroughTheTransitAPI(t *testing.T) {
	srv := transittest.Start(t)
	active := srv.PublicJWK(1)
	s := newTransit(t, transitConfig(srv, 1))
	if s.KeyID() != active.KeyID {
		t.Fatalf("KeyID %q, want %q", s.KeyID(), active.KeyID)
	}
	ctx := context.Background()
	if err := s.SelfTest(ctx); err != nil {
		t.Fatal(err)
	}
	token := compactJWS(t, s, `{"iss":"https://issuer.example"}`)
	verifyWithJose(t, token, active, `{"iss":"https://issuer.example"}`)

	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want read key + self-test sign + sign", len(reqs))
	}
	if r := reqs[0]; r.Method != "GET" || r.Path != "/v1/transit/keys/registrum-issuer" || len(r.Body) != 0 {
		t.Fatalf("read key request %s %s %q", r.Method, r.Path, r.Body)
	}
	signingInput := token[:strings.LastIndex(token, ".")]
	digest := sha256.Sum256([]byte(signingInput))
	for i, r := range reqs {
		if r.Header.Get("X-Vault-Request") != "true" {
			t.Fatalf("request %d lacks X-Vault-Request: true", i)
		}
		if _, ok := r.Header["X-Vault-Token"]; ok {
			t.Fatalf("request %d sends a token although none is configured", i)
		}
	}
	r := reqs[2]
	if r.Method != "POST" || r.Path != "/v1/transit/sign/registrum-issuer/sha2-256" || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("sign request %s %s %q", r.Method, r.Path, r.Header.Get("Content-Type"))
	}
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"input":                base64.StdEncoding.EncodeToString(digest[:]),
		"key_version":          float64(1),
		"prehashed":            true,
		"marshaling_algorithm": "jws",
	}
	if fmt.Sprint(body) != fmt.Sprint(want) {
		t.Fatalf("sign body %v, want %v", body, want)
	}
}

func TestTransitToken(t *testing.T) {
	const token = "hvs.CAESIExampleTokenValue0123456789"
	srv := transittest.Start(t, transittest.WithToken(token))
	cfg := transitConfig(srv, 1)

	err := newTransit(t, cfg).SelfTest(context.Background())
	wantOnly(t, err, signer.ErrTransitRefused)
	if !strings.Contains(err.Error(), "HTTP 403") || strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("error %q: want the status, not the provider's text", err)
	}

	cfg.Token = []byte(token + "\n") // a token file usually ends with a newline
	s := newTransit(t, cfg)
	if err := s.SelfTest(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, r := range srv.Requests()[1:] {
		if r.Header.Get("X-Vault-Token") != token {
			t.Fatalf("token header %q", r.Header.Get("X-Vault-Token"))
		}
	}

	cfg.Token = []byte("wrong-token")
	err = newTransit(t, cfg).SelfTest(context.Background())
	wantOnly(t, err, signer.ErrTransitRefused)
	if strings.Contains(err.Error(), "wrong-token") {
		t.Fatalf("error leaks the token: %v", err)
	}
}

func TestTransitSelfTestChecksCustodyControls(t *testing.T) {
	srv := transittest.Start(t, transittest.WithVersions(3))
	cases := []struct {
		name    string
		version int
		set     func(c *transittest.Controls)
		want    error
		mention string
	}{
		{"exportable", 1, func(c *transittest.Controls) { c.Exportable = true }, signer.ErrTransitExportable, "exportable"},
		{"plaintext backup", 1, func(c *transittest.Controls) { c.AllowPlaintextBackup = true }, signer.ErrTransitPlaintextBackup, "allow_plaintext_backup"},
		{"deletion allowed", 1, func(c *transittest.Controls) { c.DeletionAllowed = true }, signer.ErrTransitDeletionAllowed, "deletion_allowed"},
		{"derived", 1, func(c *transittest.Controls) { c.Derived = true }, signer.ErrTransitDerived, "derived"},
		{"custody flags not reported", 1, func(c *transittest.Controls) { c.OmitCustodyFlags = true }, signer.ErrTransitDerived, "does not report derived"},
		{"key type", 1, func(c *transittest.Controls) { c.KeyType = "ecdsa-p384" }, signer.ErrTransitKeyType, `"ecdsa-p384"`},
		{"signing unsupported", 1, func(c *transittest.Controls) { c.SigningUnsupported = true }, signer.ErrTransitKeyType, "supports_signing"},
		{"version below minimum", 1, func(c *transittest.Controls) { c.MinEncryptionVersion = 2 }, signer.ErrTransitKeyVersion, "min_encryption_version 2"},
		{"version missing from keys", 2, func(c *transittest.Controls) { c.HideVersion = 2 }, signer.ErrTransitKeyVersion, "not in the key's versions"},
		{"wrong public key", 1, func(c *transittest.Controls) { c.WrongPublicKey = true }, signer.ErrTransitPublicKey, "version 1"},
		{"signature from another version", 1, func(c *transittest.Controls) { c.SignWithVersion = 2 }, signer.ErrTransitKeyVersion, "pinned version 1"},
		{"bad signature", 1, func(c *transittest.Controls) { c.BadSignature = true }, signer.ErrSignatureInvalid, "does not verify"},
		{"unavailable", 1, func(c *transittest.Controls) { c.Unavailable = true }, signer.ErrTransitUnavailable, "HTTP 503"},
		{"oversized answer", 1, func(c *transittest.Controls) { c.OversizeResponse = true }, signer.ErrTransitResponse, "65536"},
		{"duplicate member", 1, func(c *transittest.Controls) { c.DuplicateMember = true }, signer.ErrTransitResponse, "duplicate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv.Reset()
			s := newTransit(t, transitConfig(srv, c.version))
			if err := s.SelfTest(context.Background()); err != nil {
				t.Fatalf("healthy server: %v", err)
			}
			srv.Set(c.set)
			err := s.SelfTest(context.Background())
			wantOnly(t, err, c.want)
			if !strings.Contains(err.Error(), c.mention) {
				t.Fatalf("error %q does not mention %q", err, c.mention)
			}
			if strings.Contains(err.Error(), "Vault is sealed") || strings.Contains(err.Error(), "BEGIN PUBLIC KEY") {
				t.Fatalf("error echoes the provider: %v", err)
			}
			srv.Reset()
			if err := s.SelfTest(context.Background()); err != nil {
				t.Fatalf("after recovery: %v", err)
			}
		})
	}
}

func TestTransitPinnedVersion(t *testing.T) {
	srv := transittest.Start(t)
	ctx := context.Background()

	t.Run("above latest", func(t *testing.T) {
		cfg := transitConfig(srv, 1)
		cfg.KeyVersion = 2
		wantOnly(t, newTransit(t, cfg).SelfTest(ctx), signer.ErrTransitKeyVersion)
	})
	t.Run("rotation keeps the pinned version until the operator moves it", func(t *testing.T) {
		v1 := newTransit(t, transitConfig(srv, 1))
		v2 := srv.Rotate()
		if err := v1.SelfTest(ctx); err != nil {
			t.Fatalf("pinned version 1 after a rotation: %v", err)
		}
		verifyWithJose(t, compactJWS(t, v1, "{}"), srv.PublicJWK(1), "{}")
		s2 := newTransit(t, transitConfig(srv, v2))
		if err := s2.SelfTest(ctx); err != nil {
			t.Fatal(err)
		}
		verifyWithJose(t, compactJWS(t, s2, "{}"), srv.PublicJWK(v2), "{}")
		// The active JWK of version 2 with version 1 pinned is another key.
		cfg := transitConfig(srv, 1)
		cfg.Active = srv.PublicJWK(v2)
		wantOnly(t, newTransit(t, cfg).SelfTest(ctx), signer.ErrTransitPublicKey)
	})
	t.Run("unknown key", func(t *testing.T) {
		cfg := transitConfig(srv, 1)
		cfg.KeyName = "other"
		err := newTransit(t, cfg).SelfTest(ctx)
		wantOnly(t, err, signer.ErrTransitKeyNotFound)
		cfg.Mount = "elsewhere"
		wantOnly(t, newTransit(t, cfg).SelfTest(ctx), signer.ErrTransitKeyNotFound)
	})
}

func TestTransitUnavailabilityAndRecovery(t *testing.T) {
	srv := transittest.Start(t)
	s := newTransit(t, transitConfig(srv, 1))
	ctx := context.Background()

	srv.SetUnavailable(true)
	_, err := s.Sign(ctx, []byte("a.b"))
	wantOnly(t, err, signer.ErrTransitUnavailable)
	srv.SetUnavailable(false)
	if _, err := s.Sign(ctx, []byte("a.b")); err != nil {
		t.Fatalf("after the provider came back: %v", err)
	}

	srv.Stop()
	_, err = s.Sign(ctx, []byte("a.b"))
	wantOnly(t, err, signer.ErrTransitUnavailable)
	if !strings.Contains(err.Error(), "cannot connect") {
		t.Fatalf("error %q", err)
	}
	wantOnly(t, s.SelfTest(ctx), signer.ErrTransitUnavailable)
	srv.Restart()
	if err := s.SelfTest(ctx); err != nil {
		t.Fatalf("after the socket came back: %v", err)
	}
	s.Close()
	if _, err := s.Sign(ctx, []byte("a.b")); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a closed signer: %v", err)
	}
}

func TestTransitTimeout(t *testing.T) {
	srv := transittest.Start(t)
	cfg := transitConfig(srv, 1)
	// 1 s, not less: after the reset the same timeout bounds a call that
	// must succeed on a busy two-core machine.
	cfg.Timeout = time.Second
	s := newTransit(t, cfg)
	// The answer would come a minute late: only the timeout ends the call.
	srv.Set(func(c *transittest.Controls) { c.Delay = time.Minute })
	start := time.Now()
	_, err := s.Sign(context.Background(), []byte("a.b"))
	wantOnly(t, err, signer.ErrTransitUnavailable)
	if !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("error %q", err)
	}
	testslack.Stopped(t, "a signing call to a silent transit", time.Since(start), cfg.Timeout)
	srv.Reset()
	if _, err := s.Sign(context.Background(), []byte("a.b")); err != nil {
		t.Fatal(err)
	}
}

func TestTransitConcurrentSigning(t *testing.T) {
	srv := transittest.Start(t)
	active := srv.PublicJWK(1)
	s := newTransit(t, transitConfig(srv, 1))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			input := []byte(fmt.Sprintf("header.payload%d", i))
			sig, err := s.Sign(context.Background(), input)
			if err == nil {
				err = signer.Verify(active, input, sig)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestTransitConfigBounds(t *testing.T) {
	srv := transittest.Start(t)
	base := transitConfig(srv, 1)
	ed := &jose.JSONWebKey{Key: make([]byte, 32), KeyID: "x"}
	cases := []struct {
		name   string
		change func(c *signer.TransitConfig)
		ok     bool
		want   string
	}{
		{"valid", func(c *signer.TransitConfig) {}, true, ""},
		{"no socket", func(c *signer.TransitConfig) { c.UnixSocketPath = "" }, false, "unixSocketPath is required"},
		{"relative socket", func(c *signer.TransitConfig) { c.UnixSocketPath = "run/bao.sock" }, false, "must be absolute"},
		{"socket at 107 bytes", func(c *signer.TransitConfig) { c.UnixSocketPath = "/" + strings.Repeat("s", 106) }, true, ""},
		{"socket at 108 bytes", func(c *signer.TransitConfig) { c.UnixSocketPath = "/" + strings.Repeat("s", 107) }, false, "108 bytes"},
		{"empty mount", func(c *signer.TransitConfig) { c.Mount = "" }, false, "mount"},
		{"mount at 128 bytes", func(c *signer.TransitConfig) { c.Mount = strings.Repeat("m", 128) }, true, ""},
		{"mount at 129 bytes", func(c *signer.TransitConfig) { c.Mount = strings.Repeat("m", 129) }, false, "mount"},
		{"nested mount", func(c *signer.TransitConfig) { c.Mount = "team/transit" }, false, "mount"},
		{"dotted key", func(c *signer.TransitConfig) { c.KeyName = "../sys" }, false, "keyName"},
		{"key name at 128 bytes", func(c *signer.TransitConfig) { c.KeyName = strings.Repeat("k", 128) }, true, ""},
		{"key version 0", func(c *signer.TransitConfig) { c.KeyVersion = 0 }, false, "never 0"},
		{"key version max", func(c *signer.TransitConfig) { c.KeyVersion = math.MaxInt32 }, true, ""},
		{"key version over max", func(c *signer.TransitConfig) { c.KeyVersion = math.MaxInt32 + 1 }, false, "keyVersion"},
		{"timeout 0", func(c *signer.TransitConfig) { c.Timeout = 0 }, false, "timeout"},
		{"timeout 1ms", func(c *signer.TransitConfig) { c.Timeout = time.Millisecond }, true, ""},
		{"timeout 30s", func(c *signer.TransitConfig) { c.Timeout = 30 * time.Second }, true, ""},
		{"timeout over 30s", func(c *signer.TransitConfig) { c.Timeout = 30*time.Second + time.Millisecond }, false, "timeout"},
		{"token at the limit", func(c *signer.TransitConfig) { c.Token = []byte(strings.Repeat("t", 4096)) }, true, ""},
		{"token over the limit", func(c *signer.TransitConfig) { c.Token = []byte(strings.Repeat("t", 4097)) }, false, "token must be 1 to 4096"},
		{"blank token", func(c *signer.TransitConfig) { c.Token = []byte("\n") }, false, "token must be 1 to 4096"},
		{"token with a space", func(c *signer.TransitConfig) { c.Token = []byte("hvs.a b") }, false, "printable ASCII"},
		{"no active key", func(c *signer.TransitConfig) { c.Active = nil }, false, "no active public JWK"},
		{"active key not P-256", func(c *signer.TransitConfig) { c.Active = ed }, false, "EC P-256"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			c.change(&cfg)
			err := cfg.Validate()
			s, nerr := signer.NewTransit(cfg)
			if c.ok {
				if err != nil || nerr != nil {
					t.Fatalf("refused: %v / %v", err, nerr)
				}
				s.Close()
				return
			}
			if err == nil || nerr == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
			if len(cfg.Token) > 0 && strings.Contains(err.Error(), string(cfg.Token)) {
				t.Fatalf("error leaks the token: %v", err)
			}
		})
	}
}
