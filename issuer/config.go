package issuer

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/goccy/go-yaml"

	"github.com/registrum/registrum/internal/envconfig"
	"github.com/registrum/registrum/internal/secrets"
	"github.com/registrum/registrum/internal/strictyaml"
	"github.com/registrum/registrum/internal/telemetry"
	"github.com/registrum/registrum/issuer/audit"
	"github.com/registrum/registrum/issuer/keys"
)

// Validation modes of the configuration document.
const (
	// ModeStrict admits only the transit signer.
	ModeStrict = "strict"
	// ModeSupervisedLocalDevelopment also admits the local-jwk signer.
	ModeSupervisedLocalDevelopment = "supervised-local-development"
)

// Signer kinds.
const (
	// SignerTransit signs through a Vault/OpenBao Transit proxy on a unix socket.
	SignerTransit = "transit"
	// SignerLocalJWK signs with a private JWK read from the file-secret root.
	SignerLocalJWK = "local-jwk"
)

// Defaults and bounds of the configuration document.
const (
	DefaultMaximumRequestBytes      = 16384
	MinimumRequestBytes             = 1024
	MaximumRequestBytes             = 1048576
	DefaultRequestTimeoutMillis     = 5000
	MaximumRequestTimeoutMillis     = 30000
	DefaultJWKSPath                 = "/.well-known/jwks.json"
	MinimumAuditFileBytes           = 1048576
	MaximumAuditFileBytes           = 1099511627776
	MinimumHashKeyBytes             = 32
	MinimumTokenLifetimeSeconds     = 60
	MaximumTokenLifetimeSeconds     = 3600
	MaximumStandardLifetimeSeconds  = 900
	DefaultAssertionLifetimeSeconds = 300
	MinimumAssertionLifetimeSeconds = 30
	MaximumAssertionLifetimeSeconds = 600
	DefaultReplayCacheEntries       = 8192
	MinimumReplayCacheEntries       = 256
	MaximumReplayCacheEntries       = 1 << 24
	MaximumAudiences                = 16
	MaximumAudienceBytes            = 512
	DefaultTransitTimeoutMillis     = 5000
	maximumConfigBytes              = 1 << 20
	maximumPublishedKeys            = 32
	maximumClaimNameBytes           = 128
	metadataPath                    = "/.well-known/oauth-authorization-server"
	openIDConfigurationPath         = "/.well-known/openid-configuration"
	tokenPath                       = "/token"
	healthPath                      = "/health"
	readyPath                       = "/ready"
	jwtBearerAssertionType          = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
	clientCredentialsGrant          = "client_credentials"
	defaultPrincipalClaim           = "sub"
	maximumTransitSocketPathBytes   = 107
	maximumIssuerBytes              = 2048
	maximumAssertionAudienceBytes   = 2048
	maximumTransitTimeoutMillis     = 30000
	minimumTransitTimeoutMillis     = 1
	maximumRevokedKeyIDs            = 33
	thumbprintLength                = 43
	maximumRegistrationFileBytes    = 256 << 10
	maximumRegisteredClients        = 4096
	maximumSignedResponseBytes      = 16384
	projectedTokenIDLength          = 22
	projectedKeyIDLength            = thumbprintLength
	projectedSignatureBytes         = 64
)

// Config is a validated issuer configuration with every default applied,
// every path made absolute and every key and secret file loaded.
type Config struct {
	// File is the absolute path of the configuration document.
	File string
	// ValidationMode is ModeStrict or ModeSupervisedLocalDevelopment.
	ValidationMode string
	// Issuer is the issuer identifier written as the token iss.
	Issuer string
	// EndpointBaseURL is what the metadata documents' endpoint URLs
	// (token_endpoint, jwks_uri) start with: the issuer identifier unless
	// endpointBaseUrl names where the endpoints are really served (plain
	// HTTP on loopback in supervised local development).
	EndpointBaseURL string
	// Listener holds the HTTP listener settings.
	Listener ListenerConfig
	// Signing holds the service's public keys and key-set path.
	Signing SigningConfig
	// Signer holds the signing provider settings.
	Signer SignerConfig
	// SecretRoot is the absolute file-secret root (secretProviders.file.root).
	SecretRoot string
	// Audit is the audit chain configuration, hash key resolved.
	Audit audit.Config
	// AuditHashKeyRef is the secret reference of the audit hash key.
	AuditHashKeyRef string
	// AccessTokens holds the issued-token settings.
	AccessTokens AccessTokenConfig
	// ClientAssertion holds the client-assertion rules.
	ClientAssertion ClientAssertionConfig
	// ClientsDirectory is the absolute folder of the client registration files.
	ClientsDirectory string
	// Telemetry is the export of OpenTelemetry traces, as the record host's
	// telemetry block configures it; nil when the document has none (no
	// exporter is built: docs/operations.md, "Traces").
	Telemetry *telemetry.Options

	// effective is the document as loaded, environment overrides applied;
	// overrides lists them.
	effective []byte
	overrides []envconfig.Override
}

// Effective returns the configuration document as it was applied: the
// file's keys with the environment's overrides, in YAML, and the overrides.
// It holds no secret: the document names secrets by file reference only.
func (c *Config) Effective() ([]byte, []envconfig.Override) { return c.effective, c.overrides }

