package issuer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/issuer/keys"
)

func testAuthenticator(t *testing.T) (*authenticator, *Registry, *deployment) {
	t.Helper()
	d := startDeployment(t, nil)
	a, err := newAuthenticator(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, d.srv.Registry(), d
}

func TestUnknownClientCostsOneVerification(t *testing.T) {
	a, reg, d := testAuthenticator(t)
	stranger, _, _ := keys.Generate("ES256")
	for name, c := range map[string]struct {
		id  string
		key *jose.JSONWebKey
	}{
		"unknown client": {"nobody", stranger},
		"bad signature":  {DevStandardClientID, stranger},
		"good":           {DevStandardClientID, d.keys[DevStandardClientID]},
	} {
		before := a.verifications.Load()
		a.authenticate(reg, d.assertion(c.id, c.key, nil), time.Now())
		if n := a.verifications.Load() - before; n != 1 {
			t.Errorf("%s: %d signature verifications, want 1", name, n)
		}
	}
	// A kid naming no key of the client also spends one verification.
	noKid := *d.keys[DevStandardClientID]
	noKid.KeyID = "other-kid"
	before := a.verifications.Load()
	if _, _, err := a.authenticate(reg, d.assertion(DevStandardClientID, &noKid, nil), time.Now()); err == nil {
		t.Fatal("kid of no registered key accepted")
	}
	if n := a.verifications.Load() - before; n != 1 {
		t.Errorf("unknown kid: %d verifications", n)
	}
}

func TestReplayWindowOutlivesSkew(t *testing.T) {
	a, reg, d := testAuthenticator(t)
	now := time.Now()
	as := d.assertion(DevStandardClientID, d.keys[DevStandardClientID], map[string]any{"iat": now.Unix(), "exp": now.Unix() + 60})
	if _, _, err := a.authenticate(reg, as, now); err != nil {
		t.Fatal(err)
	}
	// Replayed just before exp + skew: refused as already used.
	_, _, err := a.authenticate(reg, as, now.Add(60*time.Second+ClockSkew-time.Second))
	if err == nil || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("replay inside the window: %v", err)
	}
	// At exp + skew it is expired (and no longer in the cache).
	_, _, err = a.authenticate(reg, as, now.Add(60*time.Second+ClockSkew))
	if err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("replay after the window: %v", err)
	}
	// The same jti from another client is its own entry.
	jti := "shared-jti"
	for _, id := range []string{DevStandardClientID, DevEvidenceClientID} {
		if _, _, err := a.authenticate(reg, d.assertion(id, d.keys[id], map[string]any{"jti": jti}), time.Now()); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

func FuzzParseTokenForm(f *testing.F) {
	f.Add("grant_type=client_credentials&client_assertion_type=x&client_assertion=y")
	f.Add("a=%zz&&grant_type=&grant_type=")
	f.Fuzz(func(t *testing.T, body string) {
		form, err := parseTokenForm(body)
		if err == nil && form == nil {
			t.Fatal("nil form without error")
		}
	})
}

func FuzzAuthenticate(f *testing.F) {
	f.Add("eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJkZW1vLXN0YW5kYXJkIn0.AAAA")
	f.Add("a.b.c")
	f.Add("")
	d := startDeployment(f, nil)
	f.Fuzz(func(t *testing.T, assertion string) {
		a, err := newAuthenticator(d.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if c, _, err := a.authenticate(d.srv.Registry(), assertion, time.Now()); err == nil || c != nil {
			t.Fatalf("random assertion accepted: %q", assertion)
		}
	})
}

func TestDuplicateMembersRefused(t *testing.T) {
	a, reg, d := testAuthenticator(t)
	key := d.keys[DevStandardClientID]
	now := time.Now().Unix()
	payload := fmt.Sprintf(`{"iss":%q,"sub":%q,"aud":%q,"jti":"dup-1","iat":%d,"exp":%d,"sub":"x"}`,
		DevStandardClientID, DevStandardClientID, d.cfg.ClientAssertion.Audience, now, now+60)
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key.Key}, (&jose.SignerOptions{}).WithHeader("kid", key.KeyID))
	if err != nil {
		t.Fatal(err)
	}
	jws, _ := s.Sign([]byte(payload))
	compact, _ := jws.CompactSerialize()
	if _, _, err := a.authenticate(reg, compact, time.Now()); err == nil || !strings.Contains(err.Error(), "repeated") {
		t.Fatalf("duplicate sub: %v", err)
	}
	for _, doc := range []string{`{"a":{"b":1,"b":2}}`, `{"a":[{"c":1,"c":1}]}`} {
		if checkNoDuplicateMembers([]byte(doc)) == nil {
			t.Errorf("%s accepted", doc)
		}
	}
	if err := checkNoDuplicateMembers([]byte(`{"a":{"b":1},"b":[{"a":1}]}`)); err != nil {
		t.Errorf("distinct members refused: %v", err)
	}
}
