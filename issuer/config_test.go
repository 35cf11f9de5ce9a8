package issuer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/strictyaml"
	"github.com/registrum/registrum/issuer/keys"
)

// devConfig writes a dev deployment and returns its folder and config text.
func devConfig(t testing.TB) (string, string) {
	t.Helper()
	setup, err := WriteDevSetup(t.TempDir(), DevOptions{Port: 18080})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(setup.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(setup.ConfigPath), string(raw)
}

// loadVariant writes text as the config and loads it.
func loadVariant(t *testing.T, dir, text string) (*Config, error) {
	t.Helper()
	p := filepath.Join(dir, "issuer.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return LoadConfig(p)
}

func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("fixture does not contain %q", old)
	}
	return strings.Replace(s, old, new, 1)
}

func TestLoadDevConfig(t *testing.T) {
	dir, text := devConfig(t)
	cfg, err := loadVariant(t, dir, text)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ValidationMode != ModeSupervisedLocalDevelopment || cfg.SecretRoot != filepath.Join(dir, "secrets") ||
		cfg.Audit.Path != filepath.Join(dir, "audit", "issuer-audit.jsonl") || cfg.ClientsDirectory != filepath.Join(dir, "clients") {
		t.Fatalf("relative paths not resolved against the config folder: %+v", cfg)
	}
	// Defaults.
	if cfg.Listener.MaximumRequestBytes != 16384 || cfg.Listener.RequestTimeout != 5*time.Second ||
		cfg.Signing.JWKSPath != "/.well-known/jwks.json" || cfg.ClientAssertion.MaximumLifetime != 300*time.Second ||
		cfg.ClientAssertion.ReplayCacheEntries != 8192 || cfg.AccessTokens.Claims.Principal != "sub" {
		t.Fatalf("defaults: %+v", cfg)
	}
	// Strict is the default mode: without validationMode the local-jwk signer is refused.
	strictText := replaceOnce(t, text, "endpointBaseUrl: \"http://127.0.0.1:18080\"\n", "")
	_, err = loadVariant(t, dir, replaceOnce(t, strictText, "validationMode: supervised-local-development\n", ""))
	expectConfigError(t, err, "signer.kind", "strict mode requires")
	// Relative paths also resolve when the working folder is elsewhere.
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	os.Chdir(t.TempDir())
	if _, err := loadVariant(t, dir, text); err != nil {
		t.Fatalf("from another working folder: %v", err)
	}
}

func expectConfigError(t *testing.T, err error, field, rule string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want refusal of %s (%s)", field, rule)
	}
	var ce *strictyaml.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *strictyaml.Error", err)
	}
	if ce.Path != field {
		t.Fatalf("field %q, want %q (%v)", ce.Path, field, err)
	}
	if !strings.Contains(err.Error(), rule) {
		t.Fatalf("error %q does not say %q", err, rule)
	}
	if !strings.Contains(err.Error(), ce.File) || ce.File == "" {
		t.Fatalf("error %q does not name the file", err)
	}
}