// ListenerConfig is the validated listener section.
type ListenerConfig struct {
	// Address is the IP address to listen on.
	Address netip.Addr
	// Port is the TCP port (0 picks a free port).
	Port uint16
	// MaximumRequestBytes bounds the request body and the request headers.
	MaximumRequestBytes int64
	// RequestTimeout bounds reading a request and answering it.
	RequestTimeout time.Duration
}

// SigningConfig is the validated signing section.
type SigningConfig struct {
	// Active is the public P-256 JWK of the active signer.
	Active *jose.JSONWebKey
	// Published are the other public keys kept in the key set.
	Published []*jose.JSONWebKey
	// RevokedKeyIDs are denylisted thumbprints.
	RevokedKeyIDs []string
	// JWKSPath is the path of the key set.
	JWKSPath string
}

// SignerConfig is the validated signer section.
type SignerConfig struct {
	// Kind is SignerTransit or SignerLocalJWK.
	Kind string
	// PrivateKeyRef is the local-jwk secret reference.
	PrivateKeyRef string
	// UnixSocketPath, Mount, KeyName, KeyVersion and Timeout configure the transit signer.
	UnixSocketPath string
	Mount          string
	KeyName        string
	KeyVersion     int
	Timeout        time.Duration
	// TokenRef is the optional transit token secret reference.
	TokenRef string
}

// AccessTokenConfig is the validated accessTokens section.
type AccessTokenConfig struct {
	// Audiences are written as the token aud.
	Audiences []string
	// Lifetime is the token lifetime.
	Lifetime time.Duration
	// Claims names the evidence claims; nil when absent.
	Claims *ClaimNames
}

// ClaimNames are the configured evidence claim names.
type ClaimNames struct {
	// Principal names the principal claim ("sub" by default).
	Principal string
	// RequesterTags, EvidenceAudience, GrantID and GrantAuthority name the
	// evidence authority claims.
	RequesterTags    string
	EvidenceAudience string
	GrantID          string
	GrantAuthority   string
	// Actor is empty when delegated tokens are not configured.
	Actor string
}

// ClientAssertionConfig is the validated clientAssertion section.
type ClientAssertionConfig struct {
	// Audience is the exact aud every assertion must carry.
	Audience string
	// MaximumLifetime bounds exp - iat of an assertion.
	MaximumLifetime time.Duration
	// Algorithms are the accepted assertion signature algorithms.
	Algorithms []jose.SignatureAlgorithm
	// ReplayCacheEntries bounds the replay cache.
	ReplayCacheEntries int
}

// The YAML document as written. Pointers distinguish absent from zero.
type fileConfig struct {
	Version         *int                 `yaml:"version"`
	ValidationMode  *string              `yaml:"validationMode"`
	Issuer          *string              `yaml:"issuer"`
	EndpointBaseURL *string              `yaml:"endpointBaseUrl"`
	Listener        *fileListener        `yaml:"listener"`
	Signing         *fileSigning         `yaml:"signing"`
	Signer          *fileSigner          `yaml:"signer"`
	SecretProviders *fileSecretProviders `yaml:"secretProviders"`
	Audit           *fileAudit           `yaml:"audit"`
	AccessTokens    *fileAccessTokens    `yaml:"accessTokens"`
	ClientAssertion *fileClientAssertion `yaml:"clientAssertion"`
	Clients         *fileClients         `yaml:"clients"`
	Telemetry       *fileTelemetry       `yaml:"telemetry"`
}

// fileTelemetry is the telemetry block, with the record host's keys.
type fileTelemetry struct {
	OTLPEndpoint *string  `yaml:"otlpEndpoint"`
	ServiceName  *string  `yaml:"serviceName"`
	SampleRatio  *float64 `yaml:"sampleRatio"`
}

type fileListener struct {
	Address                    *string `yaml:"address"`
	Port                       *uint16 `yaml:"port"`
	MaximumRequestBytes        *uint32 `yaml:"maximumRequestBytes"`
	RequestTimeoutMilliseconds *uint64 `yaml:"requestTimeoutMilliseconds"`
}

type fileSigning struct {
	Algorithm               *string  `yaml:"algorithm"`
	ActivePublicJwkFile     *string  `yaml:"activePublicJwkFile"`
	PublishedPublicJwkFiles []string `yaml:"publishedPublicJwkFiles"`
	RevokedKeyIds           []string `yaml:"revokedKeyIds"`
	JwksPath                *string  `yaml:"jwksPath"`
}

type fileSigner struct {
	Kind                *string `yaml:"kind"`
	UnixSocketPath      *string `yaml:"unixSocketPath"`
	Mount               *string `yaml:"mount"`
	KeyName             *string `yaml:"keyName"`
	KeyVersion          *uint32 `yaml:"keyVersion"`
	TimeoutMilliseconds *uint64 `yaml:"timeoutMilliseconds"`
	TokenRef            *string `yaml:"tokenRef"`
	PrivateKeyRef       *string `yaml:"privateKeyRef"`
}

type fileSecretProviders struct {
	File *struct {
		Root *string `yaml:"root"`
	} `yaml:"file"`
}

type fileAudit struct {
	Path             *string `yaml:"path"`
	MaximumFileBytes *uint64 `yaml:"maximumFileBytes"`
	HashKeyRef       *string `yaml:"hashKeyRef"`
	HashKeyVersion   *uint32 `yaml:"hashKeyVersion"`
}

