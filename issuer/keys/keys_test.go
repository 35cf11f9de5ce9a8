package keys_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/issuer/keys"
)

// rfc7638Key is the RSA key of RFC 7638 §3.1, whose thumbprint the RFC gives.
const rfc7638Key = `{"kty":"RSA","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw","e":"AQAB","alg":"RS256","kid":"2011-04-29"}`

const rfc7638Thumbprint = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"

func TestThumbprintRFC7638Example(t *testing.T) {
	set, err := keys.ParsePublicSet([]json.RawMessage{json.RawMessage(rfc7638Key)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := keys.Thumbprint(&set[0])
	if err != nil {
		t.Fatal(err)
	}
	if got != rfc7638Thumbprint {
		t.Fatalf("thumbprint = %s, want %s (RFC 7638 §3.1)", got, rfc7638Thumbprint)
	}
	if _, err := keys.Thumbprint(nil); err == nil {
		t.Fatal("Thumbprint(nil) succeeded")
	}
}

func TestThumbprintOfPrivateKeyIsThatOfItsPublicHalf(t *testing.T) {
	priv, pub, err := keys.Generate(keys.AlgES256)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := keys.Thumbprint(priv)
	b, _ := keys.Thumbprint(pub)
	if a != b || a != pub.KeyID || len(a) != 43 {
		t.Fatalf("private %q, public %q, kid %q", a, b, pub.KeyID)
	}
}

// jwkJSON marshals a public key as a JWK with the given kid and alg.
func jwkJSON(t *testing.T, key any, kid, alg string) []byte {
	t.Helper()
	raw, err := json.Marshal(jose.JSONWebKey{Key: key, KeyID: kid, Algorithm: alg})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// withMember adds or replaces one member of a JSON object.
func withMember(t *testing.T, raw []byte, name string, value any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m[name] = value
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func thumb(t *testing.T, key any) string {
	t.Helper()
	tp, err := keys.Thumbprint(&jose.JSONWebKey{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

func writeFile(t *testing.T, dir, name string, data []byte, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one mentioning %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not mention %q", err, p)
		}
	}
}

func TestLoadPublic(t *testing.T) {
	dir := t.TempDir()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tp := thumb(t, &ec.PublicKey)
	good := jwkJSON(t, &ec.PublicKey, tp, "ES256")

	t.Run("kid equals thumbprint", func(t *testing.T) {
		p := writeFile(t, dir, "good.json", good, 0o644)
		k, err := keys.LoadPublic(p)
		if err != nil {
			t.Fatal(err)
		}
		if k.KeyID != tp || !k.IsPublic() {
			t.Fatalf("loaded %+v", k)
		}
		if _, err := keys.LoadActiveP256(p); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("use sig and no alg are accepted", func(t *testing.T) {
		raw := withMember(t, jwkJSON(t, &ec.PublicKey, tp, ""), "use", "sig")
		if _, err := keys.LoadPublic(writeFile(t, dir, "use.json", raw, 0o644)); err != nil {
			t.Fatal(err)
		}
	})
	cases := []struct {
		name  string
		data  []byte
		parts []string
	}{
		{"missing kid", jwkJSON(t, &ec.PublicKey, "", "ES256"), []string{`missing member "kid"`, tp}},
		{"kid not thumbprint", jwkJSON(t, &ec.PublicKey, "my-key", "ES256"), []string{`kid "my-key" is not the key's RFC 7638 thumbprint`, tp}},
		{"private member", jwkJSON(t, ec, tp, "ES256"), []string{`private-key member "d"`}},
		{"duplicate member", []byte(`{"kty":"EC","kty":"EC","crv":"P-256"}`), []string{"duplicate"}},
		{"not an object", []byte(`[1,2]`), []string{"not a JSON object"}},
		{"trailing data", append(append([]byte{}, good...), []byte(` {}`)...), []string{"invalid JSON"}},
		{"alg mismatch", jwkJSON(t, &ec.PublicKey, tp, "RS256"), []string{`"alg" is "RS256"`, "ES256"}},
		{"use enc", withMember(t, good, "use", "enc"), []string{`"use" is "enc"`}},
		{"no kty", []byte(`{"crv":"P-256","x":"a","y":"b"}`), []string{`missing member "kty"`}},
		{"oversize", append(good[:len(good)-1], []byte(`,"pad":"`+strings.Repeat("a", 64<<10)+`"}`)...), []string{"larger than 65536 bytes"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, dir, strings.ReplaceAll(c.name, " ", "-")+".json", c.data, 0o644)
			_, err := keys.LoadPublic(p)
			wantErr(t, err, append([]string{p}, c.parts...)...)
		})
	}
	t.Run("directory", func(t *testing.T) {
		_, err := keys.LoadPublic(dir)
		wantErr(t, err, "not a regular file")
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := keys.LoadPublic(filepath.Join(dir, "absent.json"))
		wantErr(t, err, "absent.json", "no such file")
	})
}

func TestLoadActiveP256RefusesOtherKinds(t *testing.T) {
	dir := t.TempDir()
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	p := writeFile(t, dir, "ed.json", jwkJSON(t, edPub, thumb(t, edPub), "EdDSA"), 0o644)
	if _, err := keys.LoadPublic(p); err != nil {
		t.Fatalf("an Ed25519 key is a valid public JWK: %v", err)
	}
	_, err := keys.LoadActiveP256(p)
	wantErr(t, err, "must be EC P-256")

	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p = writeFile(t, dir, "p384.json", jwkJSON(t, &p384.PublicKey, thumb(t, &p384.PublicKey), ""), 0o644)
	_, err = keys.LoadActiveP256(p)
	wantErr(t, err, "EC curve P-384 is not accepted")
}

func TestParsePublicSet(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	edPub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	rsa2048, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsa2040, err := rsa.GenerateKey(rand.Reader, 2040)
	if err != nil {
		t.Fatal(err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)

	ecRaw := jwkJSON(t, &ec.PublicKey, "", "ES256")
	edRaw := jwkJSON(t, edPub, "ed", "EdDSA")
	rsaRaw := jwkJSON(t, &rsa2048.PublicKey, "rsa", "RS256")

	t.Run("accepts the three kinds, kid optional", func(t *testing.T) {
		set, err := keys.ParsePublicSet([]json.RawMessage{ecRaw, edRaw, rsaRaw})
		if err != nil {
			t.Fatal(err)
		}
		if len(set) != 3 || set[0].KeyID != "" || set[1].KeyID != "ed" {
			t.Fatalf("set = %+v", set)
		}
		for i := range set {
			alg, err := keys.AlgorithmFor(&set[i])
			if err != nil || alg != []string{"ES256", "EdDSA", "RS256"}[i] {
				t.Fatalf("keys[%d]: alg %q, %v", i, alg, err)
			}
		}
	})
	t.Run("at most eight", func(t *testing.T) {
		var eight []json.RawMessage
		for range 8 {
			k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			eight = append(eight, jwkJSON(t, &k.PublicKey, "", ""))
		}
		if _, err := keys.ParsePublicSet(eight); err != nil {
			t.Fatalf("8 keys: %v", err)
		}
		_, err := keys.ParsePublicSet(append(eight, ecRaw))
		wantErr(t, err, "9 keys given, at most 8")
		_, err = keys.ParsePublicSet(nil)
		wantErr(t, err, "at least one public key")
	})
	for _, member := range []string{"d", "p", "q", "dp", "dq", "qi", "k", "oth"} {
		t.Run("refuses private member "+member, func(t *testing.T) {
			bad := withMember(t, rsaRaw, member, "AQAB")
			_, err := keys.ParsePublicSet([]json.RawMessage{ecRaw, bad})
			wantErr(t, err, "keys[1]", `private-key member "`+member+`"`)
		})
	}
	refused := []struct {
		name  string
		raw   []byte
		parts []string
	}{
		{"RSA below 2048 bits", jwkJSON(t, &rsa2040.PublicKey, "", "RS256"), []string{"2040 bits is too small", "2048"}},
		{"P-384", jwkJSON(t, &p384.PublicKey, "", ""), []string{"P-384 is not accepted"}},
		{"symmetric key", []byte(`{"kty":"oct","k":"c2VjcmV0"}`), []string{`private-key member "k"`}},
		{"private Ed25519", jwkJSON(t, edPriv, "", ""), []string{`private-key member "d"`}},
		{"X25519", []byte(`{"kty":"OKP","crv":"X25519","x":"hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo"}`), []string{"not a usable JWK"}},
		{"EC key claiming EdDSA", jwkJSON(t, &ec.PublicKey, "", "EdDSA"), []string{`"alg" is "EdDSA" but the key is for ES256`}},
		{"RSA key claiming ES256", withMember(t, rsaRaw, "alg", "ES256"), []string{`"alg" is "ES256" but the key is for RS256`}},
		{"duplicate member", []byte(`{"kty":"EC","crv":"P-256","crv":"P-256"}`), []string{"duplicate"}},
		{"not a key", []byte(`"key"`), []string{"not a JSON object"}},
	}
	for _, c := range refused {
		t.Run("refuses "+c.name, func(t *testing.T) {
			_, err := keys.ParsePublicSet([]json.RawMessage{c.raw})
			wantErr(t, err, append([]string{"keys[0]"}, c.parts...)...)
		})
	}
	t.Run("refuses a repeated kid", func(t *testing.T) {
		other := jwkJSON(t, &rsa2048.PublicKey, "ed", "")
		_, err := keys.ParsePublicSet([]json.RawMessage{edRaw, other})
		wantErr(t, err, `keys[1]: kid "ed" is already used by keys[0]`)
	})
}

func TestGenerate(t *testing.T) {
	for _, alg := range []string{"ES256", "EdDSA", "RS256"} {
		t.Run(alg, func(t *testing.T) {
			priv, pub, err := keys.Generate(alg)
			if err != nil {
				t.Fatal(err)
			}
			if !pub.IsPublic() || priv.IsPublic() {
				t.Fatal("public/private halves mixed up")
			}
			tp, _ := keys.Thumbprint(pub)
			if pub.KeyID != tp || priv.KeyID != tp || pub.Algorithm != alg || pub.Use != "sig" {
				t.Fatalf("public %+v", pub)
			}
			raw, _ := json.Marshal(pub)
			set, err := keys.ParsePublicSet([]json.RawMessage{raw})
			if err != nil {
				t.Fatalf("generated public key refused as a client key: %v", err)
			}
			// The private half signs; the public half verifies.
			s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: priv}, nil)
			if err != nil {
				t.Fatal(err)
			}
			jws, err := s.Sign([]byte("payload"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := jws.Verify(&set[0]); err != nil {
				t.Fatalf("verify: %v", err)
			}
		})
	}
	_, _, err := keys.Generate("HS256")
	wantErr(t, err, `"HS256" is not one of ES256, EdDSA, RS256`)
	if keys.GeneratedRSABits < keys.MinRSABits {
		t.Fatal("generated RSA keys would be refused")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