func TestConfigRules(t *testing.T) {
	dir, base := devConfig(t)
	// A second key pair, for published/revoked key cases.
	_, pub2, _ := keys.Generate("ES256")
	raw2, _ := pub2.MarshalJSON()
	writeFile(t, filepath.Join(dir, "keys"), "next.jwk.json", string(raw2), 0o644)
	active, _ := keys.LoadActiveP256(filepath.Join(dir, "keys", "active.jwk.json"))
	badKid := strings.Replace(string(raw2), pub2.KeyID, strings.Repeat("A", 43), 1)
	writeFile(t, filepath.Join(dir, "keys"), "badkid.jwk.json", badKid, 0o644)
	writeFile(t, filepath.Join(dir, "secrets"), "short-key", strings.Repeat("k", 31), 0o600)
	writeFile(t, filepath.Join(dir, "secrets"), "exact-key", strings.Repeat("k", 32), 0o600)
	writeFile(t, filepath.Join(dir, "secrets"), "open-key", strings.Repeat("k", 40), 0o644)

	type edit struct{ old, new string }
	cases := []struct {
		name  string
		edits []edit
		field string // empty: accepted
		rule  string
	}{
		{"version 2", []edit{{"version: 1", "version: 2"}}, "version", "must equal 1"},
		{"unknown top-level field", []edit{{"version: 1\n", "version: 1\nbogus: 1\n"}}, "", "unknown field"},
		{"unknown nested field", []edit{{"  port:", "  bogus: 1\n  port:"}}, "", "unknown field \"bogus\""},
		{"snake_case key", []edit{{"  lifetimeSeconds: 900", "  lifetime_seconds: 900"}}, "", "unknown field"},
		{"bad mode", []edit{{"validationMode: supervised-local-development", "validationMode: lax"}}, "validationMode", "must be"},
		{"issuer http", []edit{{`issuer: "https://localhost:18080"`, `issuer: "http://localhost:18080"`}}, "issuer", "https"},
		{"issuer without host", []edit{{`issuer: "https://localhost:18080"`, `issuer: "https:///path"`}}, "issuer", "host"},
		{"issuer with credentials", []edit{{`issuer: "https://localhost:18080"`, `issuer: "https://u:p@localhost"`}}, "issuer", "credentials"},
		{"issuer with query", []edit{{`issuer: "https://localhost:18080"`, `issuer: "https://localhost/?a=b"`}}, "issuer", "query"},
		{"issuer with fragment", []edit{{`issuer: "https://localhost:18080"`, `issuer: "https://localhost/#f"`}}, "issuer", "fragment"},
		{"issuer with path", []edit{{`issuer: "https://localhost:18080"`, `issuer: "https://localhost/tenant/a"`}}, "", ""},
		{"endpoint base on loopback http", []edit{{"endpointBaseUrl: \"http://127.0.0.1:18080\"\n", "endpointBaseUrl: \"http://127.0.0.1:18080\"\n"}}, "", ""},
		{"endpoint base http off loopback", []edit{{"endpointBaseUrl: \"http://127.0.0.1:18080\"\n", "endpointBaseUrl: \"http://10.0.0.1:18080\"\n"}}, "endpointBaseUrl", "loopback"},
		{"endpoint base http by name", []edit{{"endpointBaseUrl: \"http://127.0.0.1:18080\"\n", "endpointBaseUrl: \"http://localhost:18080\"\n"}}, "endpointBaseUrl", "https"},
		{"endpoint base with query", []edit{{"endpointBaseUrl: \"http://127.0.0.1:18080\"\n", "endpointBaseUrl: \"https://localhost/?a=b\"\n"}}, "endpointBaseUrl", "query"},
		{"missing issuer", []edit{{`issuer: "https://localhost:18080"` + "\n", ""}}, "issuer", "is required"},
		{"address not IP", []edit{{`address: "127.0.0.1"`, `address: "localhost"`}}, "listener.address", "IP address"},
		{"port above 16 bits", []edit{{"port: 18080", "port: 65536"}}, "listener.port", "must be at most 65535"},
		{"request bytes below", []edit{{"  port: 18080\n", "  port: 18080\n  maximumRequestBytes: 1023\n"}}, "listener.maximumRequestBytes", "between 1024 and 1048576"},
		{"request bytes lowest", []edit{{"  port: 18080\n", "  port: 18080\n  maximumRequestBytes: 1024\n"}}, "", ""},
		{"request bytes highest", []edit{{"  port: 18080\n", "  port: 18080\n  maximumRequestBytes: 1048576\n"}}, "", ""},
		{"request bytes above", []edit{{"  port: 18080\n", "  port: 18080\n  maximumRequestBytes: 1048577\n"}}, "listener.maximumRequestBytes", "between"},
		{"timeout zero", []edit{{"  port: 18080\n", "  port: 18080\n  requestTimeoutMilliseconds: 0\n"}}, "listener.requestTimeoutMilliseconds", "between 1 and 30000"},
		{"timeout lowest", []edit{{"  port: 18080\n", "  port: 18080\n  requestTimeoutMilliseconds: 1\n"}}, "", ""},
		{"timeout highest", []edit{{"  port: 18080\n", "  port: 18080\n  requestTimeoutMilliseconds: 30000\n"}}, "", ""},
		{"timeout above", []edit{{"  port: 18080\n", "  port: 18080\n  requestTimeoutMilliseconds: 30001\n"}}, "listener.requestTimeoutMilliseconds", "between"},
		{"signing algorithm", []edit{{"algorithm: ES256", "algorithm: RS256"}}, "signing.algorithm", "ES256"},
		{"kid not thumbprint", []edit{{"activePublicJwkFile: keys/active.jwk.json", "activePublicJwkFile: keys/badkid.jwk.json"}}, "signing.activePublicJwkFile", "thumbprint"},
		{"published key", []edit{{"  activePublicJwkFile: keys/active.jwk.json\n", "  activePublicJwkFile: keys/active.jwk.json\n  publishedPublicJwkFiles: [keys/next.jwk.json]\n"}}, "", ""},
		{"published repeats active", []edit{{"  activePublicJwkFile: keys/active.jwk.json\n", "  activePublicJwkFile: keys/active.jwk.json\n  publishedPublicJwkFiles: [keys/active.jwk.json]\n"}}, "signing.publishedPublicJwkFiles[0]", "repeats"},
		{"active revoked", []edit{{"  activePublicJwkFile: keys/active.jwk.json\n", "  activePublicJwkFile: keys/active.jwk.json\n  revokedKeyIds: [" + active.KeyID + "]\n"}}, "signing.activePublicJwkFile", "revokedKeyIds"},
		{"published revoked", []edit{{"  activePublicJwkFile: keys/active.jwk.json\n", "  activePublicJwkFile: keys/active.jwk.json\n  publishedPublicJwkFiles: [keys/next.jwk.json]\n  revokedKeyIds: [" + pub2.KeyID + "]\n"}}, "signing.publishedPublicJwkFiles[0]", "revokedKeyIds"},
		{"revoked id malformed", []edit{{"  activePublicJwkFile: keys/active.jwk.json\n", "  activePublicJwkFile: keys/active.jwk.json\n  revokedKeyIds: [abc]\n"}}, "signing.revokedKeyIds[0]", "thumbprint"},
		{"jwks path custom", []edit{{"  algorithm: ES256\n", "  algorithm: ES256\n  jwksPath: /keys/v1.json~\n"}}, "", ""},
		{"jwks path relative", []edit{{"  algorithm: ES256\n", "  algorithm: ES256\n  jwksPath: keys\n"}}, "signing.jwksPath", "absolute"},
		{"jwks path root", []edit{{"  algorithm: ES256\n", "  algorithm: ES256\n  jwksPath: /\n"}}, "signing.jwksPath", "absolute"},
		{"jwks path empty segment", []edit{{"  algorithm: ES256\n", "  algorithm: ES256\n  jwksPath: /a//b\n"}}, "signing.jwksPath", "empty segments"},
		{"jwks path dot segment", []edit{{"  algorithm: ES256\n", "  algorithm: ES256\n  jwksPath: /a/../b\n"}}, "signing.jwksPath", "dot segments"},
		{"jwks path query", []edit{{"  algorithm: ES256\n", "  algorithm: ES256\n  jwksPath: \"/a?b\"\n"}}, "signing.jwksPath", "segments may use only"},
		{"jwks path pattern", []edit{{"  algorithm: ES256\n", "  algorithm: ES256\n  jwksPath: \"/{id}\"\n"}}, "signing.jwksPath", "segments may use only"},
		{"jwks path token", []edit{{"  algorithm: ES256\n", "  algorithm: ES256\n  jwksPath: /token\n"}}, "signing.jwksPath", "reserved"},
		{"jwks path health", []edit{{"  algorithm: ES256\n", "  algorithm: ES256\n  jwksPath: /health\n"}}, "signing.jwksPath", "reserved"},
		{"jwks path ready", []edit{{"  algorithm: ES256\n", "  algorithm: ES256\n  jwksPath: /ready\n"}}, "signing.jwksPath", "reserved"},
		{"jwks path metadata", []edit{{"  algorithm: ES256\n", "  algorithm: ES256\n  jwksPath: /.well-known/oauth-authorization-server\n"}}, "signing.jwksPath", "reserved"},
		{"jwks path oidc", []edit{{"  algorithm: ES256\n", "  algorithm: ES256\n  jwksPath: /.well-known/openid-configuration\n"}}, "signing.jwksPath", "reserved"},
		{"unknown signer", []edit{{"kind: local-jwk", "kind: hsm"}}, "signer.kind", "must be"},
		{"transit field on local-jwk", []edit{{"  privateKeyRef: secret:file/signing-key.jwk\n", "  privateKeyRef: secret:file/signing-key.jwk\n  keyVersion: 1\n"}}, "signer.keyVersion", "only to the transit signer"},
		{"private key ref missing file", []edit{{"privateKeyRef: secret:file/signing-key.jwk", "privateKeyRef: secret:file/none.jwk"}}, "signer.privateKeyRef", "owner-only"},
		{"private key ref escapes root", []edit{{"privateKeyRef: secret:file/signing-key.jwk", "privateKeyRef: secret:file/../x"}}, "signer.privateKeyRef", "secret:file/<name>"},
		{"audit size below", []edit{{"maximumFileBytes: 67108864", "maximumFileBytes: 1048575"}}, "audit.maximumFileBytes", "between 1048576 and 1099511627776"},
		{"audit size lowest", []edit{{"maximumFileBytes: 67108864", "maximumFileBytes: 1048576"}}, "", ""},
		{"audit size highest", []edit{{"maximumFileBytes: 67108864", "maximumFileBytes: 1099511627776"}}, "", ""},
		{"audit size above", []edit{{"maximumFileBytes: 67108864", "maximumFileBytes: 1099511627777"}}, "audit.maximumFileBytes", "between"},
		{"hash key version zero", []edit{{"hashKeyVersion: 1", "hashKeyVersion: 0"}}, "audit.hashKeyVersion", "nonzero"},
		{"hash key version above 32 bits", []edit{{"hashKeyVersion: 1", "hashKeyVersion: 4294967296"}}, "audit.hashKeyVersion", "must be at most 4294967295"},
		{"hash key same as signing key", []edit{{"hashKeyRef: secret:file/audit-hash-key", "hashKeyRef: secret:file/signing-key.jwk"}}, "audit.hashKeyRef", "differ from signer.privateKeyRef"},
		{"hash key short", []edit{{"hashKeyRef: secret:file/audit-hash-key", "hashKeyRef: secret:file/short-key"}}, "audit.hashKeyRef", "at least 32 bytes"},
		{"hash key exactly 32", []edit{{"hashKeyRef: secret:file/audit-hash-key", "hashKeyRef: secret:file/exact-key"}}, "", ""},
		{"hash key group readable", []edit{{"hashKeyRef: secret:file/audit-hash-key", "hashKeyRef: secret:file/open-key"}}, "audit.hashKeyRef", "owner-only"},
		{"hash key not a secret ref", []edit{{"hashKeyRef: secret:file/audit-hash-key", "hashKeyRef: /etc/passwd"}}, "audit.hashKeyRef", "secret:file/<name>"},
		{"no audiences", []edit{{`audiences: ["urn:registrum:dev"]`, `audiences: []`}}, "accessTokens.audiences", "1 to 16"},
		{"17 audiences", []edit{{`audiences: ["urn:registrum:dev"]`, `audiences: [a1,a2,a3,a4,a5,a6,a7,a8,a9,a10,a11,a12,a13,a14,a15,a16,a17]`}}, "accessTokens.audiences", "1 to 16"},
		{"16 audiences", []edit{{`audiences: ["urn:registrum:dev"]`, `audiences: [a1,a2,a3,a4,a5,a6,a7,a8,a9,a10,a11,a12,a13,a14,a15,a16]`}}, "", ""},
		{"audience 513 bytes", []edit{{`audiences: ["urn:registrum:dev"]`, `audiences: [` + strings.Repeat("a", 513) + `]`}}, "accessTokens.audiences[0]", "1 to 512 bytes"},
		{"audience 512 bytes", []edit{{`audiences: ["urn:registrum:dev"]`, `audiences: [` + strings.Repeat("a", 512) + `]`}}, "", ""},
		{"lifetime 59", []edit{{"lifetimeSeconds: 900", "lifetimeSeconds: 59"}}, "accessTokens.lifetimeSeconds", "between 60 and 3600"},
		{"lifetime 60", []edit{{"lifetimeSeconds: 900", "lifetimeSeconds: 60"}}, "", ""},
		{"lifetime 3600", []edit{{"lifetimeSeconds: 900", "lifetimeSeconds: 3600"}}, "", ""},
		{"lifetime 3601", []edit{{"lifetimeSeconds: 900", "lifetimeSeconds: 3601"}}, "accessTokens.lifetimeSeconds", "between"},
		{"claim name written by issuer", []edit{{"grantId: grant_id", "grantId: jti"}}, "accessTokens.claims.grantId", "writes itself"},
		{"claim name scope", []edit{{"grantId: grant_id", "grantId: scope"}}, "accessTokens.claims.grantId", "writes itself"},
		{"sub for non-principal", []edit{{"grantId: grant_id", "grantId: sub"}}, "accessTokens.claims.grantId", "only for principal"},
		{"sub for principal", []edit{{"  claims:\n", "  claims:\n    principal: sub\n"}}, "", ""},
		{"custom principal", []edit{{"  claims:\n", "  claims:\n    principal: principal_id\n"}}, "", ""},
		{"claim names not distinct", []edit{{"grantId: grant_id", "grantId: evidence_aud"}}, "accessTokens.claims.grantId", "already used"},
		{"actor equals default principal", []edit{{"actor: act", "actor: sub"}}, "accessTokens.claims.actor", "only for principal"},
		{"missing requesterTags name", []edit{{"    requesterTags: requester_tags\n", ""}}, "accessTokens.claims.requesterTags", "is required"},
		{"assertion audience not URL", []edit{{"audience: \"https://localhost:18080\"", "audience: \"ftp://x/token\""}}, "clientAssertion.audience", "https or http"},
		{"assertion audience no host", []edit{{"audience: \"https://localhost:18080\"", "audience: \"urn:x\""}}, "clientAssertion.audience", "https or http"},
		{"assertion lifetime 29", []edit{{"clientAssertion:\n", "clientAssertion:\n  maximumLifetimeSeconds: 29\n"}}, "clientAssertion.maximumLifetimeSeconds", "between 30 and 600"},
		{"assertion lifetime 30", []edit{{"clientAssertion:\n", "clientAssertion:\n  maximumLifetimeSeconds: 30\n"}}, "", ""},
		{"assertion lifetime 600", []edit{{"clientAssertion:\n", "clientAssertion:\n  maximumLifetimeSeconds: 600\n"}}, "", ""},
		{"assertion lifetime 601", []edit{{"clientAssertion:\n", "clientAssertion:\n  maximumLifetimeSeconds: 601\n"}}, "clientAssertion.maximumLifetimeSeconds", "between"},
		{"no algorithms", []edit{{"algorithms: [ES256, EdDSA, RS256]", "algorithms: []"}}, "clientAssertion.algorithms", "at least one"},
		{"HS256", []edit{{"algorithms: [ES256, EdDSA, RS256]", "algorithms: [ES256, HS256]"}}, "clientAssertion.algorithms[1]", "EdDSA, ES256 or RS256"},
		{"replay 255", []edit{{"clientAssertion:\n", "clientAssertion:\n  replayCacheEntries: 255\n"}}, "clientAssertion.replayCacheEntries", "between 256"},
		{"replay 256", []edit{{"clientAssertion:\n", "clientAssertion:\n  replayCacheEntries: 256\n"}}, "", ""},
		{"missing clients", []edit{{"clients:\n  directory: clients\n", ""}}, "clients", "is required"},
		{"clients folder missing", []edit{{"directory: clients", "directory: nowhere"}}, "clients.directory", "existing folder"},
		{"missing secret root", []edit{{"    root: secrets", "    root: nowhere"}}, "secretProviders.file.root", "existing folder"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := base
			for _, e := range c.edits {
				text = replaceOnce(t, text, e.old, e.new)
			}
			_, err := loadVariant(t, dir, text)
			switch {
			case c.rule == "" && c.field == "":
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
			case c.field == "":
				if err == nil || !strings.Contains(err.Error(), c.rule) {
					t.Fatalf("error %v, want %q", err, c.rule)
				}
				if !strings.Contains(err.Error(), "issuer.yaml") {
					t.Fatalf("error %q does not name the file", err)
				}
			default:
				expectConfigError(t, err, c.field, c.rule)
			}
		})
	}
}