type fileAccessTokens struct {
	Audiences       []string        `yaml:"audiences"`
	LifetimeSeconds *uint64         `yaml:"lifetimeSeconds"`
	Claims          *fileClaimNames `yaml:"claims"`
}

type fileClaimNames struct {
	Principal        *string `yaml:"principal"`
	RequesterTags    *string `yaml:"requesterTags"`
	EvidenceAudience *string `yaml:"evidenceAudience"`
	GrantID          *string `yaml:"grantId"`
	GrantAuthority   *string `yaml:"grantAuthority"`
	Actor            *string `yaml:"actor"`
}

type fileClientAssertion struct {
	Audience               *string  `yaml:"audience"`
	MaximumLifetimeSeconds *uint64  `yaml:"maximumLifetimeSeconds"`
	Algorithms             []string `yaml:"algorithms"`
	ReplayCacheEntries     *uint64  `yaml:"replayCacheEntries"`
}

type fileClients struct {
	Directory *string `yaml:"directory"`
}

// inRange refuses v outside lo..hi.
func inRange(d *strictyaml.Document, field string, v, lo, hi uint64) error {
	if v < lo || v > hi {
		return d.Fail(field, fmt.Sprintf("must be between %d and %d", lo, hi), nil)
	}
	return nil
}

var (
	jwksSegment   = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)
	transitName   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	thumbprintRE  = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
	writtenClaims = map[string]bool{"iss": true, "aud": true, "exp": true, "iat": true, "nbf": true, "jti": true, "client_id": true, "scope": true}
)

// EnvPrefix starts the environment variables that override keys of the
// issuer's configuration document: listener.port is
// REGISTRUM_ISSUER_CONFIG_LISTENER_PORT (package internal/envconfig has the
// naming rule). An override is validated like the file's value.
const EnvPrefix = "REGISTRUM_ISSUER_CONFIG_"

// LoadConfig reads, validates and resolves the configuration document at
// path. It loads the public JWK files and resolves the audit hash key and the
// local signing key from the file-secret root. A refusal is a
// *strictyaml.Error naming the file, the line, the field path and the rule
// broken.
func LoadConfig(path string) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("issuer: config %s: %w", path, err)
	}
	var fc fileConfig
	doc, err := decodeStrict(abs, maximumConfigBytes, &fc)
	if err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	overrides, err := envconfig.Apply(&fc, EnvPrefix, os.Environ())
	if err != nil {
		return nil, fmt.Errorf("issuer: %s: %w", abs, err)
	}
	for _, o := range overrides {
		doc.SetOrigin(o.Path, "environment variable "+o.Variable)
	}
	effective, err := yaml.MarshalWithOptions(&fc, yaml.OmitEmpty())
	if err != nil {
		return nil, fmt.Errorf("issuer: %s: %w", abs, err)
	}
	cfg, err := validateConfig(doc, &fc)
	if err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	cfg.effective, cfg.overrides = effective, overrides
	return cfg, nil
}

// decodeStrict reads the YAML document at path, of at most limit bytes,
// strictly into v.
func decodeStrict(path string, limit int64, v any) (*strictyaml.Document, error) {
	doc, err := strictyaml.ReadFile(path, strictyaml.ConfigLimits(limit))
	if err != nil {
		return nil, err
	}
	if err := doc.Decode(v); err != nil {
		return nil, err
	}
	return doc, nil
}

// validateConfig checks the decoded document section by section, in the
// order the refusals are reported, and returns the resolved configuration.
// Paths are resolved against the document's folder. The secret providers
// come before the signing keys, the signer and the audit chain, which read
// files under the secret root, and the signer before the audit chain, whose
// hash key must differ from the signer's secrets.
func validateConfig(d *strictyaml.Document, fc *fileConfig) (*Config, error) {
	dir := filepath.Dir(d.File())
	resolve := func(p string) string {
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(dir, p)
	}
	c := &Config{File: d.File()}
	if err := validateVersionAndMode(d, fc, c); err != nil {
		return nil, err
	}
	if err := validateIssuer(d, fc, c); err != nil {
		return nil, err
	}
	if err := validateListener(d, fc.Listener, c); err != nil {
		return nil, err
	}
	if err := validateSecretProviders(d, fc.SecretProviders, c, resolve); err != nil {
		return nil, err
	}
	if err := validateSigning(d, fc.Signing, c, resolve); err != nil {
		return nil, err
	}
	if err := validateSigner(d, fc.Signer, c, resolve); err != nil {
		return nil, err
	}
	if err := validateAudit(d, fc.Audit, c, resolve); err != nil {
		return nil, err
	}
	if err := validateAccessTokens(d, fc.AccessTokens, c); err != nil {
		return nil, err
	}
	if err := validateClientAssertion(d, fc.ClientAssertion, c); err != nil {
		return nil, err
	}
	if err := validateClients(d, fc.Clients, c, resolve); err != nil {
		return nil, err
	}
	if err := validateTelemetry(d, fc.Telemetry, c); err != nil {
		return nil, err
	}
	return c, nil
}

// validateTelemetry checks the optional telemetry block by the rule the
// record host's configuration applies (telemetry.Options.Check) into c.
func validateTelemetry(d *strictyaml.Document, t *fileTelemetry, c *Config) error {
	if t == nil {
		return nil
	}
	o := &telemetry.Options{SampleRatio: t.SampleRatio}
	if t.OTLPEndpoint != nil {
		o.Endpoint = *t.OTLPEndpoint
	}
	if t.ServiceName != nil {
		o.ServiceName = *t.ServiceName
	}
	if key, rule := o.Check(); key != "" {
		return d.Fail("telemetry."+key, rule, nil)
	}
	c.Telemetry = o
	return nil
}

