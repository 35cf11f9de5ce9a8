package desk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
)

// Config is the desk's configuration: where it keeps its requests, the
// reviewer's password hash, which callers may submit, and the review
// policies it applies.
type Config struct {
	// PublicURL is the desk's base URL as reviewers open it. An https URL
	// makes the session cookie Secure (and __Host- prefixed); plain http is
	// accepted on loopback addresses only.
	PublicURL string `json:"publicUrl"`
	// DataFile is the JSON file holding the review requests and their
	// results (written atomically after every change).
	DataFile string `json:"dataFile"`
	// ReviewerPasswordHash is the reviewer's password as HashPassword makes
	// it ("pbkdf2-sha256$<iterations>$<salt>$<key>"), never the password.
	ReviewerPasswordHash string `json:"reviewerPasswordHash"`
	// Authentication says whose bearer tokens the review protocol accepts.
	Authentication Authentication `json:"authentication"`
	// Profiles are the accepted Registry-Casework-Profile header values.
	Profiles []string `json:"profiles"`
	// Policies are the review policies by id (a submission's kind).
	Policies map[string]Policy `json:"policies"`
	// MaximumApprovalDays bounds an approval's availableUntil (default 90).
	MaximumApprovalDays int `json:"maximumApprovalDays"`
}

// Authentication is how the desk checks the bearer tokens of the review
// protocol: access tokens (typ at+jwt) of one issuer, checked against the
// issuer's published key set, for one audience, from named clients holding
// a scope.
type Authentication struct {
	// Issuer is the tokens' iss.
	Issuer string `json:"issuer"`
	// JWKSURL is the issuer's key set (https, or http on loopback).
	JWKSURL string `json:"jwksUrl"`
	// Audience must be one of the tokens' aud.
	Audience string `json:"audience"`
	// Clients are the client ids (client_id claim) allowed to submit.
	Clients []string `json:"clients"`
	// RequiredScope, when set, must be one of the token's scopes.
	RequiredScope string `json:"requiredScope"`
	// RevokedKeyIDs are signing keys whose tokens are refused.
	RevokedKeyIDs []string `json:"revokedKeyIds"`
}

// Policy is one review policy the desk applies.
type Policy struct {
	// Title is shown to the reviewer.
	Title string `json:"title"`
	// Version is echoed with every binding and result of the policy.
	Version string `json:"version"`
}

var policyIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// LoadConfig reads a JSON configuration file; unknown members are refused.
func LoadConfig(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reviewdesk: config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("reviewdesk: config %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("reviewdesk: config %s: %w", path, err)
	}
	return &c, nil
}

// Validate checks the configuration and fills in defaults.
func (c *Config) Validate() error {
	if _, err := checkURL(c.PublicURL); err != nil {
		return fmt.Errorf("publicUrl: %w", err)
	}
	if c.DataFile == "" {
		return fmt.Errorf("dataFile is required")
	}
	if _, err := parseHash(c.ReviewerPasswordHash); err != nil {
		return fmt.Errorf("reviewerPasswordHash: %w", err)
	}
	a := c.Authentication
	if a.Issuer == "" || a.Audience == "" {
		return fmt.Errorf("authentication: issuer and audience are required")
	}
	if _, err := checkURL(a.JWKSURL); err != nil {
		return fmt.Errorf("authentication.jwksUrl: %w", err)
	}
	if len(a.Clients) == 0 {
		return fmt.Errorf("authentication.clients: name at least one client")
	}
	if len(c.Profiles) == 0 {
		return fmt.Errorf("profiles: name at least one profile")
	}
	if len(c.Policies) == 0 {
		return fmt.Errorf("policies: declare at least one policy")
	}
	for id, p := range c.Policies {
		if !policyIDPattern.MatchString(id) || p.Version == "" {
			return fmt.Errorf("policies.%s: an id of letters, digits, dots, dashes and underscores, with a version", id)
		}
	}
	if c.MaximumApprovalDays < 0 || c.MaximumApprovalDays > 3650 {
		return fmt.Errorf("maximumApprovalDays: 1 to 3650")
	}
	if c.MaximumApprovalDays == 0 {
		c.MaximumApprovalDays = 90
	}
	return nil
}

// checkURL accepts an https URL, or http on a loopback address.
func checkURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("must be an absolute URL")
	}
	if u.Scheme == "https" {
		return u, nil
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	if u.Scheme == "http" && (strings.EqualFold(host, "localhost") || ip != nil && ip.IsLoopback()) {
		return u, nil
	}
	return nil, fmt.Errorf("must be https (http only on a loopback address)")
}