func TestConfigErrorNamesLine(t *testing.T) {
	dir, base := devConfig(t)
	_, err := loadVariant(t, dir, replaceOnce(t, base, "lifetimeSeconds: 900", "lifetimeSeconds: 4000"))
	var ce *strictyaml.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%v", err)
	}
	lines := strings.Split(base, "\n")
	want := 0
	for i, l := range lines {
		if strings.Contains(l, "lifetimeSeconds") {
			want = i + 1
		}
	}
	if ce.Pos.Line != want || !strings.Contains(err.Error(), fmt.Sprintf("issuer.yaml:%d: accessTokens.lifetimeSeconds", want)) {
		t.Fatalf("line %d (%v), want %d", ce.Pos.Line, err, want)
	}
}

func TestConfigStrictModeTransit(t *testing.T) {
	dir, base := devConfig(t)
	transit := replaceOnce(t, base, "validationMode: supervised-local-development\n", "validationMode: strict\n")
	transit = replaceOnce(t, transit, "endpointBaseUrl: \"http://127.0.0.1:18080\"\n", "")
	transit = replaceOnce(t, transit, "  kind: local-jwk\n  privateKeyRef: secret:file/signing-key.jwk\n",
		"  kind: transit\n  unixSocketPath: run/transit.sock\n  mount: transit\n  keyName: issuer\n  keyVersion: 3\n  timeoutMilliseconds: 2000\n")
	cfg, err := loadVariant(t, dir, transit)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Signer.UnixSocketPath != filepath.Join(dir, "run", "transit.sock") || cfg.Signer.KeyVersion != 3 || cfg.Signer.Timeout != 2*time.Second {
		t.Fatalf("transit settings %+v", cfg.Signer)
	}
	for name, c := range map[string]struct{ old, new, field string }{
		"key version zero":  {"keyVersion: 3", "keyVersion: 0", "signer.keyVersion"},
		"missing key name":  {"  keyName: issuer\n", "", "signer.keyName"},
		"bad mount":         {"mount: transit", "mount: a/b", "signer.mount"},
		"timeout zero":      {"timeoutMilliseconds: 2000", "timeoutMilliseconds: 0", "signer.timeoutMilliseconds"},
		"private key field": {"  keyVersion: 3\n", "  keyVersion: 3\n  privateKeyRef: secret:file/signing-key.jwk\n", "signer.privateKeyRef"},
		"missing socket":    {"  unixSocketPath: run/transit.sock\n", "", "signer.unixSocketPath"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadVariant(t, dir, replaceOnce(t, transit, c.old, c.new))
			expectConfigError(t, err, c.field, "")
		})
	}
}

