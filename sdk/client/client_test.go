package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestTargetsKeepTheHrefsQueryAndAddTheProfileOnlyWhenMissing(t *testing.T) {
	c, err := New(Options{BaseURL: "http://127.0.0.1:9/base/"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, profile, want string
	}{
		{"/v1/records/cases", "", "http://127.0.0.1:9/base/v1/records/cases"},
		{"/v1/records/cases", "caseworker", "http://127.0.0.1:9/base/v1/records/cases?accessProfile=caseworker"},
		{"/v1/records/x/1/actions/apply?accessProfile=a", "b", "http://127.0.0.1:9/base/v1/records/x/1/actions/apply?accessProfile=a"},
	} {
		got, err := c.target(&request{path: tc.path}, tc.profile)
		if err != nil || got != tc.want {
			t.Errorf("%s %s: %s %v, want %s", tc.path, tc.profile, got, err, tc.want)
		}
	}
	for _, bad := range []string{"http://elsewhere/v1/registry", "//elsewhere/x", "v1/relative"} {
		if _, err := c.target(&request{path: bad}, ""); err == nil {
			t.Errorf("%s: accepted an href off the host", bad)
		}
	}
	if _, err := New(Options{BaseURL: "ftp://x"}); err == nil {
		t.Error("an ftp base URL was accepted")
	}
}

func TestProblemsAndRetryAfter(t *testing.T) {
	p := problemOf(&response{status: 404, header: http.Header{"Content-Type": {"application/problem+json"}},
		body: []byte(`{"type":"t","title":"Resource not found","status":404,"detail":"d","code":"resource.not_found","traceId":"0123456789abcdef0123456789abcdef","fieldPath":null}`)})
	if !IsCode(p, CodeNotFound) || p.(*Problem).TraceID != "0123456789abcdef0123456789abcdef" || p.(*Problem).FieldPath != "" {
		t.Errorf("problem: %+v", p)
	}
	p = problemOf(&response{status: 502, header: http.Header{"Content-Type": {"text/html"}}, body: []byte("<html>")})
	if pe := p.(*Problem); pe.Status != 502 || pe.Code != "" {
		t.Errorf("not a problem document: %+v", pe)
	}
	for v, want := range map[string]time.Duration{"0": 0, "5": 5 * time.Second, "3600": MaxRetryAfter} {
		if d, ok := retryAfter(v); !ok || d != want {
			t.Errorf("Retry-After %s: %v %v", v, d, ok)
		}
	}
	if _, ok := retryAfter("soon"); ok {
		t.Error("Retry-After soon was read")
	}
	if s := (BBox{West: 170, South: -20.5, East: -170, North: 0}).String(); s != "170,-20.5,-170,0" {
		t.Errorf("bbox %s", s)
	}
}

// TestProblemReadIsBounded: a refusal's body is read only up to
// MaxProblemBytes (a larger one is no problem document), its detail is
// cut to MaxDetailBytes of valid UTF-8, and its status is the answer's.
func TestProblemReadIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		detail     func(string) bool
	}{
		{"huge detail", `{"status":400,"code":"request.invalid","detail":"` + strings.Repeat("é", MaxProblemBytes/4) + `"}`, 400,
			func(d string) bool {
				return len(d) <= MaxDetailBytes && utf8.ValidString(d) && strings.HasPrefix(d, "éé")
			}},
		{"oversized document", `{"status":400,"code":"request.invalid","detail":"` + strings.Repeat("x", 8<<20) + `"}`, 400,
			func(d string) bool { return strings.Contains(d, "without a problem document") }},
		{"status disagrees", `{"status":200,"code":"resource.not_found","detail":"d"}`, 404,
			func(d string) bool { return d == "d" }},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(tc.status)
			io.WriteString(w, tc.body)
		}))
		c, err := New(Options{BaseURL: srv.URL, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Registry(context.Background())
		srv.Close()
		var p *Problem
		if !errors.As(err, &p) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if p.Status != tc.status || !tc.detail(p.Detail) || len(err.Error()) > MaxDetailBytes+200 {
			t.Errorf("%s: status %d, a detail of %d bytes", tc.name, p.Status, len(p.Detail))
		}
	}
}
