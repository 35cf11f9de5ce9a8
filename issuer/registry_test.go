package issuer

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/strictyaml"
	"github.com/registrum/registrum/issuer/keys"
)

// clientKeyYAML returns a public JWK as a YAML flow mapping.
func clientKeyYAML(t *testing.T) string {
	t.Helper()
	_, pub, err := keys.Generate("ES256")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := pub.MarshalJSON()
	return string(raw)
}

func loadWithClient(t *testing.T, cfg *Config, name, body string) (*Registry, error) {
	t.Helper()
	dir := cfg.ClientsDirectory
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.Remove(filepath.Join(dir, e.Name()))
	}
	writeFile(t, dir, name, body, 0o644)
	return LoadRegistry(cfg)
}

func TestRegistrationRules(t *testing.T) {
	dir, text := devConfig(t)
	cfg, err := loadVariant(t, dir, text)
	if err != nil {
		t.Fatal(err)
	}
	key := clientKeyYAML(t)
	keysBlock := "keys:\n  - " + key + "\n"
	std := func(extra string) string {
		return "clientId: c1\nprincipal: p1\nauthorization:\n  scopes: [read]\n" + extra + keysBlock
	}
	ev := func(extra string) string {
		return "clientId: c1\nprincipal: p1\nevidenceAudience: https://ev.example\nrequesterTags: [t1]\n" + extra + keysBlock
	}
	many := func(n int, f func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = f(i)
		}
		return strings.Join(parts, ", ")
	}
	claims := func(n int) string {
		var b strings.Builder
		b.WriteString("  claims:\n")
		for i := range n {
			fmt.Fprintf(&b, "    c%d: v\n", i)
		}
		return b.String()
	}
	eightKeys := "keys:\n"
	for range 8 {
		eightKeys += "  - " + clientKeyYAML(t) + "\n"
	}
	privKey, _, _ := keys.Generate("ES256")
	privRaw, _ := privKey.MarshalJSON()

	cases := []struct {
		name  string
		body  string
		field string // "" with rule "" = accepted
		rule  string
	}{
		{"standard", std(""), "", ""},
		{"evidence", ev(""), "", ""},
		{"neither profile", "clientId: c1\nprincipal: p1\n" + keysBlock, "", "must select one profile"},
		{"both profiles", "clientId: c1\nprincipal: p1\nevidenceAudience: https://ev.example\nrequesterTags: [t1]\nauthorization:\n  scopes: [read]\n" + keysBlock, "authorization", "exactly one profile"},
		{"evidenceAudience without tags", "clientId: c1\nprincipal: p1\nevidenceAudience: https://ev.example\n" + keysBlock, "requesterTags", "is required"},
		{"tags without evidenceAudience", "clientId: c1\nprincipal: p1\nrequesterTags: [t1]\n" + keysBlock, "evidenceAudience", "is required"},
		{"unknown field", std("color: blue\n"), "", "unknown field"},
		{"missing clientId", "principal: p1\nauthorization:\n  scopes: [read]\n" + keysBlock, "clientId", "is required"},
		{"missing principal", "clientId: c1\nauthorization:\n  scopes: [read]\n" + keysBlock, "principal", "is required"},
		{"principal 512 bytes", strings.Replace(std(""), "principal: p1", "principal: "+strings.Repeat("p", 512), 1), "", ""},
		{"principal 513 bytes", strings.Replace(std(""), "principal: p1", "principal: "+strings.Repeat("p", 513), 1), "principal", "1 to 512 bytes"},
		{"no tags", strings.Replace(ev(""), "[t1]", "[]", 1), "requesterTags", "1 to 32"},
		{"32 tags", strings.Replace(ev(""), "[t1]", "["+many(32, func(i int) string { return fmt.Sprint("t", i) })+"]", 1), "", ""},
		{"33 tags", strings.Replace(ev(""), "[t1]", "["+many(33, func(i int) string { return fmt.Sprint("t", i) })+"]", 1), "requesterTags", "1 to 32"},
		{"duplicate tag", strings.Replace(ev(""), "[t1]", "[t1, t1]", 1), "requesterTags[1]", "twice"},
		{"grant", ev("grant:\n  id: g1\n  authority: a1\n"), "", ""},
		{"grant without authority", ev("grant:\n  id: g1\n"), "grant", "both id and authority"},
		{"no scopes", strings.Replace(std(""), "[read]", "[]", 1), "authorization.scopes", "1 to 64"},
		{"64 scopes", strings.Replace(std(""), "[read]", "["+many(64, func(i int) string { return fmt.Sprint("s", i) })+"]", 1), "", ""},
		{"65 scopes", strings.Replace(std(""), "[read]", "["+many(65, func(i int) string { return fmt.Sprint("s", i) })+"]", 1), "authorization.scopes", "1 to 64"},
		{"duplicate scope", strings.Replace(std(""), "[read]", "[read, read]", 1), "authorization.scopes[1]", "twice"},
		{"scope 256 bytes", strings.Replace(std(""), "[read]", "["+strings.Repeat("s", 256)+"]", 1), "", ""},
		{"scope 257 bytes", strings.Replace(std(""), "[read]", "["+strings.Repeat("s", 257)+"]", 1), "authorization.scopes[0]", "scope token"},
		{"scope with space", strings.Replace(std(""), "[read]", "[\"a b\"]", 1), "authorization.scopes[0]", "scope token"},
		{"scope with quote", strings.Replace(std(""), "[read]", "['a\"b']", 1), "authorization.scopes[0]", "scope token"},
		{"32 claims", std(claims(32)), "", ""},
		{"33 claims", std(claims(33)), "authorization.claims", "at most 32"},
		{"reserved claim sub", std("  claims:\n    sub: x\n"), "authorization.claims.sub", "reserved"},
		{"reserved claim scope", std("  claims:\n    scope: x\n"), "authorization.claims.scope", "reserved"},
		{"reserved claim client_id", std("  claims:\n    client_id: x\n"), "authorization.claims.client_id", "reserved"},
		{"claim reuses evidence name", std("  claims:\n    grant_id: x\n"), "authorization.claims.grant_id", "evidence claim name"},
		{"claim name 128 bytes", std("  claims:\n    " + strings.Repeat("n", 128) + ": v\n"), "", ""},
		{"claim name 129 bytes", std("  claims:\n    " + strings.Repeat("n", 129) + ": v\n"), "authorization.claims." + strings.Repeat("n", 129), "1 to 128"},
		{"claim value 512 bytes", std("  claims:\n    purpose: " + strings.Repeat("v", 512) + "\n"), "", ""},
		{"claim value 513 bytes", std("  claims:\n    purpose: " + strings.Repeat("v", 513) + "\n"), "authorization.claims.purpose", "at most 512"},
		{"claim value empty", std("  claims:\n    purpose: \"\"\n"), "authorization.claims.purpose", "non-empty"},
		{"claim value number", std("  claims:\n    purpose: 3\n"), "", "value must be a string"},
		{"no keys", "clientId: c1\nprincipal: p1\nauthorization:\n  scopes: [read]\n", "keys", "at least one"},
		{"8 keys", "clientId: c1\nprincipal: p1\nauthorization:\n  scopes: [read]\n" + eightKeys, "", ""},
		{"9 keys", "clientId: c1\nprincipal: p1\nauthorization:\n  scopes: [read]\n" + eightKeys + "  - " + key + "\n", "keys", "at most 8"},
		{"private key", "clientId: c1\nprincipal: p1\nauthorization:\n  scopes: [read]\nkeys:\n  - " + string(privRaw) + "\n", "keys", "private"},
		{"symmetric key", "clientId: c1\nprincipal: p1\nauthorization:\n  scopes: [read]\nkeys:\n  - {\"kty\":\"oct\",\"k\":\"c2VjcmV0\"}\n", "keys", "private"},
		{"delegation", ev("delegation:\n  actors: [a1]\n  subjectClaims:\n    id: subject.id\n"), "", ""},
		{"delegation any actor", ev("delegation:\n  subjectClaims:\n    id: subject.id\n"), "", ""},
		{"delegation empty actors", ev("delegation:\n  actors: []\n  subjectClaims:\n    id: subject.id\n"), "delegation.actors", "1 to 64"},
		{"delegation no subject claims", ev("delegation:\n  actors: [a1]\n  subjectClaims: {}\n"), "delegation.subjectClaims", "1 to 16"},
		{"delegation reserved path", ev("delegation:\n  subjectClaims:\n    id: sub.id\n"), "delegation.subjectClaims.id", "writes itself"},
		{"delegation authority path", ev("delegation:\n  subjectClaims:\n    id: act\n"), "delegation.subjectClaims.id", "writes itself"},
		{"delegation colliding paths", ev("delegation:\n  subjectClaims:\n    id: subject\n    kind: subject.kind\n"), "delegation.subjectClaims.kind", "collides"},
		{"delegation bad field", ev("delegation:\n  subjectClaims:\n    Id: subject.id\n"), "delegation.subjectClaims.Id", "subject field names"},
		{"delegation bad path", ev("delegation:\n  subjectClaims:\n    id: subject..id\n"), "delegation.subjectClaims.id", "claim path"},
		{"evidence on standard client", std("") + "grant:\n  id: g\n  authority: a\n", "authorization", "exactly one profile"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadWithClient(t, cfg, "c1.yaml", c.body)
			switch {
			case c.field == "" && c.rule == "":
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
			case c.field == "":
				if err == nil || !strings.Contains(err.Error(), c.rule) || !strings.Contains(err.Error(), "c1.yaml") {
					t.Fatalf("error %v, want %q naming c1.yaml", err, c.rule)
				}
			default:
				expectConfigError(t, err, c.field, c.rule)
			}
		})
	}
}

