package issuer

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/go-jose/go-jose/v4"
	"github.com/goccy/go-yaml"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/strictyaml"
	"github.com/registrum/registrum/issuer/keys"
)

// Profile is the token profile a registration selects.
type Profile int

const (
	// ProfileEvidence issues evidence authority claims (evidenceAudience, requesterTags, grant, delegation).
	ProfileEvidence Profile = iota + 1
	// ProfileStandard issues a scope claim and direct string claims.
	ProfileStandard
)

// Bounds of client registrations.
const (
	MaximumClientKeys      = 8
	MaximumPrincipalBytes  = 512
	MaximumRequesterTags   = 32
	MaximumScopes          = 64
	MaximumScopeBytes      = 256
	MaximumDirectClaims    = 32
	MaximumClaimNameBytes  = 128
	MaximumClaimValueBytes = 512
	maximumClientIDBytes   = 256
	maximumTagBytes        = 256
	maximumGrantBytes      = 512
	maximumActors          = 64
	maximumActorBytes      = 512
	maximumSubjectClaims   = 16
	maximumSubjectPath     = 512
)

// reservedDirectClaims cannot be direct claims of a standard registration.
var reservedDirectClaims = map[string]bool{"iss": true, "aud": true, "exp": true, "iat": true, "nbf": true, "jti": true, "client_id": true, "sub": true, "scope": true}

