package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/strictyaml"
)

const valid = `version: 1
listener: {address: 127.0.0.1, port: 8080}
metrics: {address: 127.0.0.1, port: 9090}
database: {url: "host=/run/postgresql dbname=registrum"}
package: package
secrets: {root: secrets}
hostKeyRef: secret:file/host-key
`

func write(t *testing.T, doc string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "registrum.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadResolvesPathsAgainstTheFile(t *testing.T) {
	p := write(t, valid)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(p)
	if c.Package != filepath.Join(dir, "package") || c.Secrets.Root != filepath.Join(dir, "secrets") {
		t.Fatalf("paths not resolved: %s %s", c.Package, c.Secrets.Root)
	}
	if c.Listener.Addr() != "127.0.0.1:8080" || c.Metrics.Addr() != "127.0.0.1:9090" {
		t.Fatalf("listeners %s %s", c.Listener.Addr(), c.Metrics.Addr())
	}
}

func TestLoadRefusalsNameFileKeyAndRule(t *testing.T) {
	cases := []struct {
		name, doc, key, rule string
	}{
		{"unknown key", valid + "extra: 1\n", "extra", "unknown field"},
		{"nested unknown key", strings.Replace(valid, "port: 8080}", "port: 8080, tls: true}", 1), "listener.tls", "unknown field"},
		{"tag where a list is expected", valid + "authentication:\n  revokedKeyIds: !00\n", "", "malformed YAML"},
		{"version", strings.Replace(valid, "version: 1", "version: 2", 1), "version", "must equal 1"},
		{"address", strings.Replace(valid, "address: 127.0.0.1, port: 8080", "address: localhost, port: 8080", 1), "listener.address", "IP address"},
		{"port", strings.Replace(valid, "port: 8080", "port: 70000", 1), "listener.port", "between 0 and 65535"},
		{"metrics on the public listener", strings.Replace(valid, "port: 9090", "port: 8080", 1), "metrics", "must differ"},
		{"negative drain", strings.Replace(valid, "port: 8080}", "port: 8080, drainSeconds: -1}", 1), "listener.drainSeconds", "between 0 and 60"},
		{"drain over the bound", strings.Replace(valid, "port: 8080}", "port: 8080, drainSeconds: 61}", 1), "listener.drainSeconds", "between 0 and 60"},
		{"drain on the metrics listener", strings.Replace(valid, "port: 9090}", "port: 9090, drainSeconds: 1}", 1), "metrics.drainSeconds", "only the public listener"},
		{"password in url", strings.Replace(valid, `host=/run/postgresql dbname=registrum`, `postgres://u:secret@db/registrum`, 1), "database.url", "password"},
		{"password member", strings.Replace(valid, `dbname=registrum`, `dbname=registrum password=x`, 1), "database.url", "password"},
		{"no database", strings.Replace(valid, `database: {url: "host=/run/postgresql dbname=registrum"}`+"\n", "", 1), "database", "url or urlRef"},
		{"both database forms", strings.Replace(valid, `database: {url: "host=/run/postgresql dbname=registrum"}`, `database: {url: "host=x", urlRef: "secret:file/db"}`, 1), "database", "not both"},
		{"bad database ref", strings.Replace(valid, `database: {url: "host=/run/postgresql dbname=registrum"}`, `database: {urlRef: "file:/etc/passwd"}`, 1), "database.urlRef", ""},
		{"no package", strings.Replace(valid, "package: package\n", "", 1), "package", "required"},
		{"no secrets root", strings.Replace(valid, "secrets: {root: secrets}\n", "", 1), "secrets.root", "required"},
		{"bad host key ref", strings.Replace(valid, "secret:file/host-key", "host-key", 1), "hostKeyRef", ""},
		{"auth without jwks", valid + "authentication: {issuer: https://i, audience: a, scopeClaim: scope, scopeSeparator: ' '}\n", "authentication.jwksUrl", "URL"},
		{"auth skew too large", valid + "authentication: {issuer: https://i, jwksUrl: https://i/jwks, audience: a, scopeClaim: scope, scopeSeparator: ' ', clockSkewSeconds: 301}\n", "authentication.clockSkewSeconds", "0 to 300"},
		{"evidence claims incomplete", valid + authEvidence("{requesterTags: tags, evidenceAudience: eaud, grantId: gid}"), "authentication.authorityClaims.grantAuthority", "required with the other evidence claims"},
		{"evidence actor alone", valid + authEvidence("{actor: act}"), "authentication.authorityClaims.actor", "needs requesterTags"},
		{"evidence claim written by the issuer", valid + authEvidence("{requesterTags: tags, evidenceAudience: aud, grantId: gid, grantAuthority: gauth}"), "authentication.authorityClaims.evidenceAudience", "issuer writes itself"},
		{"evidence claim named sub", valid + authEvidence("{requesterTags: sub, evidenceAudience: eaud, grantId: gid, grantAuthority: gauth}"), "authentication.authorityClaims.requesterTags", "issuer writes itself"},
		{"evidence claims repeated", valid + authEvidence("{requesterTags: tags, evidenceAudience: eaud, grantId: tags, grantAuthority: gauth}"), "authentication.authorityClaims.grantId", "same claim as requesterTags"},
		{"evidence claim equals the purpose", valid + authEvidence("{purpose: purpose, requesterTags: tags, evidenceAudience: eaud, grantId: gid, grantAuthority: purpose}"), "authentication.authorityClaims.grantAuthority", "same claim as purpose"},
		{"evidence claim equals the principal", valid + authEvidence("{principal: who, requesterTags: tags, evidenceAudience: eaud, grantId: gid, grantAuthority: gauth, actor: who}"), "authentication.authorityClaims.actor", "same claim as principal"},
		{"auth algorithm", valid + "authentication: {issuer: https://i, jwksUrl: https://i/jwks, audience: a, algorithm: RS256, scopeClaim: scope, scopeSeparator: ' '}\n", "authentication.algorithm", "ES256"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := write(t, c.doc)
			_, err := Load(p)
			var ce *strictyaml.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a config Error", err)
			}
			if ce.File != p || ce.Path != c.key || !strings.Contains(ce.Message, c.rule) {
				t.Fatalf("got %q (file %s, key %q), want key %q and rule containing %q", err, ce.File, ce.Path, c.key, c.rule)
			}
		})
	}
}