func TestConfigAuditPermissions(t *testing.T) {
	dir, base := devConfig(t)
	if err := os.Chmod(filepath.Join(dir, "audit"), 0o750); err != nil {
		t.Fatal(err)
	}
	_, err := loadVariant(t, dir, base)
	expectConfigError(t, err, "audit.path", "owner only")
	os.Chmod(filepath.Join(dir, "audit"), 0o700)
	writeFile(t, filepath.Join(dir, "audit"), "issuer-audit.jsonl", "", 0o640)
	_, err = loadVariant(t, dir, base)
	expectConfigError(t, err, "audit.path", "owner only")
	os.Chmod(filepath.Join(dir, "audit", "issuer-audit.jsonl"), 0o600)
	if _, err := loadVariant(t, dir, base); err != nil {
		t.Fatal(err)
	}
	// The audit path may not be a secret file.
	_, err = loadVariant(t, dir, replaceOnce(t, base, "path: audit/issuer-audit.jsonl", "path: secrets/audit-hash-key"))
	expectConfigError(t, err, "audit.path", "")
}

// FuzzConfig feeds arbitrary documents to the configuration loader: it must
// refuse with an error naming the file or accept, never panic.
func FuzzConfig(f *testing.F) {
	dir, base := devConfig(f)
	f.Add(base)
	f.Add("version: 1\nlistener: {port: !00}\n")
	f.Add("signing:\n  publishedPublicJwkFiles: !00\n")
	p := filepath.Join(dir, "fuzz.yaml")
	f.Fuzz(func(t *testing.T, doc string) {
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadConfig(p); err != nil && !strings.Contains(err.Error(), "fuzz.yaml") {
			t.Fatalf("refusal %q does not name the file", err)
		}
	})
}

