package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// The dev issuer's discovery documents keep the https identifier and name
// endpoints dev really serves: each answers over plain HTTP on loopback.
func TestDevDiscoveryNamesWhatItServes(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	run := startDev(t, data)
	defer run.stop(t, data, syscall.SIGTERM)
	issuerURL := regexp.MustCompile(`token issuer\s+(http://127\.0\.0\.1:\d+)`).FindStringSubmatch(run.output.String())
	if issuerURL == nil {
		t.Fatalf("no token issuer line in:\n%s", run.output.String())
	}
	for _, path := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		resp, err := http.Get(issuerURL[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
		}
		if iss, _ := doc["issuer"].(string); !strings.HasPrefix(iss, "https://") {
			t.Errorf("%s: issuer %q is not the https identifier", path, iss)
		}
		for _, member := range []string{"token_endpoint", "jwks_uri"} {
			target, _ := doc[member].(string)
			u, err := url.Parse(target)
			if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" {
				t.Errorf("%s: %s %q is not what dev serves", path, member, target)
				continue
			}
			resp, err := http.Get(target)
			if err != nil {
				t.Errorf("%s: GET %s: %v", member, target, err)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// The token endpoint answers a GET with its own OAuth error:
			// that shows it is there.
			ok := resp.StatusCode == http.StatusOK
			if member == "token_endpoint" {
				ok = resp.StatusCode == http.StatusBadRequest && strings.Contains(string(b), `"invalid_request"`)
			}
			if !ok {
				t.Errorf("%s: GET %s answered %d %s", member, target, resp.StatusCode, b)
			}
		}
	}
}
