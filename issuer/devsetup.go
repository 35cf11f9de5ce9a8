package issuer

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/issuer/keys"
)

// DevOptions shape the deployment WriteDevSetup writes.
type DevOptions struct {
	// Address is the listener IP address (default 127.0.0.1).
	Address string
	// Port is the listener port; it must be nonzero because the issuer
	// identifier (the client assertions' audience) and the token URL name it.
	Port int
	// Issuer is the issuer identifier (default https://localhost:<port>).
	Issuer string
	// Audience is the one access-token audience (default "urn:registrum:dev").
	Audience string
	// Scopes are the scopes of the standard demo client (default
	// "records:read" and "records:write").
	Scopes []string
	// Claims are the direct claims of the standard demo client (default:
	// purpose "local-development").
	Claims map[string]string
}

// DevClient is one demo client written by WriteDevSetup.
type DevClient struct {
	// ID is the client id.
	ID string
	// Profile is "standard" or "evidence".
	Profile string
	// KeyFile is the client's private JWK file (mode 0600).
	KeyFile string
	// Audience is the audience its client assertions must carry: the issuer
	// identifier (docs/decisions/client-assertion-audience.md).
	Audience string
}

// DevSetup describes a deployment written by WriteDevSetup.
type DevSetup struct {
	// ConfigPath is the configuration document to pass to LoadConfig.
	ConfigPath string
	// Issuer is the issuer identifier: the tokens' iss and the one audience
	// of client assertions (clientAssertion.audience).
	Issuer string
	// TokenURL is the token endpoint over plain HTTP on the listener.
	TokenURL string
	// Clients are the demo clients.
	Clients []DevClient
}

// Demo client ids written by WriteDevSetup.
const (
	DevStandardClientID = "demo-standard"
	DevEvidenceClientID = "demo-evidence"
)

// DevEvidenceClaims are the accessTokens.claims names the dev deployment's
// configuration writes (TestWriteDevSetupKeepsKeys holds them equal); a
// record host reading its Evidence-profile tokens names the same claims.
var DevEvidenceClaims = ClaimNames{Principal: "sub", RequesterTags: "requester_tags", EvidenceAudience: "evidence_aud",
	GrantID: "grant_id", GrantAuthority: "grant_authority", Actor: "act"}

// The authority of the dev deployment's Evidence-profile demo client.
const (
	DevEvidenceRequesterTag = "dev"
	DevEvidenceAudience     = "https://evidence.localhost"
	DevEvidenceGrantID      = "grant-dev-1"
	DevEvidenceAuthority    = "registrum-dev"
)

