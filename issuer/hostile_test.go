package issuer

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/bombtest"
)

// TestLoadConfigRefusesAnAliasBomb: the config of `issuer serve` (and of
// the issuer `dev` writes and loads) is refused quickly with bounded memory
// when it is a "billion laughs" document, naming the file.
func TestLoadConfigRefusesAnAliasBomb(t *testing.T) {
	dir, _ := devConfig(t)
	p := filepath.Join(dir, "issuer.yaml")
	if err := os.WriteFile(p, []byte(bombtest.AliasBomb()), 0o644); err != nil {
		t.Fatal(err)
	}
	bombtest.Refuses(t, func() error {
		_, err := LoadConfig(p)
		return err
	}, "/issuer.yaml:", "expands to more than")
}

// TestLoadRegistryRefusesAnAliasBomb: a client registration file that is a
// "billion laughs" document is refused quickly with bounded memory, naming
// the file.
func TestLoadRegistryRefusesAnAliasBomb(t *testing.T) {
	dir, text := devConfig(t)
	cfg, err := loadVariant(t, dir, text)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cfg.ClientsDirectory, "bomb.yaml", bombtest.AliasBomb(), 0o644)
	bombtest.Refuses(t, func() error {
		_, err := LoadRegistry(cfg)
		return err
	}, "/bomb.yaml:", "expands to more than")
}

// TestReloadRefusesAnAliasBombAndKeepsServing: a "billion laughs" client
// file dropped in before a reload (SIGHUP) is refused quickly with bounded
// memory, and the registry already loaded keeps being served.
func TestReloadRefusesAnAliasBombAndKeepsServing(t *testing.T) {
	d := startDeployment(t, nil)
	before := d.srv.Registry()
	writeFile(t, d.cfg.ClientsDirectory, "bomb.yaml", bombtest.AliasBomb(), 0o644)
	a := bombtest.Refuses(t, d.srv.Reload, "/bomb.yaml:", "expands to more than")
	if !a.Child {
		return
	}
	// In the child, after the refused reload: the old registry is served.
	if d.srv.Registry() != before {
		t.Fatal("the refused reload replaced the registry")
	}
	d.issue(DevStandardClientID, nil)
	if r := d.get("/ready"); r.status != 200 {
		t.Fatalf("ready %d after a refused reload", r.status)
	}
}

// TestConfigNumbersAreStrict: a port given as a string or a fraction, and a
// negative limit, are refused naming the key and the file, never coerced.
func TestConfigNumbersAreStrict(t *testing.T) {
	dir, base := devConfig(t)
	cases := []struct {
		name, old, new, field string
	}{
		{"port as a string", "  port: 18080\n", "  port: \"18080\"\n", "listener.port"},
		{"fractional port", "  port: 18080\n", "  port: 3.5\n", "listener.port"},
		{"negative port", "  port: 18080\n", "  port: -1\n", "listener.port"},
		{"negative request bytes", "  port: 18080\n", "  port: 18080\n  maximumRequestBytes: -1\n", "listener.maximumRequestBytes"},
		{"fractional request timeout", "  port: 18080\n", "  port: 18080\n  requestTimeoutMilliseconds: 2.5\n", "listener.requestTimeoutMilliseconds"},
		{"negative lifetime", "lifetimeSeconds: 900", "lifetimeSeconds: -900", "accessTokens.lifetimeSeconds"},
		{"lifetime as a string", "lifetimeSeconds: 900", "lifetimeSeconds: '900'", "accessTokens.lifetimeSeconds"},
		{"negative audit file bytes", "maximumFileBytes: 67108864", "maximumFileBytes: -67108864", "audit.maximumFileBytes"},
		{"fractional hash key version", "hashKeyVersion: 1", "hashKeyVersion: 1.5", "audit.hashKeyVersion"},
		{"negative replay cache", "  algorithms: [ES256, EdDSA, RS256]\n", "  algorithms: [ES256, EdDSA, RS256]\n  replayCacheEntries: -1\n", "clientAssertion.replayCacheEntries"},
		{"version as a string", "version: 1\n", "version: \"1\"\n", "version"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadVariant(t, dir, replaceOnce(t, base, c.old, c.new))
			expectConfigError(t, err, c.field, "")
			if !strings.Contains(err.Error(), filepath.Join(dir, "issuer.yaml")+":") {
				t.Fatalf("error %q does not name the file", err)
			}
		})
	}
}

