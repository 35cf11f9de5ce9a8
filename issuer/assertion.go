package issuer

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/issuer/internal/replay"
	"github.com/registrum/registrum/issuer/keys"
)

// ClockSkew is the allowance applied to the time claims of client assertions
// (never to issued tokens). See docs/decisions/issuer-clock-skew.md.
const ClockSkew = 30 * time.Second

const (
	maximumAssertionBytes = 16384
	maximumJTIBytes       = 256
	onBehalfOfClaim       = "on_behalf_of"
)

// errAuthentication is every client-authentication failure; its reason is
// kept for the operator log only and never reaches the client.
type errAuthentication struct{ reason string }

func (e *errAuthentication) Error() string { return "client authentication failed: " + e.reason }

func authFail(format string, args ...any) error {
	return &errAuthentication{reason: fmt.Sprintf(format, args...)}
}

// errReplayFull reports a replay cache full of live entries (also answered
// as invalid_client, but logged distinctly).
var errReplayFull = &errAuthentication{reason: "replay cache full of live entries"}

// assertionClaims are the members of an assertion payload the issuer reads.
type assertionClaims struct {
	Iss        *string         `json:"iss"`
	Sub        *string         `json:"sub"`
	Aud        json.RawMessage `json:"aud"`
	Jti        *string         `json:"jti"`
	Iat        *json.Number    `json:"iat"`
	Exp        *json.Number    `json:"exp"`
	Nbf        *json.Number    `json:"nbf"`
	OnBehalfOf json.RawMessage `json:"on_behalf_of"`
}

// authenticator checks client assertions.
type authenticator struct {
	cfg    *Config
	algs   []jose.SignatureAlgorithm
	dummy  map[jose.SignatureAlgorithm]any // verification keys used when no registered key applies
	replay *replay.Cache
	// verifications counts signature verifications, so tests can check that
	// an unknown client costs the same work as a known one.
	verifications atomic.Int64
}

func newAuthenticator(cfg *Config) (*authenticator, error) {
	a := &authenticator{cfg: cfg, algs: cfg.ClientAssertion.Algorithms, dummy: map[jose.SignatureAlgorithm]any{}, replay: replay.New(cfg.ClientAssertion.ReplayCacheEntries)}
	for _, alg := range a.algs {
		switch alg {
		case jose.ES256:
			k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				return nil, err
			}
			a.dummy[alg] = &k.PublicKey
		case jose.EdDSA:
			pub, _, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return nil, err
			}
			a.dummy[alg] = pub
		case jose.RS256:
			k, err := dummyRSAKey()
			if err != nil {
				return nil, err
			}
			a.dummy[alg] = k
		}
	}
	return a, nil
}

// dummyRSAKey is generated once per process: RSA key generation is slow and
// the key only stands in for an unknown client's key.
var dummyRSAKey = sync.OnceValues(func() (*rsa.PublicKey, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	return &k.PublicKey, nil
})

// authenticate verifies a client assertion against the registry and spends
// its jti. Every failure is an *errAuthentication.
func (a *authenticator) authenticate(reg *Registry, assertion string, now time.Time) (*Client, *onBehalfOf, error) {
	if len(assertion) > maximumAssertionBytes {
		return nil, nil, authFail("assertion larger than %d bytes", maximumAssertionBytes)
	}
	jws, err := jose.ParseSignedCompact(assertion, a.algs)
	if err != nil {
		return nil, nil, authFail("malformed assertion or algorithm not allowed")
	}
	if len(jws.Signatures) != 1 {
		return nil, nil, authFail("assertion must carry exactly one signature")
	}
	h := jws.Signatures[0].Protected
	alg := jose.SignatureAlgorithm(h.Algorithm)
	if typ, ok := h.ExtraHeaders[jose.HeaderType]; ok {
		s, _ := typ.(string)
		switch strings.ToLower(s) {
		case "jwt", "client-assertion+jwt", "client-authentication+jwt":
		default:
			return nil, nil, authFail("assertion typ not accepted")
		}
	}
	payload := jws.UnsafePayloadWithoutVerification()
	if err := checkNoDuplicateMembers(payload); err != nil {
		return nil, nil, authFail("assertion payload: %v", err)
	}
	var claims assertionClaims
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&claims); err != nil {
		return nil, nil, authFail("assertion payload is not a JSON object")
	}
	if claims.Iss == nil || len(*claims.Iss) == 0 || len(*claims.Iss) > maximumClientIDBytes {
		return nil, nil, authFail("assertion iss missing")
	}
	client, known := reg.Client(*claims.Iss)
	var candidates []any
	if known {
		for i := range client.Keys {
			k := &client.Keys[i]
			if h.KeyID != "" && k.KeyID != h.KeyID {
				continue
			}
			if kalg, err := keys.AlgorithmFor(k); err == nil && kalg == string(alg) {
				candidates = append(candidates, k.Key)
			}
		}
	}
	if len(candidates) == 0 {
		// Spend a comparable verification so timing does not reveal registration.
		a.verifications.Add(1)
		_, _ = jws.Verify(a.dummy[alg])
		if !known {
			return nil, nil, authFail("unknown client")
		}
		return nil, nil, authFail("no registered key of the client matches the assertion")
	}
	verified := false
	for _, k := range candidates {
		a.verifications.Add(1)
		if _, err := jws.Verify(k); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, nil, authFail("bad signature")
	}
	if claims.Sub == nil || *claims.Sub != client.ID {
		return nil, nil, authFail("sub does not equal the client id")
	}
	if !audienceMatches(claims.Aud, a.cfg.ClientAssertion.Audience) {
		return nil, nil, authFail("aud does not equal clientAssertion.audience")
	}
	iat, okIat := numericDate(claims.Iat)
	exp, okExp := numericDate(claims.Exp)
	if !okIat || !okExp {
		return nil, nil, authFail("iat and exp must be present integers")
	}
	if exp <= iat {
		return nil, nil, authFail("exp is not after iat")
	}
	if time.Duration(exp-iat)*time.Second > a.cfg.ClientAssertion.MaximumLifetime {
		return nil, nil, authFail("assertion lifetime above clientAssertion.maximumLifetimeSeconds")
	}
	skew := int64(ClockSkew / time.Second)
	nowS := now.Unix()
	if exp+skew <= nowS {
		return nil, nil, authFail("assertion expired")
	}
	if iat-skew > nowS {
		return nil, nil, authFail("assertion issued in the future")
	}
	if claims.Nbf != nil {
		nbf, ok := numericDate(claims.Nbf)
		if !ok || nbf-skew > nowS {
			return nil, nil, authFail("assertion not yet valid")
		}
	}
	obo, err := checkDelegation(client, claims.OnBehalfOf)
	if err != nil {
		return nil, nil, err
	}
	if claims.Jti == nil || len(*claims.Jti) == 0 || len(*claims.Jti) > maximumJTIBytes {
		return nil, nil, authFail("jti missing or longer than %d bytes", maximumJTIBytes)
	}
	// The jti is spent only once everything else holds, so a refused
	// assertion does not burn it; it stays until the assertion expires.
	key := client.ID + "\x00" + *claims.Jti
	switch err := a.replay.Use(key, time.Unix(exp+skew, 0), now); {
	case errors.Is(err, replay.ErrReplayed):
		return nil, nil, authFail("jti already used")
	case errors.Is(err, replay.ErrFull):
		return nil, nil, errReplayFull
	case err != nil:
		return nil, nil, authFail("replay cache: %v", err)
	}
	return client, obo, nil
}