// WriteDevSetup writes into dir a supervised-local-development issuer
// deployment: issuer.yaml, the service's local-jwk key (keys/active.jwk.json
// and secrets/signing-key.jwk), the audit hash key (secrets/audit-hash-key),
// an owner-only audit folder, and two demo clients (one standard, one
// evidence with delegation) with their private keys in client-keys/. Keys
// already present are kept; the configuration and registrations are
// rewritten from them. Serve the listener over plain HTTP on loopback only.
func WriteDevSetup(dir string, opts DevOptions) (*DevSetup, error) {
	if opts.Port <= 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("issuer: dev setup: port %d must be 1 to 65535", opts.Port)
	}
	if opts.Address == "" {
		opts.Address = "127.0.0.1"
	}
	addr, err := netip.ParseAddr(opts.Address)
	if err != nil {
		return nil, fmt.Errorf("issuer: dev setup: address %q is not an IP address", opts.Address)
	}
	if opts.Issuer == "" {
		opts.Issuer = fmt.Sprintf("https://localhost:%d", opts.Port)
	}
	if opts.Audience == "" {
		opts.Audience = "urn:registrum:dev"
	}
	if len(opts.Claims) == 0 {
		opts.Claims = map[string]string{"purpose": "local-development"}
	}
	if len(opts.Scopes) == 0 {
		opts.Scopes = []string{"records:read", "records:write"}
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("issuer: dev setup: %w", err)
	}
	for _, sub := range []string{"", "secrets", "audit", "client-keys"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("issuer: dev setup: %w", err)
		}
		if err := os.Chmod(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("issuer: dev setup: %w", err)
		}
	}
	for _, sub := range []string{"keys", "clients"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("issuer: dev setup: %w", err)
		}
	}

	// The service's signing key.
	signingPriv, err := keepOrGenerateKey(filepath.Join(dir, "secrets", "signing-key.jwk"), "ES256")
	if err != nil {
		return nil, err
	}
	if err := writeJSONKey(filepath.Join(dir, "keys", "active.jwk.json"), publicOf(signingPriv), 0o644); err != nil {
		return nil, err
	}
	hashKey := filepath.Join(dir, "secrets", "audit-hash-key")
	if _, err := os.Stat(hashKey); errors.Is(err, fs.ErrNotExist) {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("issuer: dev setup: %w", err)
		}
		if err := os.WriteFile(hashKey, []byte(hex.EncodeToString(b[:])), 0o600); err != nil {
			return nil, fmt.Errorf("issuer: dev setup: %w", err)
		}
	}

	tokenURL := fmt.Sprintf("http://%s/token", netip.AddrPortFrom(addr, uint16(opts.Port)))
	setup := &DevSetup{ConfigPath: filepath.Join(dir, "issuer.yaml"), Issuer: opts.Issuer, TokenURL: tokenURL}
	for _, c := range []struct{ id, profile string }{{DevStandardClientID, "standard"}, {DevEvidenceClientID, "evidence"}} {
		keyFile := filepath.Join(dir, "client-keys", c.id+".jwk")
		priv, err := keepOrGenerateKey(keyFile, "ES256")
		if err != nil {
			return nil, err
		}
		pubJSON, err := publicOf(priv).MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("issuer: dev setup: %w", err)
		}
		var reg string
		if c.profile == "standard" {
			reg = fmt.Sprintf("clientId: %q\nprincipal: %q\nauthorization:\n  scopes: [%s]\n  claims:\n%skeys:\n  - %s\n",
				c.id, "service:"+c.id, quoteList(opts.Scopes), claimLines(opts.Claims), pubJSON)
		} else {
			reg = fmt.Sprintf("clientId: %q\nprincipal: %q\nevidenceAudience: %q\nrequesterTags: [%q]\ngrant:\n  id: %q\n  authority: %q\ndelegation:\n  subjectClaims:\n    id: \"subject.id\"\nkeys:\n  - %s\n",
				c.id, "service:"+c.id, DevEvidenceAudience, DevEvidenceRequesterTag, DevEvidenceGrantID, DevEvidenceAuthority, pubJSON)
		}
		if err := os.WriteFile(filepath.Join(dir, "clients", c.id+".yaml"), []byte(reg), 0o644); err != nil {
			return nil, fmt.Errorf("issuer: dev setup: %w", err)
		}
		setup.Clients = append(setup.Clients, DevClient{ID: c.id, Profile: c.profile, KeyFile: keyFile, Audience: opts.Issuer})
	}

	conf := fmt.Sprintf(`# Written by registrum: a local-development issuer. Not for production.
version: 1
validationMode: supervised-local-development
issuer: %q
listener:
  address: %q
  port: %d
signing:
  algorithm: ES256
  activePublicJwkFile: keys/active.jwk.json
signer:
  kind: local-jwk
  privateKeyRef: secret:file/signing-key.jwk
secretProviders:
  file:
    root: secrets
audit:
  path: audit/issuer-audit.jsonl
  maximumFileBytes: 67108864
  hashKeyRef: secret:file/audit-hash-key
  hashKeyVersion: 1
accessTokens:
  audiences: [%q]
  lifetimeSeconds: 900
  claims:
    requesterTags: requester_tags
    evidenceAudience: evidence_aud
    grantId: grant_id
    grantAuthority: grant_authority
    actor: act
# The issuer identifier, as current clients send it (draft-ietf-oauth-rfc7523bis);
# docs/decisions/client-assertion-audience.md.
clientAssertion:
  audience: %q
  algorithms: [ES256, EdDSA, RS256]
clients:
  directory: clients
`, opts.Issuer, addr.String(), opts.Port, opts.Audience, opts.Issuer)
	if addr.IsLoopback() {
		// The discovery documents name the endpoints the listener really
		// serves, plain HTTP on loopback (docs/decisions/dev-issuer-scheme.md).
		// Last, so that the lines above keep their numbers.
		conf += fmt.Sprintf("endpointBaseUrl: %q\n", "http://"+netip.AddrPortFrom(addr, uint16(opts.Port)).String())
	}
	if err := os.WriteFile(setup.ConfigPath, []byte(conf), 0o644); err != nil {
		return nil, fmt.Errorf("issuer: dev setup: %w", err)
	}
	return setup, nil
}

func quoteList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

func publicOf(k *jose.JSONWebKey) *jose.JSONWebKey {
	pub := k.Public()
	pub.KeyID, pub.Algorithm, pub.Use = k.KeyID, k.Algorithm, "sig"
	return &pub
}

// keepOrGenerateKey reads the private JWK at path, or generates one there.
func keepOrGenerateKey(path, alg string) (*jose.JSONWebKey, error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || k.IsPublic() {
			return nil, fmt.Errorf("issuer: dev setup: %s is not a private JWK", path)
		}
		if k.KeyID == "" {
			if k.KeyID, err = keys.Thumbprint(&k); err != nil {
				return nil, fmt.Errorf("issuer: dev setup: %s: %w", path, err)
			}
		}
		return &k, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("issuer: dev setup: %w", err)
	}
	priv, _, err := keys.Generate(alg)
	if err != nil {
		return nil, fmt.Errorf("issuer: dev setup: %w", err)
	}
	if err := writeJSONKey(path, priv, 0o600); err != nil {
		return nil, err
	}
	return priv, nil
}

func writeJSONKey(path string, k *jose.JSONWebKey, mode os.FileMode) error {
	raw, err := k.MarshalJSON()
	if err != nil {
		return fmt.Errorf("issuer: dev setup: encode %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(raw, '\n'), mode); err != nil {
		return fmt.Errorf("issuer: dev setup: %w", err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fmt.Errorf("issuer: dev setup: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("issuer: dev setup: %w", err)
	}
	return nil
}

// claimLines renders direct claims as YAML map lines, in name order.
func claimLines(claims map[string]string) string {
	names := make([]string, 0, len(claims))
	for n := range claims {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "    %q: %q\n", n, claims[n])
	}
	return b.String()
}
