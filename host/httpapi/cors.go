package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CORS lets browser applications served from other origins call the API.
// The zero value (no allowed origin) sends no CORS header at all, which is
// the default: browsers then keep cross-origin pages from reading answers.
type CORS struct {
	// AllowedOrigins are serialized origins (scheme://host[:port], as a
	// browser sends them in Origin), compared exactly; "*" admits every
	// origin. Credentials (cookies) are never admitted: callers present
	// bearer tokens in Authorization, which a preflight allows.
	AllowedOrigins []string
	// MaxAge is how long a browser may cache a preflight answer; zero
	// sends no Access-Control-Max-Age (browsers then use 5 s).
	MaxAge time.Duration
}

// The CORS policy's fixed lists: the methods and request headers the API
// takes, and the response headers a page may read beyond the CORS-safelisted
// ones.
const (
	corsAllowMethods  = "GET, HEAD, POST, PATCH, DELETE"
	corsAllowHeaders  = "Authorization, Content-Type, Accept, If-Match, If-None-Match, Idempotency-Key, traceparent"
	corsExposeHeaders = "ETag, Location, Link, Idempotent-Replayed, Retry-After, RateLimit, RateLimit-Policy, WWW-Authenticate"
)

// corsPolicy is a CORS configuration prepared for lookups.
type corsPolicy struct {
	any     bool
	origins map[string]bool
	maxAge  string // seconds, "" to send none
}

func newCORSPolicy(c *CORS) *corsPolicy {
	if c == nil || len(c.AllowedOrigins) == 0 {
		return nil
	}
	p := &corsPolicy{origins: make(map[string]bool, len(c.AllowedOrigins))}
	for _, o := range c.AllowedOrigins {
		if o == "*" {
			p.any = true
		}
		p.origins[o] = true
	}
	if s := int64(c.MaxAge / time.Second); s > 0 {
		p.maxAge = strconv.FormatInt(s, 10)
	}
	return p
}

// allowOrigin returns the Access-Control-Allow-Origin value for origin, or
// "" when the origin is not allowed.
func (p *corsPolicy) allowOrigin(origin string) string {
	switch {
	case origin == "":
		return ""
	case p.any:
		return "*"
	case p.origins[origin]:
		return origin
	}
	return ""
}

// cors applies the CORS policy in front of next; without a policy it is
// next itself.
//
// A preflight (OPTIONS with Origin and Access-Control-Request-Method) is
// answered here, 204 on every path, known or not, so that it tells nothing
// about which routes exist: an allowed origin gets the policy's fixed
// methods, headers and max age (the browser checks its request against
// them), any other origin gets no CORS header, and the browser refuses the
// request. Preflights do not reach the router and do not count against a
// rate limit. Any other request goes on to next; an allowed origin's answer
// carries Access-Control-Allow-Origin and Access-Control-Expose-Headers.
// Every answer carries Vary: Origin, kept even when a handler sets Vary.
func (p *corsPolicy) cors(next http.Handler) http.Handler {
	if p == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		allow := p.allowOrigin(origin)
		h := w.Header()
		if r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Origin")
			if allow != "" {
				h.Set("Access-Control-Allow-Origin", allow)
				h.Set("Access-Control-Allow-Methods", corsAllowMethods)
				h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
				if p.maxAge != "" {
					h.Set("Access-Control-Max-Age", p.maxAge)
				}
			}
			h.Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if allow != "" {
			h.Set("Access-Control-Allow-Origin", allow)
			h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
		next.ServeHTTP(&varyOrigin{ResponseWriter: w}, r)
	})
}

// varyOrigin makes sure the answer names Origin in Vary when its header is
// sent, whatever the handler set Vary to (handlers set Vary: Accept).
type varyOrigin struct {
	http.ResponseWriter
	sent bool
}

func (v *varyOrigin) WriteHeader(code int) {
	if !v.sent {
		v.sent = true
		addVary(v.Header(), "Origin")
	}
	v.ResponseWriter.WriteHeader(code)
}

func (v *varyOrigin) Write(b []byte) (int, error) {
	if !v.sent {
		v.WriteHeader(http.StatusOK)
	}
	return v.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (v *varyOrigin) Unwrap() http.ResponseWriter { return v.ResponseWriter }

// addVary adds name to the Vary header unless it is listed already.
func addVary(h http.Header, name string) {
	for _, line := range h.Values("Vary") {
		for _, f := range strings.Split(line, ",") {
			if f = strings.TrimSpace(f); f == "*" || strings.EqualFold(f, name) {
				return
			}
		}
	}
	h.Add("Vary", name)
}
