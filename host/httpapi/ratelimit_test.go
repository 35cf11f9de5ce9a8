package httpapi_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/host/httpapi"
	"github.com/registrum/registrum/internal/ratelimit"
)

var (
	policyRE    = regexp.MustCompile(`^"client";q=(\d+);w=(\d+)$`)
	rateLimitRE = regexp.MustCompile(`^"client";r=(\d+);t=(\d+)$`)
)

// limitedEnv serves the test package with a rate limit of perSecond and
// burst over a table of clients; bearer tokens "token-<name>" verify as
// principal <name>, any other token verifies as nobody.
func limitedEnv(t *testing.T, perSecond float64, burst, clients int, cors *httpapi.CORS) (*env, *ratelimit.Limiter) {
	t.Helper()
	l, err := ratelimit.New(perSecond, burst, clients)
	if err != nil {
		t.Fatal(err)
	}
	e := newEdgeEnv(t, func(o *httpapi.Options) {
		o.CORS = cors
		o.RateLimit = &httpapi.RateLimit{Limiter: l, Principal: func(_ context.Context, bearer string) string {
			name, _ := strings.CutPrefix(bearer, "token-")
			if name == bearer {
				return ""
			}
			return name
		}}
	})
	return e, l
}

// remaining checks the RateLimit headers of an answer and returns r and t.
func remaining(t *testing.T, resp *http.Response) (r, reset int) {
	t.Helper()
	if !policyRE.MatchString(resp.Header.Get("RateLimit-Policy")) {
		t.Fatalf("RateLimit-Policy %q", resp.Header.Get("RateLimit-Policy"))
	}
	m := rateLimitRE.FindStringSubmatch(resp.Header.Get("RateLimit"))
	if m == nil {
		t.Fatalf("RateLimit %q", resp.Header.Get("RateLimit"))
	}
	r, _ = strconv.Atoi(m[1])
	reset, _ = strconv.Atoi(m[2])
	return r, reset
}

func TestRateLimitReachedAndRecovered(t *testing.T) {
	e, _ := limitedEnv(t, 1, 2, 0, &httpapi.CORS{AllowedOrigins: []string{allowedOrigin}})
	// A real route and an unknown one count alike.
	resp, body := e.do(t, http.MethodGet, "/v1/records/children", "", "", "Origin", allowedOrigin)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first: %d %s", resp.StatusCode, body)
	}
	if r, _ := remaining(t, resp); r != 1 {
		t.Fatalf("r = %d after one of two", r)
	}
	resp, _ = e.do(t, http.MethodGet, "/v1/nowhere", "", "", "Origin", allowedOrigin)
	if r, _ := remaining(t, resp); resp.StatusCode != http.StatusNotFound || r != 0 {
		t.Fatalf("second: %d r=%d", resp.StatusCode, r)
	}
	resp, body = e.do(t, http.MethodGet, "/v1/records/children", "", "", "Origin", allowedOrigin)
	problemOf(t, resp, body, http.StatusTooManyRequests, "rate_limit.exceeded")
	r, reset := remaining(t, resp)
	if r != 0 || reset != 1 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("refused: r=%d t=%d Retry-After %q", r, reset, resp.Header.Get("Retry-After"))
	}
	// A page of the allowed origin can read the refusal and its headers.
	if resp.Header.Get("Access-Control-Allow-Origin") != allowedOrigin || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Retry-After") {
		t.Fatalf("CORS headers of the refusal: %v", corsHeaders(resp.Header))
	}
	// Preflights and what is not /v1 are not limited.
	resp, _ = e.do(t, http.MethodOptions, "/v1/records/children", "", "", "Origin", allowedOrigin, "Access-Control-Request-Method", "GET")
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("preflight: %d", resp.StatusCode)
	}
	for _, path := range []string{"/health", "/ready"} {
		resp, _ = e.do(t, http.MethodGet, path, "", "", "Origin", allowedOrigin)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("%s: %d RateLimit %q", path, resp.StatusCode, resp.Header.Get("RateLimit"))
		}
	}

	time.Sleep(time.Duration(reset)*time.Second + 50*time.Millisecond)
	resp, body = e.do(t, http.MethodGet, "/v1/records/children", "", "", "Origin", allowedOrigin)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after Retry-After: %d %s", resp.StatusCode, body)
	}
	if r, _ := remaining(t, resp); r != 0 {
		t.Fatalf("r = %d after recovering one request", r)
	}
}

func TestRateLimitClientsAreIndependent(t *testing.T) {
	e, _ := limitedEnv(t, 0.01, 1, 0, nil)
	get := func(token string) int {
		var hdr []string
		if token != "" {
			hdr = []string{"Authorization", "Bearer " + token}
		}
		resp, _ := e.do(t, http.MethodGet, "/v1/nowhere", "", "", hdr...)
		remaining(t, resp)
		return resp.StatusCode
	}
	if get("token-alice") != http.StatusNotFound || get("token-alice") != http.StatusTooManyRequests {
		t.Fatal("alice: burst of one not applied")
	}
	// Another principal from the same address, and the address itself, have
	// their own buckets.
	if get("token-bob") != http.StatusNotFound {
		t.Fatal("bob is limited by alice's requests")
	}
	if get("") != http.StatusNotFound {
		t.Fatal("the anonymous caller is limited by the principals' requests")
	}
	// A token that does not verify is limited as its address, whatever it
	// says: inventing tokens gains no bucket.
	for _, forged := range []string{"forged-1", "forged-2"} {
		if got := get(forged); got != http.StatusTooManyRequests {
			t.Fatalf("%s: %d", forged, got)
		}
	}
}

func TestRateLimitTableIsBounded(t *testing.T) {
	e, l := limitedEnv(t, 0.01, 1, 2, nil)
	get := func(name string) int {
		resp, _ := e.do(t, http.MethodGet, "/v1/nowhere", "", "", "Authorization", "Bearer token-"+name)
		return resp.StatusCode
	}
	get("alice")
	if get("alice") != http.StatusTooManyRequests {
		t.Fatal("alice not limited")
	}
	get("bob")
	get("carol")
	if n := l.Len(); n != 2 {
		t.Fatalf("table holds %d clients, bound 2", n)
	}
	// Alice, the least recently seen, was forgotten and starts afresh.
	if got := get("alice"); got != http.StatusNotFound {
		t.Fatalf("alice after eviction: %d", got)
	}
	if n := l.Len(); n != 2 {
		t.Fatalf("table holds %d clients, bound 2", n)
	}
}

func TestRateLimitIsOffByDefault(t *testing.T) {
	e := newEnv(t)
	for range 5 {
		resp, _ := e.do(t, http.MethodGet, "/v1/nowhere", "", "")
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("RateLimit") != "" || resp.Header.Get("RateLimit-Policy") != "" {
			t.Fatalf("%d RateLimit %q", resp.StatusCode, resp.Header.Get("RateLimit"))
		}
	}
}