var (
	subjectFieldRE   = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,63}$`)
	subjectSegmentRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
)

// Client is one validated client registration.
type Client struct {
	// ID is the client id (the assertion iss and sub).
	ID string
	// File is the registration file it came from.
	File string
	// Principal is written as the token sub.
	Principal string
	// Profile is ProfileEvidence or ProfileStandard.
	Profile Profile
	// EvidenceAudience and RequesterTags are the evidence authority.
	EvidenceAudience string
	RequesterTags    []string
	// Grant is the optional evidence grant.
	Grant *Grant
	// Delegation is the optional evidence delegation.
	Delegation *Delegation
	// Scopes and Claims are the standard authority, in registration order.
	Scopes []string
	Claims []DirectClaim
	// Keys are the client's public keys.
	Keys []jose.JSONWebKey
	// authority is the canonical JSON of the authority the registration
	// grants; the audit chain records only its keyed pseudonym.
	authority string
}

// Grant is the evidence grant of a registration.
type Grant struct {
	// ID is written under accessTokens.claims.grantId.
	ID string
	// Authority is written under accessTokens.claims.grantAuthority.
	Authority string
}

// Delegation lets an evidence client ask for tokens on behalf of an actor,
// bound to one subject (see docs/decisions/issuer-delegation.md).
type Delegation struct {
	// Actors are the permitted actors; nil means any actor.
	Actors map[string]bool
	// SubjectClaims maps each subject field the client must name to the
	// dot-separated claim path it is written at.
	SubjectClaims map[string]string
}

// DirectClaim is one direct string claim of a standard registration.
type DirectClaim struct {
	// Name is the claim name.
	Name string
	// Value is the claim's string value.
	Value string
}

// Registry is an immutable set of client registrations.
type Registry struct {
	clients map[string]*Client
}

// Len returns the number of registered clients.
func (r *Registry) Len() int {
	if r == nil {
		return 0
	}
	return len(r.clients)
}

// Client returns the registration of id.
func (r *Registry) Client(id string) (*Client, bool) {
	if r == nil {
		return nil, false
	}
	c, ok := r.clients[id]
	return c, ok
}

type fileRegistration struct {
	ClientID         *string          `yaml:"clientId"`
	Principal        *string          `yaml:"principal"`
	EvidenceAudience *string          `yaml:"evidenceAudience"`
	RequesterTags    []string         `yaml:"requesterTags"`
	Grant            *fileGrant       `yaml:"grant"`
	Delegation       *fileDelegation  `yaml:"delegation"`
	Authorization    *fileAuthz       `yaml:"authorization"`
	Keys             []map[string]any `yaml:"keys"`
}

type fileGrant struct {
	ID        *string `yaml:"id"`
	Authority *string `yaml:"authority"`
}

type fileDelegation struct {
	Actors        []string          `yaml:"actors"`
	SubjectClaims map[string]string `yaml:"subjectClaims"`
}

type fileAuthz struct {
	Scopes []string          `yaml:"scopes"`
	Claims yamlOrderedClaims `yaml:"claims"`
}

// LoadRegistry reads every *.yaml registration in cfg.ClientsDirectory and
// validates it against the configuration. It is all or nothing: one bad file
// fails the whole load. An empty folder loads as an empty registry.
func LoadRegistry(cfg *Config) (*Registry, error) {
	entries, err := os.ReadDir(cfg.ClientsDirectory)
	if err != nil {
		return nil, fmt.Errorf("issuer: read clients.directory %s: %w", cfg.ClientsDirectory, err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".yaml") && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) > maximumRegisteredClients {
		return nil, fmt.Errorf("issuer: clients.directory %s holds %d registrations, at most %d allowed", cfg.ClientsDirectory, len(names), maximumRegisteredClients)
	}
	reg := &Registry{clients: make(map[string]*Client, len(names))}
	for _, name := range names {
		path := filepath.Join(cfg.ClientsDirectory, name)
		st, err := os.Lstat(path)
		if err != nil {
			return nil, fmt.Errorf("issuer: %w", &strictyaml.Error{File: path, Message: "cannot be read", Err: err})
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("issuer: %w", &strictyaml.Error{File: path, Message: "must be a regular file (symbolic links are refused)"})
		}
		c, err := loadClient(cfg, path)
		if err != nil {
			return nil, fmt.Errorf("issuer: %w", err)
		}
		if prev, ok := reg.clients[c.ID]; ok {
			return nil, fmt.Errorf("issuer: %w", &strictyaml.Error{File: path, Path: "clientId", Message: "duplicate client id, also registered in " + prev.File})
		}
		reg.clients[c.ID] = c
	}
	return reg, nil
}

func loadClient(cfg *Config, path string) (*Client, error) {
	var fr fileRegistration
	d, err := decodeStrict(path, maximumRegistrationFileBytes, &fr)
	if err != nil {
		return nil, err
	}
	c := &Client{File: path}
	if fr.ClientID == nil {
		return nil, d.Fail("clientId", "is required", nil)
	}
	if n := len(*fr.ClientID); n < 1 || n > maximumClientIDBytes || strings.TrimSpace(*fr.ClientID) == "" {
		return nil, d.Fail("clientId", fmt.Sprintf("must be 1 to %d bytes and not blank", maximumClientIDBytes), nil)
	}
	c.ID = *fr.ClientID
	if fr.Principal == nil {
		return nil, d.Fail("principal", "is required", nil)
	}
	if n := len(*fr.Principal); n < 1 || n > MaximumPrincipalBytes || strings.TrimSpace(*fr.Principal) == "" {
		return nil, d.Fail("principal", fmt.Sprintf("must be 1 to %d bytes and not blank", MaximumPrincipalBytes), nil)
	}
	c.Principal = *fr.Principal

	evidence := fr.EvidenceAudience != nil || fr.RequesterTags != nil || fr.Grant != nil || fr.Delegation != nil
	standard := fr.Authorization != nil
	switch {
	case evidence && standard:
		return nil, d.Fail("authorization", "a registration selects exactly one profile: evidenceAudience/requesterTags (Evidence) cannot coexist with authorization (Standard)", nil)
	case !evidence && !standard:
		return nil, d.Fail("", "a registration must select one profile: Evidence (evidenceAudience and requesterTags) or Standard (authorization)", nil)
	case evidence:
		if err := loadEvidence(cfg, d, &fr, c); err != nil {
			return nil, err
		}
	default:
		if err := loadStandard(cfg, d, &fr, c); err != nil {
			return nil, err
		}
	}

	if len(fr.Keys) == 0 {
		return nil, d.Fail("keys", "is required: at least one public JWK", nil)
	}
	if len(fr.Keys) > MaximumClientKeys {
		return nil, d.Fail("keys", fmt.Sprintf("holds at most %d keys", MaximumClientKeys), nil)
	}
	raw := make([]json.RawMessage, len(fr.Keys))
	for i, k := range fr.Keys {
		b, err := json.Marshal(k)
		if err != nil {
			return nil, d.Fail(fmt.Sprintf("keys[%d]", i), "must be a JSON Web Key object", err)
		}
		raw[i] = b
	}
	set, err := keys.ParsePublicSet(raw)
	if err != nil {
		return nil, d.Fail("keys", "must be public JWKs of an allowed type (private members are refused)", err)
	}
	c.Keys = set
	if c.authority, err = authorityJSON(c); err != nil {
		return nil, d.Fail("", "cannot encode the registration's authority", err)
	}
	return c, nil
}

// authorityJSON is the RFC 8785 form of what the registration authorises.
func authorityJSON(c *Client) (string, error) {
	a := map[string]any{"principal": c.Principal}
	if c.Profile == ProfileStandard {
		claims := map[string]string{}
		for _, dc := range c.Claims {
			claims[dc.Name] = dc.Value
		}
		a["scopes"], a["claims"] = c.Scopes, claims
	} else {
		a["evidenceAudience"], a["requesterTags"] = c.EvidenceAudience, c.RequesterTags
		if c.Grant != nil {
			a["grant"] = map[string]string{"id": c.Grant.ID, "authority": c.Grant.Authority}
		}
	}
	b, err := canonjson.Marshal(a)
	return string(b), err
}

func loadEvidence(cfg *Config, d *strictyaml.Document, fr *fileRegistration, c *Client) error {
	c.Profile = ProfileEvidence
	if cfg.AccessTokens.Claims == nil {
		return d.Fail("evidenceAudience", "the Evidence profile needs accessTokens.claims in the configuration", nil)
	}
	if fr.EvidenceAudience == nil {
		return d.Fail("evidenceAudience", "is required with requesterTags (Evidence profile)", nil)
	}
	if fr.RequesterTags == nil {
		return d.Fail("requesterTags", "is required with evidenceAudience (Evidence profile)", nil)
	}
	ea := *fr.EvidenceAudience
	if len(ea) < 1 || len(ea) > maximumGrantBytes {
		return d.Fail("evidenceAudience", fmt.Sprintf("must be 1 to %d bytes", maximumGrantBytes), nil)
	}
	if u, err := url.Parse(ea); err != nil || u.Scheme == "" {
		return d.Fail("evidenceAudience", "must be a URL", nil)
	}
	c.EvidenceAudience = ea
	if len(fr.RequesterTags) < 1 || len(fr.RequesterTags) > MaximumRequesterTags {
		return d.Fail("requesterTags", fmt.Sprintf("must hold 1 to %d entries", MaximumRequesterTags), nil)
	}
	seen := map[string]bool{}
	for i, t := range fr.RequesterTags {
		field := fmt.Sprintf("requesterTags[%d]", i)
		if len(t) < 1 || len(t) > maximumTagBytes || strings.TrimSpace(t) == "" {
			return d.Fail(field, fmt.Sprintf("must be 1 to %d bytes and not blank", maximumTagBytes), nil)
		}
		if seen[t] {
			return d.Fail(field, "is listed twice", nil)
		}
		seen[t] = true
	}
	c.RequesterTags = append([]string(nil), fr.RequesterTags...)
	if g := fr.Grant; g != nil {
		if g.ID == nil || g.Authority == nil {
			return d.Fail("grant", "needs both id and authority", nil)
		}
		for field, v := range map[string]string{"grant.id": *g.ID, "grant.authority": *g.Authority} {
			if len(v) < 1 || len(v) > maximumGrantBytes || strings.TrimSpace(v) == "" {
				return d.Fail(field, fmt.Sprintf("must be 1 to %d bytes and not blank", maximumGrantBytes), nil)
			}
		}
		c.Grant = &Grant{ID: *g.ID, Authority: *g.Authority}
	}
	if dl := fr.Delegation; dl != nil {
		del, err := loadDelegation(cfg, d, dl)
		if err != nil {
			return err
		}
		c.Delegation = del
	}
	return nil
}

func loadDelegation(cfg *Config, d *strictyaml.Document, fd *fileDelegation) (*Delegation, error) {
	names := cfg.AccessTokens.Claims
	if names.Actor == "" {
		return nil, d.Fail("delegation", "delegated tokens need accessTokens.claims.actor in the configuration", nil)
	}
	del := &Delegation{SubjectClaims: map[string]string{}}
	if fd.Actors != nil {
		if len(fd.Actors) < 1 || len(fd.Actors) > maximumActors {
			return nil, d.Fail("delegation.actors", fmt.Sprintf("must hold 1 to %d entries (omit it to permit any actor)", maximumActors), nil)
		}
		del.Actors = map[string]bool{}
		for i, a := range fd.Actors {
			field := fmt.Sprintf("delegation.actors[%d]", i)
			if len(a) < 1 || len(a) > maximumActorBytes || strings.TrimSpace(a) == "" {
				return nil, d.Fail(field, fmt.Sprintf("must be 1 to %d bytes and not blank", maximumActorBytes), nil)
			}
			if del.Actors[a] {
				return nil, d.Fail(field, "is listed twice", nil)
			}
			del.Actors[a] = true
		}
	}
	if len(fd.SubjectClaims) < 1 || len(fd.SubjectClaims) > maximumSubjectClaims {
		return nil, d.Fail("delegation.subjectClaims", fmt.Sprintf("must hold 1 to %d entries", maximumSubjectClaims), nil)
	}
	authority := map[string]bool{names.Principal: true, names.RequesterTags: true, names.EvidenceAudience: true, names.GrantID: true, names.GrantAuthority: true, names.Actor: true}
	var paths []string
	fields := make([]string, 0, len(fd.SubjectClaims))
	for f := range fd.SubjectClaims {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	for _, f := range fields {
		p := fd.SubjectClaims[f]
		field := "delegation.subjectClaims." + f
		if !subjectFieldRE.MatchString(f) {
			return nil, d.Fail(field, "subject field names are [a-z][a-z0-9._-]{0,63}", nil)
		}
		if len(p) < 1 || len(p) > maximumSubjectPath {
			return nil, d.Fail(field, fmt.Sprintf("claim path must be 1 to %d bytes", maximumSubjectPath), nil)
		}
		segs := strings.Split(p, ".")
		for _, s := range segs {
			if !subjectSegmentRE.MatchString(s) {
				return nil, d.Fail(field, "claim path is dot-separated segments of [A-Za-z_][A-Za-z0-9_-]*", nil)
			}
		}
		if reservedDirectClaims[segs[0]] || authority[segs[0]] {
			return nil, d.Fail(field, fmt.Sprintf("claim path must not start with %q, a claim the issuer writes itself", segs[0]), nil)
		}
		for _, q := range paths {
			if q == p || strings.HasPrefix(q, p+".") || strings.HasPrefix(p, q+".") {
				return nil, d.Fail(field, fmt.Sprintf("claim path %q collides with %q", p, q), nil)
			}
		}
		paths = append(paths, p)
		del.SubjectClaims[f] = p
	}
	return del, nil
}

func loadStandard(cfg *Config, d *strictyaml.Document, fr *fileRegistration, c *Client) error {
	c.Profile = ProfileStandard
	az := fr.Authorization
	if len(az.Scopes) < 1 || len(az.Scopes) > MaximumScopes {
		return d.Fail("authorization.scopes", fmt.Sprintf("must hold 1 to %d scopes", MaximumScopes), nil)
	}
	seen := map[string]bool{}
	for i, s := range az.Scopes {
		field := fmt.Sprintf("authorization.scopes[%d]", i)
		if len(s) < 1 || len(s) > MaximumScopeBytes || !isNQChar(s) {
			return d.Fail(field, fmt.Sprintf("must be an RFC 6749 scope token of 1 to %d bytes", MaximumScopeBytes), nil)
		}
		if seen[s] {
			return d.Fail(field, "is listed twice", nil)
		}
		seen[s] = true
	}
	c.Scopes = append([]string(nil), az.Scopes...)
	if len(az.Claims) > MaximumDirectClaims {
		return d.Fail("authorization.claims", fmt.Sprintf("holds at most %d claims", MaximumDirectClaims), nil)
	}
	var evidenceNames map[string]bool
	if n := cfg.AccessTokens.Claims; n != nil {
		evidenceNames = map[string]bool{n.Principal: true, n.RequesterTags: true, n.EvidenceAudience: true, n.GrantID: true, n.GrantAuthority: true}
		if n.Actor != "" {
			evidenceNames[n.Actor] = true
		}
	}
	for _, cl := range az.Claims {
		field := "authorization.claims." + cl.Name
		if len(cl.Name) < 1 || len(cl.Name) > MaximumClaimNameBytes || !isNQChar(cl.Name) {
			return d.Fail(field, fmt.Sprintf("claim names are 1 to %d printable bytes", MaximumClaimNameBytes), nil)
		}
		if reservedDirectClaims[cl.Name] {
			return d.Fail(field, fmt.Sprintf("%q is reserved", cl.Name), nil)
		}
		if evidenceNames[cl.Name] {
			return d.Fail(field, fmt.Sprintf("%q is a configured evidence claim name", cl.Name), nil)
		}
		if len(cl.Value) < 1 || len(cl.Value) > MaximumClaimValueBytes {
			return d.Fail(field, fmt.Sprintf("value must be a non-empty string of at most %d bytes", MaximumClaimValueBytes), nil)
		}
	}
	c.Claims = append([]DirectClaim(nil), az.Claims...)
	if cfg.AccessTokens.Lifetime.Seconds() > MaximumStandardLifetimeSeconds {
		return d.Fail("authorization", fmt.Sprintf("a Standard client needs accessTokens.lifetimeSeconds of at most %d", MaximumStandardLifetimeSeconds), nil)
	}
	n, err := largestStandardResponse(cfg, c)
	if err != nil {
		return d.Fail("authorization", "cannot project the largest token response", err)
	}
	if n > maximumSignedResponseBytes {
		return d.Fail("authorization", fmt.Sprintf("the largest possible signed token response is %d bytes, above the %d-byte limit", n, maximumSignedResponseBytes), nil)
	}
	return nil
}

// isNQChar reports whether s is made of RFC 6749 NQCHAR bytes (0x21, 0x23-0x5B, 0x5D-0x7E).
func isNQChar(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b != 0x21 && (b < 0x23 || b > 0x5B) && (b < 0x5D || b > 0x7E) {
			return false
		}
	}
	return true
}

// yamlOrderedClaims decodes authorization.claims keeping the written order
// and refusing any value that is not a string.
type yamlOrderedClaims []DirectClaim

// UnmarshalYAML implements the goccy/go-yaml interface unmarshaler.
func (o *yamlOrderedClaims) UnmarshalYAML(unmarshal func(any) error) error {
	var ms yaml.MapSlice
	if err := unmarshal(&ms); err != nil {
		return err
	}
	out := make(yamlOrderedClaims, 0, len(ms))
	for _, item := range ms {
		name, ok := item.Key.(string)
		if !ok {
			return fmt.Errorf("claim name %v must be a string", item.Key)
		}
		v, ok := item.Value.(string)
		if !ok {
			return fmt.Errorf("claim %q: value must be a string", name)
		}
		out = append(out, DirectClaim{Name: name, Value: v})
	}
	*o = out
	return nil
}