// validateVersionAndMode checks version (required, 1) and validationMode
// (strict unless set to supervised-local-development) into c.
func validateVersionAndMode(d *strictyaml.Document, fc *fileConfig, c *Config) error {
	if fc.Version == nil {
		return d.Fail("version", "is required", nil)
	}
	if *fc.Version != 1 {
		return d.Fail("version", "must equal 1", nil)
	}
	c.ValidationMode = ModeStrict
	if fc.ValidationMode != nil {
		switch *fc.ValidationMode {
		case ModeStrict, ModeSupervisedLocalDevelopment:
			c.ValidationMode = *fc.ValidationMode
		default:
			return d.Fail("validationMode", `must be "strict" or "supervised-local-development"`, nil)
		}
	}
	return nil
}

// validateIssuer checks the issuer identifier and endpointBaseUrl, which
// defaults to the identifier, into c. It needs c.ValidationMode: a plain
// HTTP endpoint base is allowed only in supervised local development.
func validateIssuer(d *strictyaml.Document, fc *fileConfig, c *Config) error {
	if fc.Issuer == nil {
		return d.Fail("issuer", "is required", nil)
	}
	if err := checkIssuerURL(*fc.Issuer); err != nil {
		return d.Fail("issuer", err.Error(), nil)
	}
	c.Issuer = *fc.Issuer
	c.EndpointBaseURL = c.Issuer
	if fc.EndpointBaseURL != nil {
		if err := checkEndpointBase(*fc.EndpointBaseURL, c.ValidationMode); err != nil {
			return d.Fail("endpointBaseUrl", err.Error(), nil)
		}
		c.EndpointBaseURL = *fc.EndpointBaseURL
	}
	return nil
}

// validateListener checks the required listener section into c.Listener,
// applying the default request size and timeout.
func validateListener(d *strictyaml.Document, l *fileListener, c *Config) error {
	if l == nil {
		return d.Fail("listener", "is required", nil)
	}
	if l.Address == nil {
		return d.Fail("listener.address", "is required", nil)
	}
	addr, err := netip.ParseAddr(*l.Address)
	if err != nil {
		return d.Fail("listener.address", "must be an IP address", nil)
	}
	c.Listener.Address = addr
	if l.Port == nil {
		return d.Fail("listener.port", "is required", nil)
	}
	c.Listener.Port = *l.Port
	c.Listener.MaximumRequestBytes = DefaultMaximumRequestBytes
	if l.MaximumRequestBytes != nil {
		v := uint64(*l.MaximumRequestBytes)
		if err := inRange(d, "listener.maximumRequestBytes", v, MinimumRequestBytes, MaximumRequestBytes); err != nil {
			return err
		}
		c.Listener.MaximumRequestBytes = int64(v)
	}
	c.Listener.RequestTimeout = DefaultRequestTimeoutMillis * time.Millisecond
	if l.RequestTimeoutMilliseconds != nil {
		v := *l.RequestTimeoutMilliseconds
		if err := inRange(d, "listener.requestTimeoutMilliseconds", v, 1, MaximumRequestTimeoutMillis); err != nil {
			return err
		}
		c.Listener.RequestTimeout = time.Duration(v) * time.Millisecond
	}
	return nil
}

// validateSecretProviders checks the required secretProviders section and
// sets c.SecretRoot, an existing folder, which the signer and the audit
// chain read their secrets from.
func validateSecretProviders(d *strictyaml.Document, sp *fileSecretProviders, c *Config, resolve func(string) string) error {
	if sp == nil {
		return d.Fail("secretProviders", "is required", nil)
	}
	if sp.File == nil {
		return d.Fail("secretProviders.file", "is required", nil)
	}
	if sp.File.Root == nil || *sp.File.Root == "" {
		return d.Fail("secretProviders.file.root", "is required", nil)
	}
	c.SecretRoot = resolve(*sp.File.Root)
	if st, err := os.Stat(c.SecretRoot); err != nil || !st.IsDir() {
		return d.Fail("secretProviders.file.root", "must be an existing folder", err)
	}
	return nil
}

// validateSigning checks the required signing section into c.Signing: the
// algorithm, the revoked key ids, the key-set path, and the active and
// published public keys, which it loads.
func validateSigning(d *strictyaml.Document, s *fileSigning, c *Config, resolve func(string) string) error {
	if s == nil {
		return d.Fail("signing", "is required", nil)
	}
	if s.Algorithm == nil {
		return d.Fail("signing.algorithm", "is required", nil)
	}
	if *s.Algorithm != "ES256" {
		return d.Fail("signing.algorithm", `must be "ES256"`, nil)
	}
	if len(s.PublishedPublicJwkFiles) > maximumPublishedKeys {
		return d.Fail("signing.publishedPublicJwkFiles", fmt.Sprintf("holds at most %d files", maximumPublishedKeys), nil)
	}
	revoked, err := validateRevokedKeyIDs(d, s.RevokedKeyIds)
	if err != nil {
		return err
	}
	c.Signing.RevokedKeyIDs = append([]string(nil), s.RevokedKeyIds...)
	c.Signing.JWKSPath = DefaultJWKSPath
	if s.JwksPath != nil {
		if err := checkJWKSPath(*s.JwksPath); err != nil {
			return d.Fail("signing.jwksPath", err.Error(), nil)
		}
		c.Signing.JWKSPath = *s.JwksPath
	}
	if s.ActivePublicJwkFile == nil || *s.ActivePublicJwkFile == "" {
		return d.Fail("signing.activePublicJwkFile", "is required", nil)
	}
	return loadSigningKeys(d, s, c, resolve, revoked)
}

