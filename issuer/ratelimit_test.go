package issuer

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/registrum/registrum/internal/ratelimit"
)

// TestRateLimitOnTheTokenEndpoint: a client address over its limit is
// answered 429 slow_down with Retry-After and the RateLimit headers, is not
// audited, and is served again once Retry-After has passed; the other
// endpoints are not limited.
func TestRateLimitOnTheTokenEndpoint(t *testing.T) {
	l, err := ratelimit.New(1, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	d := startDeployment(t, nil, WithRateLimit(l), WithMetrics(reg))
	rateLimitRE := regexp.MustCompile(`^"client";r=(\d+);t=(\d+)$`)

	d.issue(DevStandardClientID, nil)
	r := d.post("grant_type=password")
	expectError(t, r, http.StatusBadRequest, ErrorInvalidRequest)
	if r.header.Get("RateLimit") == "" || r.header.Get("RateLimit-Policy") != `"client";q=2;w=2` {
		t.Fatalf("headers of an admitted request: RateLimit %q RateLimit-Policy %q", r.header.Get("RateLimit"), r.header.Get("RateLimit-Policy"))
	}
	audited := len(d.auditLines())

	r = d.post(formBody(d.assertion(DevStandardClientID, d.keys[DevStandardClientID], nil)))
	expectError(t, r, http.StatusTooManyRequests, ErrorSlowDown)
	m := rateLimitRE.FindStringSubmatch(r.header.Get("RateLimit"))
	if m == nil || m[1] != "0" || r.header.Get("Retry-After") != m[2] || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("refusal headers: RateLimit %q Retry-After %q Cache-Control %q", r.header.Get("RateLimit"), r.header.Get("Retry-After"), r.header.Get("Cache-Control"))
	}
	if n := len(d.auditLines()); n != audited {
		t.Fatalf("the refused request was audited: %d records, want %d", n, audited)
	}
	if got := gather(t, reg)[`registrum_issuer_token_requests_refused_total{error="slow_down"}`]; got != 1 {
		t.Fatalf("slow_down refusals counted %v", got)
	}
	for _, path := range []string{healthPath, d.cfg.Signing.JWKSPath} {
		if r := d.get(path); r.status != http.StatusOK || r.header.Get("RateLimit") != "" {
			t.Fatalf("%s: %d RateLimit %q", path, r.status, r.header.Get("RateLimit"))
		}
	}

	wait, _ := strconv.Atoi(r.header.Get("Retry-After"))
	time.Sleep(time.Duration(wait)*time.Second + 50*time.Millisecond)
	d.issue(DevStandardClientID, nil)
}

// TestTokenRateLimitIsOffByDefault: without WithRateLimit nothing is limited and
// no RateLimit header is sent.
func TestTokenRateLimitIsOffByDefault(t *testing.T) {
	d := startDeployment(t, nil)
	for range 5 {
		r := d.post("grant_type=password")
		if r.status != http.StatusBadRequest || r.header.Get("RateLimit") != "" || strings.Contains(string(r.body), ErrorSlowDown) {
			t.Fatalf("%d %s RateLimit %q", r.status, r.body, r.header.Get("RateLimit"))
		}
	}
}
