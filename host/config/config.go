// Package config loads the record host's runtime configuration: where it
// listens, which database and package it serves, and where its secrets are.
// Decoding is strict (unknown keys are refused); relative paths resolve
// against the configuration file's folder; every refusal names the file, the
// key path and the rule.
package config

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/registrum/registrum/internal/envconfig"
	"github.com/registrum/registrum/internal/secrets"
	"github.com/registrum/registrum/internal/strictyaml"
	"github.com/registrum/registrum/internal/telemetry"
)

// Config is the runtime configuration of `registrum serve`.
type Config struct {
	// Version must be 1.
	Version int `yaml:"version"`
	// Listener is the public HTTP listener.
	Listener Listener `yaml:"listener"`
	// Metrics is the optional Prometheus listener, separate from the public one.
	Metrics *Listener `yaml:"metrics"`
	// Database names the PostgreSQL database.
	Database Database `yaml:"database"`
	// Package is the path of the compiled package (folder or package.json).
	Package string `yaml:"package"`
	// ActivateOnStart moves the database to the package on start when the
	// database holds another package, as `registrum activate` does; its
	// destructive changes are refused (they need `registrum activate
	// --confirm-destructive`). Without it such a database is refused.
	ActivateOnStart bool `yaml:"activateOnStart"`
	// Secrets holds the file-secret root.
	Secrets Secrets `yaml:"secrets"`
	// Authentication configures how bearer tokens are verified; see
	// Authentication. Required when the package has a non-anonymous profile.
	Authentication *Authentication `yaml:"authentication"`
	// HostKeyRef names the host's root secret (at least 32 bytes), from which
	// the ETag, record-reference and cursor keys are derived.
	HostKeyRef string `yaml:"hostKeyRef"`
	// ReviewAuthorities are the external review authorities, by the id the
	// package's request entities name them with.
	ReviewAuthorities map[string]*ReviewAuthority `yaml:"reviewAuthorities"`
	// Executors are the logical executors of automatic application, by id.
	Executors map[string]*Executor `yaml:"executors"`
	// Jobs tune the post-commit job workers (optional).
	Jobs *Jobs `yaml:"jobs"`
	// InstanceID names this deployment in the source of its events
	// (urn:engine:registry:<registry>:instance:<instanceId>); required
	// when EventDestinations are bound.
	InstanceID string `yaml:"instanceId"`
	// EventDestinations bind the package's url hooks to webhook
	// destinations, by the id the hooks name (handler.destinationId).
	EventDestinations map[string]*EventDestination `yaml:"eventDestinations"`
	// CORS admits browser applications served from other origins; off when
	// absent.
	CORS *CORS `yaml:"cors"`
	// RateLimit limits each client's requests to /v1; off when absent.
	RateLimit *RateLimit `yaml:"rateLimit"`
	// LogLevel is the least severe level logged: debug, info (the
	// default), warn or error. At warn and above the per-request lines
	// (info) are no longer written.
	LogLevel string `yaml:"logLevel"`
	// Telemetry exports OpenTelemetry traces over OTLP/HTTP; off when
	// absent (docs/operations.md, "Traces").
	Telemetry *Telemetry `yaml:"telemetry"`

	// path is the configuration file, for messages.
	path string
	// doc is the decoded document, to place refusals on their lines.
	doc *strictyaml.Document
	// overrides are the keys the environment set (EnvPrefix).
	overrides []envconfig.Override
}

// Listener is an HTTP listener address.
type Listener struct {
	Address string `yaml:"address"`
	Port    int    `yaml:"port"`
	// DrainSeconds is how long the public listener keeps serving after a
	// SIGTERM while /ready already answers 503, so that a load balancer
	// stops sending new requests before the listener closes (default
	// DefaultDrainSeconds; 0 closes at once, as development and tests
	// want). Only the public listener takes it.
	DrainSeconds *int `yaml:"drainSeconds"`
}

