package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/registrum/registrum/internal/secrets"
)

// ReviewAuthority is an external review authority the host submits
// proposals to and pulls results from (the package names it by id in a
// request entity's review.authority).
type ReviewAuthority struct {
	// Endpoint is the authority's base URL: https, or http on a loopback
	// address (tests, local development).
	Endpoint string `yaml:"endpoint"`
	// Profile is sent as the Registry-Casework-Profile header.
	Profile string `yaml:"profile"`
	// ProducerID names this registry as the authority's producer: the
	// subject source of every submission.
	ProducerID string `yaml:"producerId"`
	// RecoveryDays bounds how long a submission is retried and its result
	// polled before the request needs an operator (default 30).
	RecoveryDays int `yaml:"recoveryDays"`
	// PollSeconds is the pause between two polls of a pending result
	// (default 30).
	PollSeconds int `yaml:"pollSeconds"`
	// Client is the host's credential with the authority: a client of a
	// token issuer (Registrum's own), authenticated with a private key JWT.
	// Exactly one of Client and StaticTokenRef is set.
	Client ClientCredentials `yaml:"client"`
	// StaticTokenRef is the other credential form: a file secret
	// (`secret:file/<name>`) holding a bearer token the authority issued to
	// this registry (an authority run by another institution does not
	// accept Registrum's issuer). It is read on every call, so a rotated
	// file is used without a restart; surrounding whitespace (a trailing
	// newline) is not part of the token.
	StaticTokenRef string `yaml:"staticTokenRef"`
}

// Executor is a logical executor that applies approved requests whose
// application mode is automatic, through the same apply action and guards
// as a person, with a credential of its own.
type Executor struct {
	// AccessProfile is the profile its apply selects.
	AccessProfile string `yaml:"accessProfile"`
	// Client is its credential.
	Client ClientCredentials `yaml:"client"`
}

// ClientCredentials is an OAuth client of a token issuer using
// private_key_jwt: the token endpoint, the client id, the secret holding
// its private JWK, and the assertion audience (default: the token URL).
type ClientCredentials struct {
	TokenURL string `yaml:"tokenUrl"`
	ClientID string `yaml:"clientId"`
	KeyRef   string `yaml:"keyRef"`
	Audience string `yaml:"audience"`
}

var idPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)

func (c *Config) validateReview() error {
	if err := c.validateJobs(); err != nil {
		return err
	}
	for id, a := range c.ReviewAuthorities {
		at := "reviewAuthorities." + id
		if !idPattern.MatchString(id) {
			return c.fail(at, "an authority id is lowercase letters, digits and dashes")
		}
		if a == nil {
			return c.fail(at, "is empty")
		}
		if err := checkEndpoint(a.Endpoint); err != nil {
			return c.fail(at+".endpoint", "%v", err)
		}
		if a.Profile == "" || a.ProducerID == "" {
			return c.fail(at, "profile and producerId are required")
		}
		if a.RecoveryDays < 0 || a.PollSeconds < 0 {
			return c.fail(at, "recoveryDays and pollSeconds must not be negative")
		}
		if a.RecoveryDays == 0 {
			a.RecoveryDays = 30
		}
		if a.PollSeconds == 0 {
			a.PollSeconds = 30
		}
		switch hasClient := a.Client != (ClientCredentials{}); {
		case hasClient && a.StaticTokenRef != "":
			return c.fail(at, "set exactly one credential: client or staticTokenRef, not both")
		case a.StaticTokenRef != "":
			if _, err := secrets.ParseRef(a.StaticTokenRef); err != nil {
				return c.fail(at+".staticTokenRef", "%v", err)
			}
		case !hasClient:
			return c.fail(at, "a credential is required: client (Registrum's issuer) or staticTokenRef (a file secret)")
		default:
			if err := c.checkClient(at+".client", a.Client); err != nil {
				return err
			}
		}
	}
	for id, x := range c.Executors {
		at := "executors." + id
		if !idPattern.MatchString(id) {
			return c.fail(at, "an executor id is lowercase letters, digits and dashes")
		}
		if x == nil || x.AccessProfile == "" {
			return c.fail(at+".accessProfile", "is required")
		}
		if err := c.checkClient(at+".client", x.Client); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) checkClient(at string, cc ClientCredentials) error {
	if err := checkEndpoint(cc.TokenURL); err != nil {
		return c.fail(at+".tokenUrl", "%v", err)
	}
	if cc.ClientID == "" {
		return c.fail(at+".clientId", "is required")
	}
	if _, err := secrets.ParseRef(cc.KeyRef); err != nil {
		return c.fail(at+".keyRef", "%v", err)
	}
	return nil
}

// checkEndpoint accepts an https URL, or http on a loopback address.
func checkEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return fmt.Errorf("must be an absolute URL")
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("must be https (http only on a loopback address)")
}

// StaticToken resolves a static bearer token reference
// (ReviewAuthority.StaticTokenRef): the file's bytes without surrounding
// whitespace, refused when empty or holding anything but visible ASCII.
func (c *Config) StaticToken(ref string) (string, error) {
	raw, err := secrets.ResolveFile(c.Secrets.Root, ref)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(raw))
	if tok == "" {
		return "", fmt.Errorf("the secret %s holds no token", ref)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] > '~' {
			return "", fmt.Errorf("the secret %s holds more than one visible ASCII token", ref)
		}
	}
	return tok, nil
}

// ClientKey resolves a client's private JWK bytes.
func (c *Config) ClientKey(cc ClientCredentials) ([]byte, error) {
	return secrets.ResolveFile(c.Secrets.Root, cc.KeyRef)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Jobs tune the post-commit job workers.
type Jobs struct {
	// TimeoutSeconds bounds one run of a job (default 60).
	TimeoutSeconds int `yaml:"timeoutSeconds"`
	// RescueAfterSeconds is how long a job may stay running before it is
	// given to a worker again: a host that died mid-job leaves it running
	// (default 120; more than TimeoutSeconds). Every job of the host is
	// idempotent, so a rescued job completes its work exactly once.
	RescueAfterSeconds int `yaml:"rescueAfterSeconds"`
}

// JobTimeouts returns the job timeout and rescue delay, with defaults.
func (c *Config) JobTimeouts() (timeout, rescueAfter time.Duration) {
	t, r := 60, 120
	if c.Jobs != nil {
		if c.Jobs.TimeoutSeconds > 0 {
			t = c.Jobs.TimeoutSeconds
		}
		if c.Jobs.RescueAfterSeconds > 0 {
			r = c.Jobs.RescueAfterSeconds
		}
	}
	return time.Duration(t) * time.Second, time.Duration(r) * time.Second
}

func (c *Config) validateJobs() error {
	if c.Jobs == nil {
		return nil
	}
	if c.Jobs.TimeoutSeconds < 0 || c.Jobs.RescueAfterSeconds < 0 {
		return c.fail("jobs", "timeoutSeconds and rescueAfterSeconds must not be negative")
	}
	if t, r := c.JobTimeouts(); r <= t {
		return c.fail("jobs.rescueAfterSeconds", "must be more than timeoutSeconds")
	}
	return nil
}
