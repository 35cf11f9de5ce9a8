package auth

import (
	"sync"
	"testing"
	"time"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/config"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_900_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type signingKey = authtest.Key

func newKey(t testing.TB, kid string) *signingKey { return authtest.NewKey(t, kid) }

func newKeyServer(t testing.TB, keys ...*signingKey) *authtest.KeyServer {
	return authtest.NewKeyServer(t, keys...)
}

const (
	testIssuer   = "https://issuer.test"
	testAudience = "urn:registrum:test"
)

func intp(v int) *int { return &v }

// settings returns validated-shape authentication settings for url.
func settings(url string) *config.Authentication {
	return &config.Authentication{
		Issuer: testIssuer, JWKSURL: url, Audience: testAudience, Algorithm: "ES256",
		ScopeClaim: "scope", ScopeSeparator: " ",
		AuthorityClaims:        config.AuthorityClaims{Principal: "sub", Purpose: "purpose"},
		ClockSkewSeconds:       intp(30),
		KeySetRefreshSeconds:   intp(300),
		KeySetAllowanceSeconds: intp(3600),
	}
}

// claimsAt returns a valid claim set issued at now.
func claimsAt(now time.Time) map[string]any {
	return map[string]any{
		"iss": testIssuer, "aud": testAudience, "iat": now.Unix(), "nbf": now.Unix(),
		"exp": now.Add(10 * time.Minute).Unix(), "jti": "tok-1", "client_id": "c1",
		"sub": "service:c1", "scope": "records:read records:write", "purpose": "audit",
	}
}

func with(m map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}