// audienceMatches accepts a string equal to want, or a one-element array
// holding it.
func audienceMatches(raw json.RawMessage, want string) bool {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s == want
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		return len(list) == 1 && list[0] == want
	}
	return false
}

func numericDate(n *json.Number) (int64, bool) {
	if n == nil {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil && v > 0
}

// checkDelegation reconciles the assertion's on_behalf_of member with the
// registration (docs/decisions/issuer-delegation.md).
func checkDelegation(c *Client, raw json.RawMessage) (*onBehalfOf, error) {
	present := len(raw) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
	if !present {
		if len(raw) > 0 {
			return nil, authFail("on_behalf_of must be an object")
		}
		return nil, nil
	}
	if c.Delegation == nil {
		return nil, authFail("client is not registered for delegation")
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(raw, &req); err != nil || len(req) != 2 || req["actor"] == nil || req["subject"] == nil {
		return nil, authFail("on_behalf_of must hold exactly actor and subject")
	}
	var actor string
	if err := json.Unmarshal(req["actor"], &actor); err != nil || strings.TrimSpace(actor) == "" || len(actor) > maximumActorBytes {
		return nil, authFail("on_behalf_of.actor must be a non-blank string of at most %d bytes", maximumActorBytes)
	}
	if c.Delegation.Actors != nil && !c.Delegation.Actors[actor] {
		return nil, authFail("actor not permitted by the registration")
	}
	var subject map[string]json.RawMessage
	if err := json.Unmarshal(req["subject"], &subject); err != nil || subject == nil {
		return nil, authFail("on_behalf_of.subject must be an object")
	}
	if len(subject) != len(c.Delegation.SubjectClaims) {
		return nil, authFail("on_behalf_of.subject must name exactly the registered subject fields")
	}
	out := &onBehalfOf{Actor: actor, Subject: map[string]any{}}
	for field, v := range subject {
		if _, ok := c.Delegation.SubjectClaims[field]; !ok {
			return nil, authFail("subject field not registered")
		}
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		var val any
		if err := d.Decode(&val); err != nil {
			return nil, authFail("subject value unreadable")
		}
		switch x := val.(type) {
		case string:
			if len(x) < 1 || len(x) > MaximumClaimValueBytes {
				return nil, authFail("subject string values are 1 to %d bytes", MaximumClaimValueBytes)
			}
		case bool:
		case json.Number:
			if _, err := x.Int64(); err != nil {
				return nil, authFail("subject numbers must be integers")
			}
		default:
			return nil, authFail("subject values are strings, booleans or integers")
		}
		out.Subject[field] = val
	}
	return out, nil
}

// checkNoDuplicateMembers refuses a JSON document in which an object repeats a
// member name: readers that keep the first and the last occurrence would
// disagree on what the client signed.
func checkNoDuplicateMembers(doc []byte) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var walk func(depth int) error
	walk = func(depth int) error {
		if depth > 32 {
			return errors.New("nested too deeply")
		}
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				name, _ := k.(string)
				if seen[name] {
					return fmt.Errorf("member %q repeated", name)
				}
				seen[name] = true
				if err := walk(depth + 1); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for dec.More() {
				if err := walk(depth + 1); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	return walk(0)
}