// TestEnvironmentOverridesTheDocument: every key of the document can be set
// from REGISTRUM_ISSUER_CONFIG_*; the value is validated like the file's and
// a refusal names the variable; a misspelled variable is refused.
func TestEnvironmentOverridesTheDocument(t *testing.T) {
	setup, _ := newSetup(t)
	t.Setenv(EnvPrefix+"LISTENER_REQUEST_TIMEOUT_MILLISECONDS", "1234")
	t.Setenv(EnvPrefix+"ACCESS_TOKENS_LIFETIME_SECONDS", "120")
	cfg, err := LoadConfig(setup.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listener.RequestTimeout != 1234*time.Millisecond || cfg.AccessTokens.Lifetime != 2*time.Minute {
		t.Fatalf("overrides not applied: timeout %v, lifetime %v", cfg.Listener.RequestTimeout, cfg.AccessTokens.Lifetime)
	}

	t.Setenv(EnvPrefix+"LISTENER_MAXIMUM_REQUEST_BYTES", "10")
	_, err = LoadConfig(setup.ConfigPath)
	want := "environment variable " + EnvPrefix + "LISTENER_MAXIMUM_REQUEST_BYTES: listener.maximumRequestBytes: must be between 1024 and 1048576"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("out-of-range override: %v\nwant it to contain %q", err, want)
	}
	os.Unsetenv(EnvPrefix + "LISTENER_MAXIMUM_REQUEST_BYTES")

	t.Setenv(EnvPrefix+"LISTENER_PROT", "8443")
	if _, err = LoadConfig(setup.ConfigPath); err == nil || !strings.Contains(err.Error(), EnvPrefix+"LISTENER_PROT names no configuration key") {
		t.Fatalf("misspelled variable: %v", err)
	}
}