// DefaultDrainSeconds is the drain delay of a configuration that sets no
// listener.drainSeconds: a little more than the probe period a load
// balancer or a Kubernetes readiness probe typically uses (5 s), so that
// one failed probe lands before the listener closes.
const DefaultDrainSeconds = 5

// MaxDrainSeconds bounds listener.drainSeconds: a longer delay would
// outlast the grace period of most process supervisors (Kubernetes: 30 s)
// before the in-flight requests and jobs even start to finish.
const MaxDrainSeconds = 60

// Drain returns the public listener's drain delay (listener.drainSeconds,
// DefaultDrainSeconds when unset).
func (c *Config) Drain() time.Duration {
	if c.Listener.DrainSeconds == nil {
		return DefaultDrainSeconds * time.Second
	}
	return time.Duration(*c.Listener.DrainSeconds) * time.Second
}

// Addr returns host:port.
func (l Listener) Addr() string { return net.JoinHostPort(l.Address, fmt.Sprint(l.Port)) }

// Database names the database: a connection string without a password
// (url), or a secret holding one (urlRef). Behind a pooler in transaction
// mode (PgBouncer), url names the pooler and directUrl (or directUrlRef)
// the server itself, for what needs a session of its own: the migration
// lock, River's LISTEN and the activation watch (docs/record-host.md,
// "Connection poolers").
type Database struct {
	URL          string `yaml:"url"`
	URLRef       string `yaml:"urlRef"`
	DirectURL    string `yaml:"directUrl"`
	DirectURLRef string `yaml:"directUrlRef"`
}

// Secrets holds the file-secret provider's root folder.
type Secrets struct {
	Root string `yaml:"root"`
}

// MaxFileBytes bounds the configuration file.
const MaxFileBytes = 1 << 20

// EnvPrefix starts the environment variables that override keys of the
// configuration: listener.port is REGISTRUM_CONFIG_LISTENER_PORT,
// reviewAuthorities.desk.endpoint is
// REGISTRUM_CONFIG_REVIEW_AUTHORITIES_DESK_ENDPOINT (package
// internal/envconfig has the naming rule). An override is validated like
// the file's value; a variable under the prefix that names no key is
// refused.
const EnvPrefix = "REGISTRUM_CONFIG_"

// Load reads, decodes and validates a configuration file, with the
// environment's overrides (EnvPrefix) applied. A refusal is a
// *strictyaml.Error naming the file, the line, the key path and the rule,
// or the variable of an overridden key.
func Load(path string) (*Config, error) {
	return load(path, os.Environ())
}

