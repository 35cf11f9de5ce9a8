package config

import (
	"errors"
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