// TestDrainDefaultsToAFewSecondsAndTakesZero holds the drain delay's
// default and that 0 (development, tests) is kept, not taken for unset.
func TestDrainDefaultsToAFewSecondsAndTakesZero(t *testing.T) {
	for doc, want := range map[string]time.Duration{
		valid: DefaultDrainSeconds * time.Second,
		strings.Replace(valid, "port: 8080}", "port: 8080, drainSeconds: 0}", 1):  0,
		strings.Replace(valid, "port: 8080}", "port: 8080, drainSeconds: 60}", 1): time.Minute,
	} {
		c, err := Load(write(t, doc))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Drain(); got != want {
			t.Errorf("drain of %q = %v, want %v", strings.SplitN(doc, "\n", 3)[1], got, want)
		}
	}
	if DefaultDrainSeconds < 1 {
		t.Fatalf("the default drain (%d s) gives a load balancer no time to notice", DefaultDrainSeconds)
	}
}

func TestAuthenticationDefaults(t *testing.T) {
	c, err := Load(write(t, valid+"authentication: {issuer: https://i, jwksUrl: https://i/jwks, audience: a, scopeClaim: scope, scopeSeparator: ' '}\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Authentication
	if a.Algorithm != "ES256" || a.AuthorityClaims.Principal != "sub" || a.ClockSkew().Seconds() != DefaultClockSkewSeconds ||
		a.KeySetRefresh().Seconds() != DefaultKeySetRefreshSeconds || a.KeySetAllowance().Seconds() != DefaultKeySetAllowanceSeconds {
		t.Fatalf("defaults: %+v", a)
	}
}

// authEvidence is an authentication section with the given authorityClaims.
func authEvidence(claims string) string {
	return "authentication: {issuer: https://i, jwksUrl: https://i/jwks, audience: a, scopeClaim: scope, scopeSeparator: ' ', authorityClaims: " + claims + "}\n"
}

func TestEvidenceClaimNamesMirrorTheIssuers(t *testing.T) {
	c, err := Load(write(t, valid+authEvidence("{requesterTags: requester_tags, evidenceAudience: evidence_aud, grantId: grant_id, grantAuthority: grant_authority, actor: act}")))
	if err != nil {
		t.Fatal(err)
	}
	ac := c.Authentication.AuthorityClaims
	if !ac.Evidence() || ac.Principal != "sub" || ac.RequesterTags != "requester_tags" || ac.EvidenceAudience != "evidence_aud" ||
		ac.GrantID != "grant_id" || ac.GrantAuthority != "grant_authority" || ac.Actor != "act" {
		t.Fatalf("authority claims %+v", ac)
	}
	c, err = Load(write(t, valid+authEvidence("{purpose: purpose}")))
	if err != nil || c.Authentication.AuthorityClaims.Evidence() {
		t.Fatalf("without evidence claims: %v %+v", err, c)
	}
}

func TestSecretsAreResolvedUnderTheRoot(t *testing.T) {
	p := write(t, valid)
	dir := filepath.Dir(p)
	os.Mkdir(filepath.Join(dir, "secrets"), 0o700)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.HostKey(); err == nil {
		t.Fatal("a missing host key was accepted")
	}
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), []byte(strings.Repeat("k", 31)), 0o600)
	if _, err := c.HostKey(); err == nil || !strings.Contains(err.Error(), "at least 32 bytes") {
		t.Fatalf("short key: err = %v", err)
	}
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), []byte(strings.Repeat("k", 32)), 0o600)
	os.Chmod(filepath.Join(dir, "secrets", "host-key"), 0o640)
	if _, err := c.HostKey(); err == nil {
		t.Fatal("a group-readable host key was accepted")
	}
	os.Chmod(filepath.Join(dir, "secrets", "host-key"), 0o600)
	if k, err := c.HostKey(); err != nil || len(k) != 32 {
		t.Fatalf("key: %v", err)
	}
	url, err := c.DatabaseURL()
	if err != nil || !strings.Contains(url, "dbname=registrum") {
		t.Fatalf("database url %q %v", url, err)
	}
}