// validateRevokedKeyIDs checks signing.revokedKeyIds (at most
// maximumRevokedKeyIDs distinct RFC 7638 thumbprints) and returns them as a
// set.
func validateRevokedKeyIDs(d *strictyaml.Document, ids []string) (map[string]bool, error) {
	if len(ids) > maximumRevokedKeyIDs {
		return nil, d.Fail("signing.revokedKeyIds", fmt.Sprintf("holds at most %d key ids", maximumRevokedKeyIDs), nil)
	}
	revoked := map[string]bool{}
	for i, kid := range ids {
		field := fmt.Sprintf("signing.revokedKeyIds[%d]", i)
		if !thumbprintRE.MatchString(kid) {
			return nil, d.Fail(field, "must be an RFC 7638 thumbprint (43 base64url characters)", nil)
		}
		if revoked[kid] {
			return nil, d.Fail(field, "is listed twice", nil)
		}
		revoked[kid] = true
	}
	return revoked, nil
}

// loadSigningKeys loads the active public key, then the published ones, into
// c.Signing. Each must be a public P-256 JWK whose kid is its thumbprint,
// not revoked, and not a repeat of a key loaded before it.
func loadSigningKeys(d *strictyaml.Document, s *fileSigning, c *Config, resolve func(string) string, revoked map[string]bool) error {
	seen := map[string]string{}
	loadKey := func(field, p string) (*jose.JSONWebKey, error) {
		k, err := keys.LoadActiveP256(resolve(p))
		if err != nil {
			return nil, d.Fail(field, "must be a public P-256 JWK whose kid is its RFC 7638 thumbprint", err)
		}
		if revoked[k.KeyID] {
			return nil, d.Fail(field, "names a key listed in signing.revokedKeyIds", nil)
		}
		if prev, ok := seen[k.KeyID]; ok {
			return nil, d.Fail(field, "repeats the key of "+prev, nil)
		}
		seen[k.KeyID] = field
		return k, nil
	}
	var err error
	if c.Signing.Active, err = loadKey("signing.activePublicJwkFile", *s.ActivePublicJwkFile); err != nil {
		return err
	}
	for i, p := range s.PublishedPublicJwkFiles {
		k, err := loadKey(fmt.Sprintf("signing.publishedPublicJwkFiles[%d]", i), p)
		if err != nil {
			return err
		}
		c.Signing.Published = append(c.Signing.Published, k)
	}
	return nil
}

// validateAudit checks the required audit section into c.Audit and
// c.AuditHashKeyRef. It needs c.SecretRoot and c.Signer: the hash key is
// read from the secret root and must differ from the signer's secrets, and
// the chain file must not be a secret file.
func validateAudit(d *strictyaml.Document, a *fileAudit, c *Config, resolve func(string) string) error {
	if a == nil {
		return d.Fail("audit", "is required", nil)
	}
	if err := validateAuditPath(d, a, c, resolve); err != nil {
		return err
	}
	if a.MaximumFileBytes == nil {
		return d.Fail("audit.maximumFileBytes", "is required", nil)
	}
	if err := inRange(d, "audit.maximumFileBytes", *a.MaximumFileBytes, MinimumAuditFileBytes, MaximumAuditFileBytes); err != nil {
		return err
	}
	c.Audit.MaximumFileBytes = int64(*a.MaximumFileBytes)
	if a.HashKeyVersion == nil {
		return d.Fail("audit.hashKeyVersion", "is required", nil)
	}
	if *a.HashKeyVersion == 0 {
		return d.Fail("audit.hashKeyVersion", "must be nonzero", nil)
	}
	c.Audit.HashKeyVersion = *a.HashKeyVersion
	if err := validateAuditHashKey(d, a, c); err != nil {
		return err
	}
	secretPath := filepath.Join(c.SecretRoot, strings.TrimPrefix(c.AuditHashKeyRef, secrets.FilePrefix))
	if secretPath == c.Audit.Path || (c.Signer.PrivateKeyRef != "" && filepath.Join(c.SecretRoot, strings.TrimPrefix(c.Signer.PrivateKeyRef, secrets.FilePrefix)) == c.Audit.Path) {
		return d.Fail("audit.path", "must not be a secret file", nil)
	}
	return nil
}

// validateAuditPath checks audit.path into c.Audit.Path: where they exist,
// its parent must be an owner-only folder and the chain file readable by
// its owner only.
func validateAuditPath(d *strictyaml.Document, a *fileAudit, c *Config, resolve func(string) string) error {
	if a.Path == nil || *a.Path == "" {
		return d.Fail("audit.path", "is required", nil)
	}
	c.Audit.Path = resolve(*a.Path)
	if st, err := os.Stat(filepath.Dir(c.Audit.Path)); err == nil {
		if !st.IsDir() {
			return d.Fail("audit.path", "parent must be a folder", nil)
		}
		if st.Mode().Perm()&0o077 != 0 {
			return d.Fail("audit.path", fmt.Sprintf("parent folder %s must be accessible by its owner only (mode %04o)", filepath.Dir(c.Audit.Path), st.Mode().Perm()), nil)
		}
	}
	if st, err := os.Lstat(c.Audit.Path); err == nil && st.Mode().Perm()&0o077 != 0 {
		return d.Fail("audit.path", fmt.Sprintf("chain file must be readable by its owner only (mode %04o)", st.Mode().Perm()), nil)
	}
	return nil
}

