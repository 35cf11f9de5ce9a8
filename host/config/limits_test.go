package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/strictyaml"
)

func TestCORSAndRateLimitAreOffByDefault(t *testing.T) {
	c, err := Load(write(t, valid))
	if err != nil {
		t.Fatal(err)
	}
	if c.CORS != nil || c.RateLimit != nil {
		t.Fatalf("cors %+v rateLimit %+v", c.CORS, c.RateLimit)
	}
}

func TestCORSAndRateLimitLoad(t *testing.T) {
	doc := valid + `cors: {allowedOrigins: ["https://app.example.org", "http://localhost:5173"]}
rateLimit: {requestsPerSecond: 0.5, burst: 10}
`
	c, err := Load(write(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.CORS.AllowedOrigins) != 2 || c.CORS.MaxAge() != DefaultCORSMaxAgeSeconds*time.Second {
		t.Fatalf("cors %+v max age %v", c.CORS, c.CORS.MaxAge())
	}
	if c.RateLimit.RequestsPerSecond != 0.5 || c.RateLimit.Burst != 10 || c.RateLimit.Clients != 0 {
		t.Fatalf("rateLimit %+v", c.RateLimit)
	}
	// The environment overrides them like any key.
	c, err = load(write(t, doc), []string{
		EnvPrefix + "CORS_ALLOWED_ORIGINS=https://a.example,https://b.example",
		EnvPrefix + "RATE_LIMIT_BURST=3",
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.CORS.AllowedOrigins, " ") != "https://a.example https://b.example" || c.RateLimit.Burst != 3 {
		t.Fatalf("overrides not applied: %+v %+v", c.CORS, c.RateLimit)
	}
}

func TestCORSAndRateLimitRefusals(t *testing.T) {
	cases := []struct {
		name, doc, key, rule string
	}{
		{"no origin", "cors: {allowedOrigins: []}", "cors.allowedOrigins", "at least one origin"},
		{"path", `cors: {allowedOrigins: ["https://app.example.org/"]}`, "cors.allowedOrigins[0]", "no path"},
		{"upper case", `cors: {allowedOrigins: ["https://App.example.org"]}`, "cors.allowedOrigins[0]", "lower case"},
		{"default port", `cors: {allowedOrigins: ["https://a.example", "https://app.example.org:443"]}`, "cors.allowedOrigins[1]", "no default port"},
		{"scheme", `cors: {allowedOrigins: ["ftp://app.example.org"]}`, "cors.allowedOrigins[0]", "http or https"},
		{"star among others", `cors: {allowedOrigins: ["*", "https://a.example"]}`, "cors.allowedOrigins[0]", "only entry"},
		{"max age", `cors: {allowedOrigins: ["*"], maxAgeSeconds: 86401}`, "cors.maxAgeSeconds", "between 0 and 86400"},
		{"unknown cors key", `cors: {allowedOrigins: ["*"], allowCredentials: true}`, "cors.allowCredentials", "unknown field"},
		{"zero rate", "rateLimit: {requestsPerSecond: 0, burst: 1}", "rateLimit.requestsPerSecond", "above 0"},
		{"negative rate", "rateLimit: {requestsPerSecond: -1, burst: 1}", "rateLimit.requestsPerSecond", "above 0"},
		{"no burst", "rateLimit: {requestsPerSecond: 5}", "rateLimit.burst", "at least 1"},
		{"clients", "rateLimit: {requestsPerSecond: 5, burst: 5, clients: -1}", "rateLimit.clients", "between 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := write(t, valid+c.doc+"\n")
			_, err := Load(p)
			var ce *strictyaml.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a config Error", err)
			}
			if ce.Path != c.key || !strings.Contains(ce.Message, c.rule) {
				t.Fatalf("got %q (key %q), want key %q and rule containing %q", err, ce.Path, c.key, c.rule)
			}
		})
	}
}
