package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/strictyaml"
)

const pooledDatabase = `database: {url: "host=/run/postgresql dbname=registrum"}`

// TestDirectURLNamesTheServerBehindAPooler holds database.directUrl and
// directUrlRef (docs/record-host.md, "Connection poolers"): optional,
// refused with a password or both at once, resolved from a secret, and
// the session URL falls back to url without them.
func TestDirectURLNamesTheServerBehindAPooler(t *testing.T) {
	c, err := Load(write(t, valid))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := c.DirectDatabaseURL(); err != nil || d != "" {
		t.Fatalf("direct url without directUrl: %q %v", d, err)
	}
	if s, err := c.SessionDatabaseURL(); err != nil || s != "host=/run/postgresql dbname=registrum" {
		t.Fatalf("session url without directUrl: %q %v", s, err)
	}

	doc := strings.Replace(valid, pooledDatabase, `database: {url: "host=127.0.0.1 port=6432 dbname=registrum", directUrl: "host=/run/postgresql dbname=registrum"}`, 1)
	if c, err = Load(write(t, doc)); err != nil {
		t.Fatal(err)
	}
	if d, err := c.DirectDatabaseURL(); err != nil || d != "host=/run/postgresql dbname=registrum" {
		t.Fatalf("direct url %q %v", d, err)
	}
	if s, err := c.SessionDatabaseURL(); err != nil || s != "host=/run/postgresql dbname=registrum" {
		t.Fatalf("session url %q %v", s, err)
	}

	doc = strings.Replace(valid, pooledDatabase, `database: {url: "host=127.0.0.1 port=6432 dbname=registrum", directUrlRef: secret:file/direct}`, 1)
	p := write(t, doc)
	os.MkdirAll(filepath.Join(filepath.Dir(p), "secrets"), 0o700)
	os.WriteFile(filepath.Join(filepath.Dir(p), "secrets", "direct"), []byte("postgres://u:pw@db/registrum\n"), 0o600)
	if c, err = Load(p); err != nil {
		t.Fatal(err)
	}
	if d, err := c.DirectDatabaseURL(); err != nil || d != "postgres://u:pw@db/registrum" {
		t.Fatalf("direct url from the secret %q %v", d, err)
	}

	for _, bad := range []struct{ name, database, key, rule string }{
		{"both direct forms", `database: {url: "host=x", directUrl: "host=y", directUrlRef: secret:file/direct}`, "database", "not both"},
		{"password in directUrl", `database: {url: "host=x", directUrl: "postgres://u:pw@db/registrum"}`, "database.directUrl", "password"},
		{"bad directUrlRef", `database: {url: "host=x", directUrlRef: "file:/etc/passwd"}`, "database.directUrlRef", ""},
	} {
		t.Run(bad.name, func(t *testing.T) {
			p := write(t, strings.Replace(valid, pooledDatabase, bad.database, 1))
			_, err := Load(p)
			var ce *strictyaml.Error
			if !errors.As(err, &ce) || ce.Path != bad.key || !strings.Contains(ce.Message, bad.rule) {
				t.Fatalf("got %v, want key %q and rule containing %q", err, bad.key, bad.rule)
			}
		})
	}
}
