package httpapi_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/httpapi"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/host/requests"
	"github.com/registrum/registrum/store/storetest"
)

// newEdgeEnv serves the test package from a fresh database with the edge
// options edit sets (CORS, rate limits).
func newEdgeEnv(t *testing.T, edit func(o *httpapi.Options)) *env {
	t.Helper()
	pool := storetest.NewPool(t)
	st := storetest.Open(t, pool, testPackage(t))
	keys, err := records.DeriveKeys(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := records.New(records.Options{Store: st, Keys: keys, Access: access.Unrestricted{}, Plans: requests.FrozenPlans{}})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	o := withRooms(t, httpapi.Options{Records: svc, Logger: slog.New(slog.NewJSONHandler(logs, nil)), Ready: st.Ping})
	edit(&o)
	srv := httptest.NewServer(httpapi.New(o))
	t.Cleanup(srv.Close)
	return &env{srv: srv, pool: pool, logs: logs}
}

const (
	allowedOrigin = "https://app.example.org"
	otherOrigin   = "https://evil.example.net"
)

func corsHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			out[k] = h.Get(k)
		}
	}
	return out
}

func varies(h http.Header, name string) bool {
	for _, line := range h.Values("Vary") {
		for _, f := range strings.Split(line, ",") {
			if strings.EqualFold(strings.TrimSpace(f), name) {
				return true
			}
		}
	}
	return false
}

func TestCORSPreflight(t *testing.T) {
	e := newEdgeEnv(t, func(o *httpapi.Options) {
		o.CORS = &httpapi.CORS{AllowedOrigins: []string{allowedOrigin}, MaxAge: 10 * time.Minute}
	})
	preflight := func(path, origin string) *http.Response {
		resp, body := e.do(t, http.MethodOptions, path, "", "",
			"Origin", origin, "Access-Control-Request-Method", "PATCH", "Access-Control-Request-Headers", "authorization, if-match, content-type")
		if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
			t.Fatalf("preflight of %s from %s: %d %s", path, origin, resp.StatusCode, body)
		}
		if !varies(resp.Header, "Origin") {
			t.Fatalf("preflight of %s: Vary %q", path, resp.Header.Values("Vary"))
		}
		return resp
	}

	t.Run("allowed origin", func(t *testing.T) {
		resp := preflight("/v1/records/children/abc", allowedOrigin)
		h := resp.Header
		if h.Get("Access-Control-Allow-Origin") != allowedOrigin || h.Get("Access-Control-Max-Age") != "600" {
			t.Fatalf("headers %v", corsHeaders(h))
		}
		for _, m := range []string{"GET", "HEAD", "POST", "PATCH", "DELETE"} {
			if !strings.Contains(h.Get("Access-Control-Allow-Methods"), m) {
				t.Errorf("method %s not allowed: %q", m, h.Get("Access-Control-Allow-Methods"))
			}
		}
		for _, name := range []string{"Authorization", "Content-Type", "If-Match", "Idempotency-Key", "Accept"} {
			if !strings.Contains(h.Get("Access-Control-Allow-Headers"), name) {
				t.Errorf("header %s not allowed: %q", name, h.Get("Access-Control-Allow-Headers"))
			}
		}
		if h.Get("Access-Control-Allow-Credentials") != "" {
			t.Error("credentials admitted")
		}
	})

	t.Run("known and unknown paths answer alike", func(t *testing.T) {
		want := corsHeaders(preflight("/v1/records/children", allowedOrigin).Header)
		for _, path := range []string{"/v1/nowhere", "/v1/records/secret-entity/x", "/v1/gis", "/v1/gis/collections/children/items"} {
			resp := preflight(path, allowedOrigin)
			got := corsHeaders(resp.Header)
			if len(got) != len(want) {
				t.Fatalf("%s: %v, want %v", path, got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Fatalf("%s: %s = %q, want %q", path, k, got[k], v)
				}
			}
		}
	})

	t.Run("other origin gets no CORS header", func(t *testing.T) {
		for _, path := range []string{"/v1/records/children", "/v1/nowhere"} {
			if h := corsHeaders(preflight(path, otherOrigin).Header); len(h) != 0 {
				t.Fatalf("%s: %v", path, h)
			}
		}
	})
}

func TestCORSOnRequests(t *testing.T) {
	e := newEdgeEnv(t, func(o *httpapi.Options) {
		o.CORS = &httpapi.CORS{AllowedOrigins: []string{allowedOrigin}}
	})
	resp, body := e.do(t, http.MethodGet, "/v1/records/children", "", "", "Origin", allowedOrigin)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %d %s", resp.StatusCode, body)
	}
	h := resp.Header
	if h.Get("Access-Control-Allow-Origin") != allowedOrigin {
		t.Fatalf("headers %v", corsHeaders(h))
	}
	exposed := strings.Split(h.Get("Access-Control-Expose-Headers"), ", ")
	for _, name := range []string{"ETag", "Location", "Link", "Idempotent-Replayed", "Retry-After", "RateLimit", "RateLimit-Policy"} {
		if !slices.Contains(exposed, name) {
			t.Errorf("%s not exposed: %q", name, exposed)
		}
	}
	// The handler's Vary: Accept is kept, and Origin is added to it.
	if !varies(h, "Origin") || !varies(h, "Accept") {
		t.Fatalf("Vary %q", h.Values("Vary"))
	}
	if h.Get("Access-Control-Max-Age") != "" {
		t.Fatal("max age without a configured one")
	}

	// A refusal carries them too, so that a page can read the problem.
	resp, _ = e.do(t, http.MethodGet, "/v1/nowhere", "", "", "Origin", allowedOrigin)
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Access-Control-Allow-Origin") != allowedOrigin || !varies(resp.Header, "Origin") {
		t.Fatalf("refusal: %d %v", resp.StatusCode, corsHeaders(resp.Header))
	}

	// Another origin is answered (the browser keeps the page from reading
	// it) without any CORS header.
	resp, _ = e.do(t, http.MethodGet, "/v1/records/children", "", "", "Origin", otherOrigin)
	if resp.StatusCode != http.StatusOK || len(corsHeaders(resp.Header)) != 0 || !varies(resp.Header, "Origin") {
		t.Fatalf("other origin: %d %v Vary %q", resp.StatusCode, corsHeaders(resp.Header), resp.Header.Values("Vary"))
	}
}

func TestCORSAnyOrigin(t *testing.T) {
	e := newEdgeEnv(t, func(o *httpapi.Options) { o.CORS = &httpapi.CORS{AllowedOrigins: []string{"*"}} })
	resp, _ := e.do(t, http.MethodOptions, "/v1/records/children", "", "", "Origin", otherOrigin, "Access-Control-Request-Method", "GET")
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("%d %v", resp.StatusCode, corsHeaders(resp.Header))
	}
}

func TestCORSIsOffByDefault(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do(t, http.MethodOptions, "/v1/records/children", "", "", "Origin", allowedOrigin, "Access-Control-Request-Method", "GET")
	problemOf(t, resp, body, http.StatusNotFound, "resource.not_found")
	if h := corsHeaders(resp.Header); len(h) != 0 {
		t.Fatalf("CORS headers without a policy: %v", h)
	}
	resp, _ = e.do(t, http.MethodGet, "/v1/records/children", "", "", "Origin", allowedOrigin)
	if h := corsHeaders(resp.Header); len(h) != 0 || varies(resp.Header, "Origin") {
		t.Fatalf("CORS headers without a policy: %v", h)
	}
}