func TestRegistryCrossChecks(t *testing.T) {
	dir, text := devConfig(t)
	key := clientKeyYAML(t)
	t.Run("duplicate client ids", func(t *testing.T) {
		cfg, _ := loadVariant(t, dir, text)
		writeFile(t, cfg.ClientsDirectory, "z-copy.yaml", "clientId: demo-standard\nprincipal: p\nauthorization:\n  scopes: [a]\nkeys:\n  - "+key+"\n", 0o644)
		defer os.Remove(filepath.Join(cfg.ClientsDirectory, "z-copy.yaml"))
		_, err := LoadRegistry(cfg)
		expectConfigError(t, err, "clientId", "duplicate client id")
	})
	t.Run("only .yaml files count", func(t *testing.T) {
		cfg, _ := loadVariant(t, dir, text)
		writeFile(t, cfg.ClientsDirectory, "notes.txt", "not yaml", 0o644)
		writeFile(t, cfg.ClientsDirectory, "other.yml", "not: [valid", 0o644)
		reg, err := LoadRegistry(cfg)
		if err != nil || reg.Len() != 2 {
			t.Fatalf("%v, %d clients", err, reg.Len())
		}
	})
	t.Run("standard client needs lifetime at most 900", func(t *testing.T) {
		cfg, err := loadVariant(t, dir, replaceOnce(t, text, "lifetimeSeconds: 900", "lifetimeSeconds: 901"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = LoadRegistry(cfg)
		expectConfigError(t, err, "authorization", "at most 900")
	})
	t.Run("evidence client needs claim names", func(t *testing.T) {
		noClaims := text[:strings.Index(text, "  claims:\n")] + text[strings.Index(text, "clientAssertion:"):]
		cfg, err := loadVariant(t, dir, noClaims)
		if err != nil {
			t.Fatal(err)
		}
		_, err = LoadRegistry(cfg)
		expectConfigError(t, err, "evidenceAudience", "accessTokens.claims")
	})
	t.Run("delegation needs actor claim", func(t *testing.T) {
		cfg, err := loadVariant(t, dir, replaceOnce(t, text, "    actor: act\n", ""))
		if err != nil {
			t.Fatal(err)
		}
		_, err = LoadRegistry(cfg)
		expectConfigError(t, err, "delegation", "accessTokens.claims.actor")
	})
	t.Run("largest signed response above 16 KiB", func(t *testing.T) {
		cfg, _ := loadVariant(t, dir, text)
		body := func(n int) string {
			var b strings.Builder
			b.WriteString("clientId: big\nprincipal: p\nauthorization:\n  scopes: [a]\n  claims:\n")
			for i := range 32 {
				fmt.Fprintf(&b, "    c%02d: %s\n", i, strings.Repeat("v", n))
			}
			b.WriteString("keys:\n  - " + key + "\n")
			return b.String()
		}
		// 32 claims of 512 bytes: about 22 KiB once base64url encoded: refused.
		writeFile(t, cfg.ClientsDirectory, "big.yaml", body(512), 0o644)
		defer os.Remove(filepath.Join(cfg.ClientsDirectory, "big.yaml"))
		_, err := LoadRegistry(cfg)
		expectConfigError(t, err, "authorization", "largest possible signed token response")
		// Find the boundary: the largest value width still accepted gives a
		// projection of at most 16384 bytes, one more is refused.
		lo := 0
		for n := 300; n <= 512; n++ {
			writeFile(t, cfg.ClientsDirectory, "big.yaml", body(n), 0o644)
			if _, err := LoadRegistry(cfg); err != nil {
				break
			}
			lo = n
		}
		if lo == 0 || lo == 512 {
			t.Fatalf("no boundary found (last accepted width %d)", lo)
		}
		writeFile(t, cfg.ClientsDirectory, "big.yaml", body(lo), 0o644)
		reg, err := LoadRegistry(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := reg.Client("big")
		if n, _ := largestStandardResponse(cfg, c); n > maximumSignedResponseBytes {
			t.Fatalf("accepted projection %d bytes", n)
		}
	})
}

func TestReloadAndReadiness(t *testing.T) {
	d := startDeployment(t, nil)
	if r := d.get("/ready"); r.status != 200 {
		t.Fatalf("ready %d", r.status)
	}
	clients := d.cfg.ClientsDirectory
	stdFile := filepath.Join(clients, DevStandardClientID+".yaml")
	good, _ := os.ReadFile(stdFile)

	// A broken file: the reload fails and the loaded registry keeps serving.
	writeFile(t, clients, "broken.yaml", "clientId: x\nprincipal: p\n", 0o644)
	if err := d.srv.Reload(); err == nil || !strings.Contains(err.Error(), "broken.yaml") {
		t.Fatalf("reload: %v", err)
	}
	d.issue(DevStandardClientID, nil)
	os.Remove(filepath.Join(clients, "broken.yaml"))

	// A new client appears after a good reload.
	newKey, newPub, _ := keys.Generate("ES256")
	pub, _ := newPub.MarshalJSON()
	writeFile(t, clients, "late.yaml", "clientId: late\nprincipal: late-p\nauthorization:\n  scopes: [x]\nkeys:\n  - "+string(pub)+"\n", 0o644)
	expectError(t, d.post(formBody(d.assertion("late", newKey, nil))), http.StatusUnauthorized, ErrorInvalidClient)
	if err := d.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	d.keys["late"] = newKey
	d.issue("late", nil)

	// Removing every registration empties the registry: not ready.
	for _, n := range []string{"late.yaml", DevStandardClientID + ".yaml", DevEvidenceClientID + ".yaml"} {
		os.Remove(filepath.Join(clients, n))
	}
	if err := d.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if r := d.get("/ready"); r.status != http.StatusServiceUnavailable {
		t.Fatalf("ready with no clients: %d", r.status)
	}
	if r := d.get("/health"); r.status != 200 || string(r.body) != `{"status":"ok"}` {
		t.Fatalf("health %d %s", r.status, r.body)
	}
	os.WriteFile(stdFile, good, 0o644)
	if err := d.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if r := d.get("/ready"); r.status != 200 {
		t.Fatalf("ready after restoring: %d", r.status)
	}
}

func TestStartWithoutClientsIsNotReady(t *testing.T) {
	d := startDeployment(t, func(dir string) {
		for _, id := range []string{DevStandardClientID, DevEvidenceClientID} {
			os.Remove(filepath.Join(dir, "clients", id+".yaml"))
		}
	})
	if r := d.get("/ready"); r.status != http.StatusServiceUnavailable || string(r.body) != `{"status":"not ready"}` {
		t.Fatalf("ready with no clients: %d %s", r.status, r.body)
	}
	expectError(t, d.post(formBody(d.assertion(DevStandardClientID, d.keys[DevStandardClientID], nil))), http.StatusUnauthorized, ErrorInvalidClient)
}

// FuzzRegistration feeds arbitrary documents to the registration loader: it
// must refuse with a *strictyaml.Error or accept, never panic.
func FuzzRegistration(f *testing.F) {
	f.Add("clientId: c\nprincipal: p\nauthorization:\n  scopes: [a]\nkeys:\n  - {\"kty\":\"EC\"}\n")
	f.Add("clientId: c\nprincipal: p\nevidenceAudience: https://e\nrequesterTags: [t]\ndelegation:\n  subjectClaims: {a: b.c}\n")
	f.Add("keys: [[[[]]]]\n")
	f.Add("{clientId: [1, {a: b}]}")
	dir, _ := devConfig(f)
	cfg, err := LoadConfig(filepath.Join(dir, "issuer.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	fuzzDir := f.TempDir()
	cfg.ClientsDirectory = fuzzDir
	f.Fuzz(func(t *testing.T, doc string) {
		p := filepath.Join(fuzzDir, "c.yaml")
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		reg, err := LoadRegistry(cfg)
		if err != nil {
			var ce *strictyaml.Error
			if !errors.As(err, &ce) {
				t.Fatalf("refusal %v is not a *strictyaml.Error", err)
			}
			return
		}
		if reg.Len() != 1 {
			t.Fatalf("accepted with %d clients", reg.Len())
		}
	})
}