// validateAuditHashKey checks audit.hashKeyRef, which must differ from the
// signer's secret references, and reads the key (at least
// MinimumHashKeyBytes) from the secret root into c.Audit.HashKey.
func validateAuditHashKey(d *strictyaml.Document, a *fileAudit, c *Config) error {
	if a.HashKeyRef == nil {
		return d.Fail("audit.hashKeyRef", "is required", nil)
	}
	if err := checkSecretRef(*a.HashKeyRef); err != nil {
		return d.Fail("audit.hashKeyRef", err.Error(), nil)
	}
	if c.Signer.Kind == SignerLocalJWK && *a.HashKeyRef == c.Signer.PrivateKeyRef {
		return d.Fail("audit.hashKeyRef", "must differ from signer.privateKeyRef", nil)
	}
	if c.Signer.TokenRef != "" && *a.HashKeyRef == c.Signer.TokenRef {
		return d.Fail("audit.hashKeyRef", "must differ from signer.tokenRef", nil)
	}
	c.AuditHashKeyRef = *a.HashKeyRef
	hk, err := secrets.ResolveFile(c.SecretRoot, c.AuditHashKeyRef)
	if err != nil {
		return d.Fail("audit.hashKeyRef", "must name a regular owner-only file under secretProviders.file.root", err)
	}
	if len(hk) < MinimumHashKeyBytes {
		return d.Fail("audit.hashKeyRef", fmt.Sprintf("the key must be at least %d bytes", MinimumHashKeyBytes), nil)
	}
	c.Audit.HashKey = hk
	return nil
}

// validateAccessTokens checks the required accessTokens section into
// c.AccessTokens: 1 to MaximumAudiences distinct audiences, the lifetime,
// and the optional evidence claim names.
func validateAccessTokens(d *strictyaml.Document, at *fileAccessTokens, c *Config) error {
	if at == nil {
		return d.Fail("accessTokens", "is required", nil)
	}
	if len(at.Audiences) < 1 || len(at.Audiences) > MaximumAudiences {
		return d.Fail("accessTokens.audiences", fmt.Sprintf("must hold 1 to %d entries", MaximumAudiences), nil)
	}
	auds := map[string]bool{}
	for i, aud := range at.Audiences {
		field := fmt.Sprintf("accessTokens.audiences[%d]", i)
		if len(aud) < 1 || len(aud) > MaximumAudienceBytes || strings.TrimSpace(aud) == "" {
			return d.Fail(field, fmt.Sprintf("must be 1 to %d bytes and not blank", MaximumAudienceBytes), nil)
		}
		if auds[aud] {
			return d.Fail(field, "is listed twice", nil)
		}
		auds[aud] = true
	}
	c.AccessTokens.Audiences = append([]string(nil), at.Audiences...)
	if at.LifetimeSeconds == nil {
		return d.Fail("accessTokens.lifetimeSeconds", "is required", nil)
	}
	if err := inRange(d, "accessTokens.lifetimeSeconds", *at.LifetimeSeconds, MinimumTokenLifetimeSeconds, MaximumTokenLifetimeSeconds); err != nil {
		return err
	}
	c.AccessTokens.Lifetime = time.Duration(*at.LifetimeSeconds) * time.Second
	if at.Claims != nil {
		names, err := validateClaimNames(d, at.Claims)
		if err != nil {
			return err
		}
		c.AccessTokens.Claims = names
	}
	return nil
}

// validateClientAssertion checks the required clientAssertion section into
// c.ClientAssertion, applying the default maximum lifetime and replay-cache
// size.
func validateClientAssertion(d *strictyaml.Document, ca *fileClientAssertion, c *Config) error {
	if ca == nil {
		return d.Fail("clientAssertion", "is required", nil)
	}
	if ca.Audience == nil {
		return d.Fail("clientAssertion.audience", "is required", nil)
	}
	if err := checkAssertionAudience(*ca.Audience); err != nil {
		return d.Fail("clientAssertion.audience", err.Error(), nil)
	}
	c.ClientAssertion.Audience = *ca.Audience
	c.ClientAssertion.MaximumLifetime = DefaultAssertionLifetimeSeconds * time.Second
	if ca.MaximumLifetimeSeconds != nil {
		v := *ca.MaximumLifetimeSeconds
		if err := inRange(d, "clientAssertion.maximumLifetimeSeconds", v, MinimumAssertionLifetimeSeconds, MaximumAssertionLifetimeSeconds); err != nil {
			return err
		}
		c.ClientAssertion.MaximumLifetime = time.Duration(v) * time.Second
	}
	algs, err := validateAssertionAlgorithms(d, ca.Algorithms)
	if err != nil {
		return err
	}
	c.ClientAssertion.Algorithms = algs
	c.ClientAssertion.ReplayCacheEntries = DefaultReplayCacheEntries
	if ca.ReplayCacheEntries != nil {
		v := *ca.ReplayCacheEntries
		if err := inRange(d, "clientAssertion.replayCacheEntries", v, MinimumReplayCacheEntries, MaximumReplayCacheEntries); err != nil {
			return err
		}
		c.ClientAssertion.ReplayCacheEntries = int(v)
	}
	return nil
}

