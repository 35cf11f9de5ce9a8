package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/registrum/registrum/host/auth"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/internal/ratelimit"
)

// RateLimit limits how fast each client may call the /v1 routes; a nil
// *RateLimit, the default, limits nothing.
type RateLimit struct {
	// Limiter holds each client's bucket. Required.
	Limiter *ratelimit.Limiter
	// Principal returns the principal of a bearer token that verifies, ""
	// for one that does not. A caller with a verified principal is limited
	// as that principal, wherever it calls from; any other caller as its
	// remote address (see ratelimit.AddressKey), so that presenting made-up
	// tokens gains nothing. Nil limits every caller by its address.
	Principal func(ctx context.Context, bearer string) string
}

// limited reports whether a path is under the rate limit: the API, not the
// probes (/health, /ready) or /openapi.json.
func limited(path string) bool { return path == "/v1" || strings.HasPrefix(path, "/v1/") }

// clientKey names the caller of r for the limiter.
func (l *RateLimit) clientKey(r *http.Request) string {
	if l.Principal != nil {
		if tok, _ := auth.BearerToken(r.Header.Get("Authorization")); tok != "" {
			if p := l.Principal(r.Context(), tok); p != "" {
				return "principal:" + p
			}
		}
	}
	return ratelimit.AddressKey(r.RemoteAddr)
}

// rateLimit takes one request of the caller from its bucket before the
// router sees it; every /v1 answer carries RateLimit-Policy and RateLimit,
// and a caller over its limit gets 429 rate_limit.exceeded with
// Retry-After. Without a limiter it is next itself.
func (a *API) rateLimit(l *RateLimit, next http.Handler) http.Handler {
	if l == nil || l.Limiter == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !limited(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		d := l.Limiter.Allow(l.clientKey(r), time.Now())
		l.Limiter.WriteHeaders(w.Header(), d)
		if !d.Allowed {
			a.fail(w, r, problem.New(problem.RateLimitExceeded, "Too many requests from this client; retry after %d seconds.", ratelimit.RetryAfter(d)))
			return
		}
		next.ServeHTTP(w, r)
	})
}
