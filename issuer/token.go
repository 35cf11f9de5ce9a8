package issuer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/registrum/registrum/issuer/signer"
)

// tokenResponse is the body of a successful token response.
type tokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope,omitempty"`
}

// onBehalfOf is a validated delegation request: the actor and the subject.
type onBehalfOf struct {
	Actor   string
	Subject map[string]any
}

// mintRequest is everything one issued token is written from.
type mintRequest struct {
	client *Client
	now    time.Time
	jti    string
	kid    string
	obo    *onBehalfOf
}

// encodeJSON is the one JSON encoder of issued tokens and responses (no HTML
// escaping, no trailing newline), shared with the largest-response projection.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// newTokenID returns a fresh random token identifier (128 bits, base64url).
func newTokenID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("issuer: crypto/rand: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// tokenClaims builds the claim set of a token. Authority comes only from the
// registration and the configuration; a delegation adds the actor and the
// subject values the client named, each checked against its registration.
func tokenClaims(cfg *Config, m *mintRequest) map[string]any {
	c := m.client
	claims := map[string]any{
		"iss":       cfg.Issuer,
		"iat":       m.now.Unix(),
		"nbf":       m.now.Unix(),
		"exp":       m.now.Add(cfg.AccessTokens.Lifetime).Unix(),
		"jti":       m.jti,
		"client_id": c.ID,
		"sub":       c.Principal,
	}
	if len(cfg.AccessTokens.Audiences) == 1 {
		claims["aud"] = cfg.AccessTokens.Audiences[0]
	} else {
		claims["aud"] = append([]string(nil), cfg.AccessTokens.Audiences...)
	}
	switch c.Profile {
	case ProfileEvidence:
		n := cfg.AccessTokens.Claims
		claims[n.Principal] = c.Principal
		claims[n.RequesterTags] = append([]string(nil), c.RequesterTags...)
		claims[n.EvidenceAudience] = c.EvidenceAudience
		if c.Grant != nil {
			claims[n.GrantID] = c.Grant.ID
			claims[n.GrantAuthority] = c.Grant.Authority
		}
		if m.obo != nil {
			claims[n.Actor] = m.obo.Actor
			for field, path := range c.Delegation.SubjectClaims {
				setPath(claims, strings.Split(path, "."), m.obo.Subject[field])
			}
		}
	case ProfileStandard:
		claims["scope"] = strings.Join(c.Scopes, " ")
		for _, dc := range c.Claims {
			claims[dc.Name] = dc.Value
		}
	}
	return claims
}

// setPath writes v at a nested path, creating objects on the way. Load-time
// checks guarantee paths never collide with each other or with other claims.
func setPath(m map[string]any, path []string, v any) {
	for _, seg := range path[:len(path)-1] {
		next, ok := m[seg].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[seg] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// signingInput returns base64url(header) "." base64url(claims).
func signingInput(kid string, claims map[string]any) ([]byte, error) {
	header, err := encodeJSON(map[string]string{"alg": "ES256", "typ": "at+jwt", "kid": kid})
	if err != nil {
		return nil, err
	}
	payload, err := encodeJSON(claims)
	if err != nil {
		return nil, err
	}
	enc := base64.RawURLEncoding
	out := make([]byte, 0, enc.EncodedLen(len(header))+enc.EncodedLen(len(payload))+1)
	out = enc.AppendEncode(out, header)
	out = append(out, '.')
	out = enc.AppendEncode(out, payload)
	return out, nil
}

// mint builds and signs a token and returns the response body.
func mint(ctx context.Context, cfg *Config, s signer.Signer, m *mintRequest) ([]byte, error) {
	input, err := signingInput(m.kid, tokenClaims(cfg, m))
	if err != nil {
		return nil, fmt.Errorf("issuer: encode token: %w", err)
	}
	sig, err := s.Sign(ctx, input)
	if err != nil {
		return nil, fmt.Errorf("issuer: sign token: %w", err)
	}
	if len(sig) != 64 {
		return nil, fmt.Errorf("issuer: sign token: signature is %d bytes, want 64", len(sig))
	}
	return tokenResponseBody(cfg, m.client, string(input)+"."+base64.RawURLEncoding.EncodeToString(sig))
}

func tokenResponseBody(cfg *Config, c *Client, token string) ([]byte, error) {
	resp := tokenResponse{AccessToken: token, TokenType: "Bearer", ExpiresIn: int64(cfg.AccessTokens.Lifetime / time.Second)}
	if c.Profile == ProfileStandard {
		resp.Scope = strings.Join(c.Scopes, " ")
	}
	return encodeJSON(resp)
}

// projectedWidestSeconds is a 19-digit Unix time (the width of the largest
// int64) whose iat, nbf and exp all stay representable as time.Time.
const projectedWidestSeconds = 9_000_000_000_000_000_000

// largestStandardResponse returns the size of the largest token response the
// registration could produce: the real claim set with the widest time values,
// token id and key id, a 64-byte signature, wrapped in the real response.
func largestStandardResponse(cfg *Config, c *Client) (int, error) {
	m := &mintRequest{
		client: c,
		now:    time.Unix(projectedWidestSeconds, 0),
		jti:    strings.Repeat("x", projectedTokenIDLength),
		kid:    strings.Repeat("k", projectedKeyIDLength),
	}
	input, err := signingInput(m.kid, tokenClaims(cfg, m))
	if err != nil {
		return 0, err
	}
	token := string(input) + "." + base64.RawURLEncoding.EncodeToString(make([]byte, projectedSignatureBytes))
	body, err := tokenResponseBody(cfg, c, token)
	if err != nil {
		return 0, err
	}
	return len(body), nil
}