func FuzzLoad(f *testing.F) {
	f.Add([]byte(valid))
	f.Add([]byte(valid + "authentication: {issuer: https://i, jwksUrl: https://i/jwks, audience: a, scopeClaim: scope, scopeSeparator: ' '}\n"))
	f.Add([]byte("authentication:\n  revokedKeyIds: !00\n"))
	f.Add([]byte("version: [1\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, doc []byte) {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(p)
		if err == nil && (c.Version != 1 || c.Package == "" || c.HostKeyRef == "") {
			t.Fatalf("accepted an invalid configuration: %+v", c)
		}
	})
}

// TestEnvironmentOverridesKeys: REGISTRUM_CONFIG_* sets any key, including
// a section the file leaves out and an entry of a map the file declares; an
// override is validated like the file's value and a refusal names the
// variable; a misspelled variable refuses the start; the effective
// configuration shows the result and what the environment set.
func TestEnvironmentOverridesKeys(t *testing.T) {
	p := write(t, valid+"reviewAuthorities:\n  desk-1:\n    endpoint: http://127.0.0.1:1/review\n    profile: authority-review-v1\n    producerId: p\n    staticTokenRef: secret:file/desk-token\n")
	env := []string{
		EnvPrefix + "LISTENER_PORT=9443",
		EnvPrefix + "LISTENER_DRAIN_SECONDS=0",
		EnvPrefix + "REVIEW_AUTHORITIES_DESK_1_ENDPOINT=https://desk.example/review",
		EnvPrefix + "INSTANCE_ID=blue",
	}
	c, err := load(p, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listener.Port != 9443 || c.Drain() != 0 || c.ReviewAuthorities["desk-1"].Endpoint != "https://desk.example/review" || c.InstanceID != "blue" {
		t.Fatalf("overrides not applied: %+v %+v", c.Listener, c.ReviewAuthorities["desk-1"])
	}
	doc, overrides, err := c.Effective()
	if err != nil {
		t.Fatal(err)
	}
	if len(overrides) != 4 || !strings.Contains(string(doc), "port: 9443") || !strings.Contains(string(doc), "https://desk.example/review") {
		t.Fatalf("effective configuration:\n%s\noverrides %v", doc, overrides)
	}

	_, err = load(p, []string{EnvPrefix + "LISTENER_PORT=70000"})
	var se *strictyaml.Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "environment variable "+EnvPrefix+"LISTENER_PORT: listener.port") {
		t.Fatalf("out-of-range override: %v", err)
	}
	if _, err = load(p, []string{EnvPrefix + "LISTENER_PROT=1"}); err == nil || !strings.Contains(err.Error(), EnvPrefix+"LISTENER_PROT names no configuration key") {
		t.Fatalf("misspelled variable: %v", err)
	}
	if _, err = load(p, []string{EnvPrefix + "DATABASE_URL=postgres://u:secret@db/registrum"}); err == nil || !strings.Contains(err.Error(), "must not hold a password") || strings.Contains(err.Error(), "secret@") {
		t.Fatalf("a password through the environment: %v", err)
	}
}