// TestRegistrationNumbersAreStrict: a registration's values are strings
// where the format says so; a number given for one is refused at its key.
func TestRegistrationNumbersAreStrict(t *testing.T) {
	dir, text := devConfig(t)
	cfg, err := loadVariant(t, dir, text)
	if err != nil {
		t.Fatal(err)
	}
	_, err = loadWithClient(t, cfg, "n.yaml", "clientId: c\nprincipal: p\nauthorization:\n  scopes: [a]\n  claims: {level: 3.5}\nkeys:\n  - "+clientKeyYAML(t)+"\n")
	if err == nil || !strings.Contains(err.Error(), "/n.yaml:") || !strings.Contains(err.Error(), "must be a string") {
		t.Fatalf("err = %v", err)
	}
}

// goTerms matches words of Go's type system, which a refusal of a config or
// a registration must never use.
var goTerms = regexp.MustCompile(`interface \{\}|struct|uint|int\d|float\d|\bGo\b|unmarshal|\[\]|map\[`)

// TestConfigWrongKindsSpeakOfKeysNotGoTypes: an issuer config key holding
// the wrong kind of value is refused naming the file, the line, the key and
// the kind it must hold, never a Go type.
func TestConfigWrongKindsSpeakOfKeysNotGoTypes(t *testing.T) {
	dir, base := devConfig(t)
	p := filepath.Join(dir, "issuer.yaml")
	cases := []struct {
		name, old, new, want string
	}{
		{"list for the listener", "listener:\n  address: \"127.0.0.1\"\n  port: 18080\n", "listener: [1, 2]\n", ":5: listener: must be a mapping, not a list"},
		{"list for the port", "  port: 18080\n", "  port: [1, 2]\n", ":7: listener.port: must be an integer, not a list"},
		{"string for the audiences", `audiences: ["urn:registrum:dev"]`, "audiences: urn:registrum:dev", ":23: accessTokens.audiences: must be a list of strings, not a string"},
		{"mapping for the issuer", `issuer: "https://localhost:18080"`, "issuer: {a: b}", ":4: issuer: must be a string, not a mapping"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadVariant(t, dir, replaceOnce(t, base, c.old, c.new))
			if err == nil || !strings.Contains(err.Error(), p+c.want) {
				t.Fatalf("err = %v, want %q", err, p+c.want)
			}
			if goTerms.MatchString(err.Error()) {
				t.Fatalf("err %q speaks of Go types", err)
			}
		})
	}
}

// TestRegistrationWrongKindsSpeakOfKeysNotGoTypes: a client registration
// key holding the wrong kind of value is refused naming the file, the line,
// the key and the kind it must hold, never a Go type.
func TestRegistrationWrongKindsSpeakOfKeysNotGoTypes(t *testing.T) {
	dir, text := devConfig(t)
	cfg, err := loadVariant(t, dir, text)
	if err != nil {
		t.Fatal(err)
	}
	key := "keys:\n  - " + clientKeyYAML(t) + "\n"
	cases := []struct {
		name, doc, want string
	}{
		{"string for the scopes", "clientId: c\nprincipal: p\nauthorization:\n  scopes: a\n" + key, "/w.yaml:4: authorization.scopes: must be a list of strings, not a string"},
		{"list for the principal", "clientId: c\nprincipal: [p]\nauthorization:\n  scopes: [a]\n" + key, "/w.yaml:2: principal: must be a string, not a list"},
		{"list for authorization", "clientId: c\nprincipal: p\nauthorization: [a]\n" + key, "/w.yaml:3: authorization: must be a mapping, not a list"},
		{"mapping for the keys", "clientId: c\nprincipal: p\nauthorization:\n  scopes: [a]\nkeys: {a: b}\n", "/w.yaml:5: keys: must be a list of mappings, not a mapping"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadWithClient(t, cfg, "w.yaml", c.doc)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			if goTerms.MatchString(err.Error()) {
				t.Fatalf("err %q speaks of Go types", err)
			}
		})
	}
}
