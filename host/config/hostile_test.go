package config

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/bombtest"
	"github.com/registrum/registrum/internal/strictyaml"
)

// TestLoadRefusesAnAliasBomb: the config of `serve` (and of `dev`, which
// loads the one it writes through Load) is refused quickly with bounded
// memory when it is a "billion laughs" document, naming the file.
func TestLoadRefusesAnAliasBomb(t *testing.T) {
	p := write(t, bombtest.AliasBomb())
	bombtest.Refuses(t, func() error {
		_, err := Load(p)
		return err
	}, "/registrum.yaml:", "expands to more than")
}

// TestLoadNumbersAreStrict: a port given as a string or a fraction, and a
// negative port or duration, are refused naming the key and the file.
func TestLoadNumbersAreStrict(t *testing.T) {
	auth := "authentication: {issuer: https://i, jwksUrl: https://i/jwks, audience: a, scopeClaim: scope, scopeSeparator: ' ', "
	cases := []struct {
		name, doc, key string
	}{
		{"port as a string", strings.Replace(valid, "port: 8080", `port: "8080"`, 1), "listener.port"},
		{"fractional port", strings.Replace(valid, "port: 8080", "port: 3.5", 1), "listener.port"},
		{"negative port", strings.Replace(valid, "port: 8080", "port: -1", 1), "listener.port"},
		{"metrics port as a string", strings.Replace(valid, "port: 9090", `port: '9090'`, 1), "metrics.port"},
		{"version as a string", strings.Replace(valid, "version: 1", `version: "1"`, 1), "version"},
		{"negative clock skew", valid + auth + "clockSkewSeconds: -1}\n", "authentication.clockSkewSeconds"},
		{"fractional key set refresh", valid + auth + "keySetRefreshSeconds: 60.5}\n", "authentication.keySetRefreshSeconds"},
		{"negative key set allowance", valid + auth + "keySetAllowanceSeconds: -5}\n", "authentication.keySetAllowanceSeconds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := write(t, c.doc)
			_, err := Load(p)
			var ce *strictyaml.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *strictyaml.Error", err)
			}
			if ce.File != p || ce.Path != c.key || !strings.HasPrefix(err.Error(), p+":") {
				t.Fatalf("got %q (key %q), want file %s and key %q", err, ce.Path, p, c.key)
			}
		})
	}
}

// goTerms matches words of Go's type system, which a configuration refusal
// must never use.
var goTerms = regexp.MustCompile(`interface \{\}|struct|uint|int\d|float\d|\bGo\b|unmarshal|\[\]|map\[`)

// TestLoadWrongKindsSpeakOfKeysNotGoTypes: a key holding the wrong kind of
// value (a list for a mapping, a mapping for a string...) is refused naming
// the file, the line, the key and the kind it must hold, never a Go type.
func TestLoadWrongKindsSpeakOfKeysNotGoTypes(t *testing.T) {
	cases := []struct {
		name, old, new, want string
	}{
		{"list for the listener", "listener: {address: 127.0.0.1, port: 8080}", "listener: [1, 2]", ":2: listener: must be a mapping, not a list"},
		{"list for the port", "port: 8080", "port: [1, 2]", ":2: listener.port: must be an integer, not a list"},
		{"mapping for the package", "package: package", "package: {a: b}", ":5: package: must be a string, not a mapping"},
		{"string for secrets", "secrets: {root: secrets}", "secrets: secrets", ":6: secrets: must be a mapping, not a string"},
		{"boolean for the version", "version: 1", "version: true", ":1: version: must be an integer, not true or false"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := strings.Replace(valid, c.old, c.new, 1)
			if doc == valid {
				t.Fatal("edit not applied")
			}
			p := write(t, doc)
			_, err := Load(p)
			if err == nil || !strings.HasPrefix(err.Error(), p+c.want) {
				t.Fatalf("err = %v, want %q", err, p+c.want)
			}
			if goTerms.MatchString(err.Error()) {
				t.Fatalf("err %q speaks of Go types", err)
			}
		})
	}
}