// validateAssertionAlgorithms checks clientAssertion.algorithms (one or
// more distinct of EdDSA, ES256 and RS256) and returns them in the order
// listed.
func validateAssertionAlgorithms(d *strictyaml.Document, listed []string) ([]jose.SignatureAlgorithm, error) {
	if len(listed) == 0 {
		return nil, d.Fail("clientAssertion.algorithms", "must list at least one of EdDSA, ES256, RS256", nil)
	}
	var algs []jose.SignatureAlgorithm
	algSeen := map[string]bool{}
	for i, alg := range listed {
		field := fmt.Sprintf("clientAssertion.algorithms[%d]", i)
		switch alg {
		case "EdDSA", "ES256", "RS256":
		default:
			return nil, d.Fail(field, "must be EdDSA, ES256 or RS256", nil)
		}
		if algSeen[alg] {
			return nil, d.Fail(field, "is listed twice", nil)
		}
		algSeen[alg] = true
		algs = append(algs, jose.SignatureAlgorithm(alg))
	}
	return algs, nil
}

// validateClients checks the required clients section and sets
// c.ClientsDirectory, an existing folder.
func validateClients(d *strictyaml.Document, cl *fileClients, c *Config, resolve func(string) string) error {
	if cl == nil {
		return d.Fail("clients", "is required", nil)
	}
	if cl.Directory == nil || *cl.Directory == "" {
		return d.Fail("clients.directory", "is required", nil)
	}
	c.ClientsDirectory = resolve(*cl.Directory)
	if st, err := os.Stat(c.ClientsDirectory); err != nil || !st.IsDir() {
		return d.Fail("clients.directory", "must be an existing folder", err)
	}
	return nil
}

func validateSigner(d *strictyaml.Document, fs *fileSigner, c *Config, resolve func(string) string) error {
	if fs == nil {
		return d.Fail("signer", "is required", nil)
	}
	if fs.Kind == nil {
		return d.Fail("signer.kind", "is required", nil)
	}
	c.Signer.Kind = *fs.Kind
	switch *fs.Kind {
	case SignerTransit:
		if fs.PrivateKeyRef != nil {
			return d.Fail("signer.privateKeyRef", "applies only to the local-jwk signer", nil)
		}
		if fs.UnixSocketPath == nil || *fs.UnixSocketPath == "" {
			return d.Fail("signer.unixSocketPath", "is required for the transit signer", nil)
		}
		c.Signer.UnixSocketPath = resolve(*fs.UnixSocketPath)
		if len(c.Signer.UnixSocketPath) > maximumTransitSocketPathBytes {
			return d.Fail("signer.unixSocketPath", fmt.Sprintf("must be at most %d bytes once resolved", maximumTransitSocketPathBytes), nil)
		}
		if fs.Mount == nil || !transitName.MatchString(*fs.Mount) {
			return d.Fail("signer.mount", "is required: 1 to 128 bytes of A-Z a-z 0-9 _ -", nil)
		}
		c.Signer.Mount = *fs.Mount
		if fs.KeyName == nil || !transitName.MatchString(*fs.KeyName) {
			return d.Fail("signer.keyName", "is required: 1 to 128 bytes of A-Z a-z 0-9 _ -", nil)
		}
		c.Signer.KeyName = *fs.KeyName
		if fs.KeyVersion == nil {
			return d.Fail("signer.keyVersion", "is required for the transit signer", nil)
		}
		if *fs.KeyVersion == 0 {
			return d.Fail("signer.keyVersion", "must be nonzero (a pinned version)", nil)
		}
		c.Signer.KeyVersion = int(*fs.KeyVersion)
		c.Signer.Timeout = DefaultTransitTimeoutMillis * time.Millisecond
		if fs.TimeoutMilliseconds != nil {
			v := *fs.TimeoutMilliseconds
			if err := inRange(d, "signer.timeoutMilliseconds", v, minimumTransitTimeoutMillis, maximumTransitTimeoutMillis); err != nil {
				return err
			}
			c.Signer.Timeout = time.Duration(v) * time.Millisecond
		}
		if fs.TokenRef != nil {
			if err := checkSecretRef(*fs.TokenRef); err != nil {
				return d.Fail("signer.tokenRef", err.Error(), nil)
			}
			c.Signer.TokenRef = *fs.TokenRef
		}
	case SignerLocalJWK:
		if c.ValidationMode != ModeSupervisedLocalDevelopment {
			return d.Fail("signer.kind", `"local-jwk" is allowed only with validationMode "supervised-local-development"; strict mode requires "transit"`, nil)
		}
		for field, set := range map[string]bool{
			"signer.unixSocketPath": fs.UnixSocketPath != nil, "signer.mount": fs.Mount != nil,
			"signer.keyName": fs.KeyName != nil, "signer.keyVersion": fs.KeyVersion != nil,
			"signer.timeoutMilliseconds": fs.TimeoutMilliseconds != nil, "signer.tokenRef": fs.TokenRef != nil,
		} {
			if set {
				return d.Fail(field, "applies only to the transit signer", nil)
			}
		}
		if fs.PrivateKeyRef == nil {
			return d.Fail("signer.privateKeyRef", "is required for the local-jwk signer", nil)
		}
		if err := checkSecretRef(*fs.PrivateKeyRef); err != nil {
			return d.Fail("signer.privateKeyRef", err.Error(), nil)
		}
		c.Signer.PrivateKeyRef = *fs.PrivateKeyRef
		if _, err := secrets.ResolveFile(c.SecretRoot, c.Signer.PrivateKeyRef); err != nil {
			return d.Fail("signer.privateKeyRef", "must name a regular owner-only file under secretProviders.file.root", err)
		}
	default:
		return d.Fail("signer.kind", `must be "transit" or "local-jwk"`, nil)
	}
	return nil
}

