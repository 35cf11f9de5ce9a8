package issuer

import (
	"net/http"
	"time"

	"github.com/registrum/registrum/internal/ratelimit"
)

// ErrorSlowDown is the OAuth error code of a token request refused by the
// rate limit (429, with Retry-After). RFC 6749 names no code for it; the
// token endpoint borrows "slow_down", which RFC 8628 registers for a client
// polling the token endpoint faster than it is allowed.
const ErrorSlowDown = "slow_down"

// WithRateLimit limits token requests per client address with l (see
// internal/ratelimit): a request over the limit is answered 429 with
// Retry-After, the RateLimit-Policy and RateLimit headers and
// {"error":"slow_down"}, before its body is read, so that it is neither
// authenticated nor audited. Every answer of the token endpoint carries the
// RateLimit headers. The address, not the client id, names the caller: the
// client id is only known once the assertion is verified, which is the work
// the limit spares. Off by default.
func WithRateLimit(l *ratelimit.Limiter) Option {
	return func(o *options) { o.rateLimit = l }
}

// limitTokenRequests applies the rate limit, when one is set, in front of
// the token endpoint.
func (s *Server) limitTokenRequests(next http.HandlerFunc) http.HandlerFunc {
	l := s.opts.rateLimit
	if l == nil {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		d := l.Allow(ratelimit.AddressKey(r.RemoteAddr), time.Now())
		l.WriteHeaders(w.Header(), d)
		if !d.Allowed {
			s.metrics.tokenRequest(ErrorSlowDown, 0)
			s.log.Debug("token request refused by the rate limit", "retry_after_seconds", ratelimit.RetryAfter(d))
			writeJSON(w, http.StatusTooManyRequests, []byte(`{"error":"`+ErrorSlowDown+`"}`))
			return
		}
		next(w, r)
	}
}