// load is Load with the environment given.
func load(path string, environ []string) (*Config, error) {
	doc, err := strictyaml.ReadFile(path, strictyaml.ConfigLimits(MaxFileBytes))
	if err != nil {
		return nil, err // names the file
	}
	var c Config
	if err := doc.Decode(&c); err != nil {
		return nil, err
	}
	overrides, err := envconfig.Apply(&c, EnvPrefix, environ)
	if err != nil {
		return nil, &strictyaml.Error{File: path, Message: "environment overrides", Err: err}
	}
	for _, o := range overrides {
		doc.SetOrigin(o.Path, "environment variable "+o.Variable)
	}
	c.path, c.doc, c.overrides = path, doc, overrides
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Effective returns the configuration as it applies: the file's keys with
// the environment's overrides, in YAML, and the overrides. It holds no
// secret: the configuration names secrets by file reference only (a
// database.url with a password is refused).
func (c *Config) Effective() ([]byte, []envconfig.Override, error) {
	b, err := yaml.MarshalWithOptions(c, yaml.OmitEmpty())
	if err != nil {
		return nil, nil, fmt.Errorf("config: %s: effective configuration: %w", c.path, err)
	}
	return b, c.overrides, nil
}

// fail refuses the value at keyPath, on its line when the document is known.
func (c *Config) fail(keyPath, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if c.doc == nil {
		return &strictyaml.Error{File: c.path, Path: keyPath, Message: msg}
	}
	return c.doc.Fail(keyPath, msg, nil)
}

func (c *Config) validate() error {
	dir := filepath.Dir(c.path)
	if c.Version != 1 {
		return c.fail("version", "must equal 1")
	}
	if err := c.checkListener("listener", c.Listener); err != nil {
		return err
	}
	if d := c.Listener.DrainSeconds; d != nil && (*d < 0 || *d > MaxDrainSeconds) {
		return c.fail("listener.drainSeconds", "must be between 0 and %d", MaxDrainSeconds)
	}
	if c.Metrics != nil {
		if err := c.checkListener("metrics", *c.Metrics); err != nil {
			return err
		}
		if c.Metrics.DrainSeconds != nil {
			return c.fail("metrics.drainSeconds", "only the public listener drains; set listener.drainSeconds")
		}
		if c.Metrics.Addr() == c.Listener.Addr() && c.Listener.Port != 0 {
			return c.fail("metrics", "must differ from the public listener")
		}
	}
	switch {
	case c.Database.URL == "" && c.Database.URLRef == "":
		return c.fail("database", "set url or urlRef")
	case c.Database.URL != "" && c.Database.URLRef != "":
		return c.fail("database", "set url or urlRef, not both")
	case c.Database.URL != "" && hasPassword(c.Database.URL):
		return c.fail("database.url", "must not hold a password; put the connection string in a secret and name it with urlRef")
	}
	switch {
	case c.Database.DirectURL != "" && c.Database.DirectURLRef != "":
		return c.fail("database", "set directUrl or directUrlRef, not both")
	case c.Database.DirectURL != "" && hasPassword(c.Database.DirectURL):
		return c.fail("database.directUrl", "must not hold a password; put the connection string in a secret and name it with directUrlRef")
	}
	if _, err := ParseLogLevel(c.LogLevel); err != nil {
		return c.fail("logLevel", "%v", err)
	}
	if c.Package == "" {
		return c.fail("package", "is required")
	}
	c.Package = resolve(dir, c.Package)
	if c.Secrets.Root == "" {
		return c.fail("secrets.root", "is required")
	}
	c.Secrets.Root = resolve(dir, c.Secrets.Root)
	if c.HostKeyRef == "" {
		return c.fail("hostKeyRef", "is required")
	}
	if _, err := secrets.ParseRef(c.HostKeyRef); err != nil {
		return c.fail("hostKeyRef", "%v", err)
	}
	if c.Database.URLRef != "" {
		if _, err := secrets.ParseRef(c.Database.URLRef); err != nil {
			return c.fail("database.urlRef", "%v", err)
		}
	}
	if c.Database.DirectURLRef != "" {
		if _, err := secrets.ParseRef(c.Database.DirectURLRef); err != nil {
			return c.fail("database.directUrlRef", "%v", err)
		}
	}
	if c.Authentication != nil {
		if err := c.Authentication.validate(c, dir); err != nil {
			return err
		}
	}
	if err := c.validateLimits(); err != nil {
		return err
	}
	if err := c.validateTelemetry(); err != nil {
		return err
	}
	if err := c.validateEvents(); err != nil {
		return err
	}
	return c.validateReview()
}

func (c *Config) checkListener(path string, l Listener) error {
	ip := net.ParseIP(l.Address)
	if ip == nil {
		return c.fail(path+".address", "must be an IP address")
	}
	if l.Port < 0 || l.Port > 65535 {
		return c.fail(path+".port", "must be between 0 and 65535")
	}
	return nil
}

// Telemetry configures the export of OpenTelemetry traces.
type Telemetry struct {
	// OTLPEndpoint is the OTLP/HTTP endpoint (http or https, no query); spans
	// are posted to its path, or to /v1/traces when it has none.
	OTLPEndpoint string `yaml:"otlpEndpoint"`
	// ServiceName is the service.name of the spans (default "registrum").
	ServiceName string `yaml:"serviceName"`
	// SampleRatio is the share of new traces sampled, from 0 to 1 (default
	// 1); an inbound traceparent's sampled flag is followed.
	SampleRatio *float64 `yaml:"sampleRatio"`
}

// validateTelemetry checks telemetry by the rule both services'
// configurations share (telemetry.Options.Check).
func (c *Config) validateTelemetry() error {
	t := c.Telemetry
	if t == nil {
		return nil
	}
	if key, rule := (telemetry.Options{Endpoint: t.OTLPEndpoint, ServiceName: t.ServiceName, SampleRatio: t.SampleRatio}).Check(); key != "" {
		return c.fail("telemetry."+key, "%s", rule)
	}
	return nil
}

// CORS lists the origins whose browser applications may call the host
// (docs/record-host.md, "Browsers and rate limits").
type CORS struct {
	// AllowedOrigins are serialized origins, scheme://host[:port] in lower
	// case as browsers send them in Origin (http or https, no path), or
	// the single entry "*" for every origin.
	AllowedOrigins []string `yaml:"allowedOrigins"`
	// MaxAgeSeconds is how long a browser may cache a preflight answer
	// (default DefaultCORSMaxAgeSeconds, at most MaxCORSMaxAgeSeconds).
	MaxAgeSeconds *int `yaml:"maxAgeSeconds"`
}

// Bounds of cors.maxAgeSeconds: browsers cap it anyway (Chromium at two
// hours, Firefox at a day).
const (
	DefaultCORSMaxAgeSeconds = 600
	MaxCORSMaxAgeSeconds     = 86400
)

// MaxAge returns how long a browser may cache a preflight answer.
func (c *CORS) MaxAge() time.Duration {
	if c.MaxAgeSeconds == nil {
		return DefaultCORSMaxAgeSeconds * time.Second
	}
	return time.Duration(*c.MaxAgeSeconds) * time.Second
}

// RateLimit limits each client's requests to /v1: a token bucket per
// client, refilled at RequestsPerSecond and holding at most Burst requests.
// The client is the principal of a verified bearer token, else the remote
// address (docs/record-host.md, "Browsers and rate limits").
type RateLimit struct {
	// RequestsPerSecond is each client's sustained rate (a positive
	// number; 0.5 is one request every two seconds).
	RequestsPerSecond float64 `yaml:"requestsPerSecond"`
	// Burst is how many requests a client may send at once (at least 1).
	Burst int `yaml:"burst"`
	// Clients bounds the table of clients the host remembers (default
	// 10000); the least recently seen is forgotten first.
	Clients int `yaml:"clients"`
}

// Bounds of rateLimit.
const (
	MaxRateLimitRequestsPerSecond = 1_000_000
	MaxRateLimitClients           = 1_000_000
)

// validateLimits checks cors and rateLimit.
func (c *Config) validateLimits() error {
	if c.CORS != nil {
		if len(c.CORS.AllowedOrigins) == 0 {
			return c.fail("cors.allowedOrigins", "list at least one origin, or leave cors out")
		}
		for i, o := range c.CORS.AllowedOrigins {
			key := fmt.Sprintf("cors.allowedOrigins[%d]", i)
			if o == "*" {
				if len(c.CORS.AllowedOrigins) > 1 {
					return c.fail(key, `"*" admits every origin and must be the only entry`)
				}
				continue
			}
			if !serializedOrigin(o) {
				return c.fail(key, "must be an origin as browsers send it: http or https, scheme://host[:port] in lower case, no default port, no path")
			}
		}
		if m := c.CORS.MaxAgeSeconds; m != nil && (*m < 0 || *m > MaxCORSMaxAgeSeconds) {
			return c.fail("cors.maxAgeSeconds", "must be between 0 and %d", MaxCORSMaxAgeSeconds)
		}
	}
	if l := c.RateLimit; l != nil {
		if !(l.RequestsPerSecond > 0 && l.RequestsPerSecond <= MaxRateLimitRequestsPerSecond) {
			return c.fail("rateLimit.requestsPerSecond", "must be a number above 0 and at most %d", MaxRateLimitRequestsPerSecond)
		}
		if l.Burst < 1 {
			return c.fail("rateLimit.burst", "must be at least 1")
		}
		if l.Clients < 0 || l.Clients > MaxRateLimitClients {
			return c.fail("rateLimit.clients", "must be between 0 (the default) and %d", MaxRateLimitClients)
		}
	}
	return nil
}

// serializedOrigin reports whether o is an http or https origin serialized
// as a browser sends it in Origin.
func serializedOrigin(o string) bool {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	// A browser leaves the scheme's default port out of Origin.
	port := u.Port()
	if port == "0" || (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		return false
	}
	return o == strings.ToLower(u.Scheme+"://"+u.Host)
}

// MinHostKeyBytes is the minimum length of the host's root secret.
const MinHostKeyBytes = 32

// HostKey resolves the host's root secret.
func (c *Config) HostKey() ([]byte, error) {
	k, err := secrets.ResolveFile(c.Secrets.Root, c.HostKeyRef)
	if err != nil {
		return nil, c.fail("hostKeyRef", "%v", err)
	}
	if len(k) < MinHostKeyBytes {
		return nil, c.fail("hostKeyRef", "the secret must hold at least %d bytes", MinHostKeyBytes)
	}
	return k, nil
}

// DatabaseURL resolves the database connection string.
func (c *Config) DatabaseURL() (string, error) {
	return c.resolveURL(c.Database.URL, c.Database.URLRef, "database.urlRef")
}

// DirectDatabaseURL resolves the direct connection string (directUrl or
// directUrlRef), "" when neither is set: then url names the server itself.
func (c *Config) DirectDatabaseURL() (string, error) {
	if c.Database.DirectURL == "" && c.Database.DirectURLRef == "" {
		return "", nil
	}
	return c.resolveURL(c.Database.DirectURL, c.Database.DirectURLRef, "database.directUrlRef")
}

// SessionDatabaseURL is the connection string for what needs a session of
// its own (the migration lock): the direct URL when set, else url.
func (c *Config) SessionDatabaseURL() (string, error) {
	direct, err := c.DirectDatabaseURL()
	if err != nil || direct != "" {
		return direct, err
	}
	return c.DatabaseURL()
}

func (c *Config) resolveURL(url, ref, refKey string) (string, error) {
	if url != "" {
		return url, nil
	}
	b, err := secrets.ResolveFile(c.Secrets.Root, ref)
	if err != nil {
		return "", c.fail(refKey, "%v", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", c.fail(refKey, "the secret is empty")
	}
	return s, nil
}

// LogLevels are the values of logLevel, from the most verbose.
var LogLevels = []string{"debug", "info", "warn", "error"}

// ParseLogLevel returns the slog level of a logLevel value ("" is info).
// `registrum issuer serve --log-level` takes the same values.
func ParseLogLevel(s string) (slog.Level, error) {
	switch s {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("must be one of %s", strings.Join(LogLevels, ", "))
}

// Level returns the configured log level (logLevel; info when unset).
func (c *Config) Level() slog.Level {
	l, _ := ParseLogLevel(c.LogLevel) // validated by Load
	return l
}

// Path returns the configuration file's path.
func (c *Config) Path() string { return c.path }

func resolve(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// hasPassword reports whether a connection string carries a password.
func hasPassword(conn string) bool {
	if u, err := url.Parse(conn); err == nil && u.Scheme != "" {
		_, set := u.User.Password()
		return set || u.Query().Has("password")
	}
	for _, kv := range strings.Fields(conn) {
		if strings.HasPrefix(kv, "password=") {
			return true
		}
	}
	return false
}