func validateClaimNames(d *strictyaml.Document, fc *fileClaimNames) (*ClaimNames, error) {
	n := &ClaimNames{Principal: defaultPrincipalClaim}
	type entry struct {
		field string
		src   *string
		dst   *string
		req   bool
	}
	entries := []entry{
		{"principal", fc.Principal, &n.Principal, false},
		{"requesterTags", fc.RequesterTags, &n.RequesterTags, true},
		{"evidenceAudience", fc.EvidenceAudience, &n.EvidenceAudience, true},
		{"grantId", fc.GrantID, &n.GrantID, true},
		{"grantAuthority", fc.GrantAuthority, &n.GrantAuthority, true},
		{"actor", fc.Actor, &n.Actor, false},
	}
	used := map[string]string{}
	for _, e := range entries {
		field := "accessTokens.claims." + e.field
		if e.src == nil {
			if e.req {
				return nil, d.Fail(field, "is required", nil)
			}
			if e.field == "principal" {
				used[n.Principal] = field
			}
			continue
		}
		v := *e.src
		if len(v) < 1 || len(v) > maximumClaimNameBytes || strings.TrimSpace(v) != v {
			return nil, d.Fail(field, fmt.Sprintf("must be 1 to %d bytes without surrounding spaces", maximumClaimNameBytes), nil)
		}
		if writtenClaims[v] {
			return nil, d.Fail(field, fmt.Sprintf("%q is a claim the issuer writes itself", v), nil)
		}
		if v == "sub" && e.field != "principal" {
			return nil, d.Fail(field, `"sub" may be used only for principal`, nil)
		}
		if prev, ok := used[v]; ok {
			return nil, d.Fail(field, fmt.Sprintf("%q is already used by %s", v, prev), nil)
		}
		used[v] = field
		*e.dst = v
	}
	return n, nil
}

func checkIssuerURL(s string) error {
	if len(s) == 0 || len(s) > maximumIssuerBytes {
		return fmt.Errorf("must be a URL of 1 to %d bytes", maximumIssuerBytes)
	}
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("must be a URL")
	}
	if u.Scheme != "https" {
		return errors.New("must use the https scheme")
	}
	return checkURLParts(u, s)
}

// checkEndpointBase checks endpointBaseUrl: an https URL with a host and no
// query or fragment, or, in supervised local development only, an http URL
// whose host is a loopback address.
func checkEndpointBase(s, mode string) error {
	if len(s) == 0 || len(s) > maximumIssuerBytes {
		return fmt.Errorf("must be a URL of 1 to %d bytes", maximumIssuerBytes)
	}
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("must be a URL")
	}
	switch u.Scheme {
	case "https":
	case "http":
		ip, err := netip.ParseAddr(u.Hostname())
		if mode != ModeSupervisedLocalDevelopment || err != nil || !ip.IsLoopback() {
			return errors.New("must use the https scheme (http only with a loopback IP address in supervised-local-development)")
		}
	default:
		return errors.New("must use the https scheme")
	}
	return checkURLParts(u, s)
}

func checkAssertionAudience(s string) error {
	if len(s) == 0 || len(s) > maximumAssertionAudienceBytes {
		return fmt.Errorf("must be a URL of 1 to %d bytes", maximumAssertionAudienceBytes)
	}
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("must be a URL")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return errors.New("must use the https or http scheme")
	}
	return checkURLParts(u, s)
}

func checkURLParts(u *url.URL, raw string) error {
	switch {
	case u.Host == "" || u.Hostname() == "":
		return errors.New("must have a host")
	case u.User != nil:
		return errors.New("must not carry credentials")
	case u.RawQuery != "" || strings.Contains(raw, "?"):
		return errors.New("must not have a query")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return errors.New("must not have a fragment")
	}
	return nil
}

func checkJWKSPath(p string) error {
	if !strings.HasPrefix(p, "/") || p == "/" {
		return errors.New("must be an absolute path of one or more segments")
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" {
			return errors.New("must not have empty segments")
		}
		if seg == "." || seg == ".." {
			return errors.New("must not have dot segments")
		}
		if !jwksSegment.MatchString(seg) {
			return errors.New("segments may use only A-Z a-z 0-9 - . _ ~ (no query, fragment or route pattern)")
		}
	}
	switch p {
	case tokenPath, healthPath, readyPath, metadataPath, openIDConfigurationPath:
		return fmt.Errorf("%q is a reserved path", p)
	}
	return nil
}

func checkSecretRef(ref string) error {
	if _, err := secrets.ParseRef(ref); err != nil {
		return errors.New(`must be "secret:file/<name>" with a plain file name of 1 to 128 bytes of A-Z a-z 0-9 . _ - starting with a letter or digit`)
	}
	return nil
}
