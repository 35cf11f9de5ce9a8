package signer_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/issuer/keys"
	"github.com/registrum/registrum/issuer/signer"
)

// newP256 returns a private JWK document and the matching active public JWK.
func newP256(t testing.TB) ([]byte, *jose.JSONWebKey) {
	t.Helper()
	priv, pub, err := keys.Generate("ES256")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(priv)
	if err != nil {
		t.Fatal(err)
	}
	return raw, pub
}

// compactJWS signs a token through s and returns it in compact form.
func compactJWS(t *testing.T, s signer.Signer, payload string) string {
	t.Helper()
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","typ":"at+jwt","kid":"` + s.KeyID() + `"}`))
	input := header + "." + base64.RawURLEncoding.EncodeToString([]byte(payload))
	sig, err := s.Sign(context.Background(), []byte(input))
	if err != nil {
		t.Fatal(err)
	}
	if len(sig) != signer.SignatureSize {
		t.Fatalf("signature is %d bytes, want 64 (R||S)", len(sig))
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// verifyWithJose checks a compact JWS with an independent JOSE implementation.
func verifyWithJose(t *testing.T, token string, active *jose.JSONWebKey, payload string) {
	t.Helper()
	jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	got, err := jws.Verify(active)
	if err != nil {
		t.Fatalf("go-jose does not verify the signature: %v", err)
	}
	if string(got) != payload {
		t.Fatalf("payload %q", got)
	}
}

func TestLocalJWKSignsES256(t *testing.T) {
	priv, active := newP256(t)
	s, err := signer.NewLocalJWK(priv, active)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.KeyID() != active.KeyID {
		t.Fatalf("KeyID %q, want %q", s.KeyID(), active.KeyID)
	}
	if err := s.SelfTest(context.Background()); err != nil {
		t.Fatal(err)
	}
	token := compactJWS(t, s, `{"sub":"a"}`)
	verifyWithJose(t, token, active, `{"sub":"a"}`)

	// ECDSA signatures are randomized; each still verifies.
	a, _ := s.Sign(context.Background(), []byte("x.y"))
	b, _ := s.Sign(context.Background(), []byte("x.y"))
	if string(a) == string(b) {
		t.Fatal("two signatures are identical")
	}
	if err := signer.Verify(active, []byte("x.y"), a); err != nil {
		t.Fatal(err)
	}
	if err := signer.Verify(active, []byte("x.z"), a); !errors.Is(err, signer.ErrSignatureInvalid) {
		t.Fatalf("a signature over other input verified: %v", err)
	}
}

func TestLocalJWKInputLimits(t *testing.T) {
	priv, active := newP256(t)
	s, err := signer.NewLocalJWK(priv, active)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Sign(ctx, nil); err == nil {
		t.Fatal("empty input signed")
	}
	if _, err := s.Sign(ctx, make([]byte, signer.MaxSigningInput)); err != nil {
		t.Fatalf("input at the limit: %v", err)
	}
	if _, err := s.Sign(ctx, make([]byte, signer.MaxSigningInput+1)); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("input over the limit: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Sign(cancelled, []byte("a.b")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
	s.Close()
	if _, err := s.Sign(ctx, []byte("a.b")); err == nil {
		t.Fatal("a closed signer signed")
	}
}

func TestLocalJWKRefusesKeysThatAreNotTheActiveKey(t *testing.T) {
	priv, active := newP256(t)
	other, _ := newP256(t)

	var doc map[string]any
	json.Unmarshal(priv, &doc)
	dValue := doc["d"].(string)

	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384Raw, _ := json.Marshal(jose.JSONWebKey{Key: p384})
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	edRaw, _ := json.Marshal(jose.JSONWebKey{Key: edPriv})
	publicOnly, _ := json.Marshal(active)

	// A document whose d belongs to another key but whose x/y are the active key's.
	var otherDoc map[string]any
	json.Unmarshal(other, &otherDoc)
	forged := map[string]any{}
	for k, v := range doc {
		forged[k] = v
	}
	forged["d"] = otherDoc["d"]
	forgedRaw, _ := json.Marshal(forged)

	// Documents whose d is no P-256 scalar at all: zero, and the group's
	// order n (one past the largest).
	outOfRange := func(d []byte) []byte {
		m := map[string]any{}
		for k, v := range doc {
			m[k] = v
		}
		m["d"] = base64.RawURLEncoding.EncodeToString(d)
		raw, _ := json.Marshal(m)
		return raw
	}
	zeroRaw := outOfRange(make([]byte, 32))
	orderRaw := outOfRange(elliptic.P256().Params().N.FillBytes(make([]byte, 32)))

	withAlg := map[string]any{}
	for k, v := range doc {
		withAlg[k] = v
	}
	withAlg["alg"] = "ES384"
	withAlgRaw, _ := json.Marshal(withAlg)

	edPubJWK := &jose.JSONWebKey{Key: edPriv.Public(), KeyID: "x"}
	cases := []struct {
		name   string
		raw    []byte
		active *jose.JSONWebKey
		want   string
	}{
		{"another P-256 key", other, active, "does not match the active public JWK"},
		{"P-384 key", p384Raw, active, "curve P-384"},
		{"Ed25519 key", edRaw, active, "must be an EC P-256 private key"},
		{"public key only", publicOnly, active, "an EC public key"},
		{"not JSON", []byte("not json " + dValue), active, "not a usable JWK"},
		{"d of another key", forgedRaw, active, "does not belong to the key's x and y"},
		{"d zero", zeroRaw, active, "not a valid P-256 key"},
		{"d the group order", orderRaw, active, "not a valid P-256 key"},
		{"alg other than ES256", withAlgRaw, active, `alg "ES384"`},
		{"no active key", priv, nil, "no active public JWK"},
		{"active key not P-256", priv, edPubJWK, "must be an EC P-256 public key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := signer.NewLocalJWK(c.raw, c.active)
			if err == nil {
				s.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
			if strings.Contains(err.Error(), dValue) || strings.Contains(err.Error(), otherDoc["d"].(string)) {
				t.Fatalf("error leaks private key bytes: %v", err)
			}
		})
	}
}
