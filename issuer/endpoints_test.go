package issuer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/testslack"
	"github.com/registrum/registrum/issuer/keys"
)

func TestKeySetAndMetadata(t *testing.T) {
	_, nextPub, _ := keys.Generate("ES256")
	_, revokedPub, _ := keys.Generate("ES256")
	d := startDeployment(t, func(dir string) {
		raw, _ := nextPub.MarshalJSON()
		writeFile(t, filepath.Join(dir, "keys"), "next.jwk.json", string(raw), 0o644)
		p := filepath.Join(dir, "issuer.yaml")
		text, _ := os.ReadFile(p)
		s := strings.Replace(string(text), "  activePublicJwkFile: keys/active.jwk.json\n",
			"  activePublicJwkFile: keys/active.jwk.json\n  publishedPublicJwkFiles: [keys/next.jwk.json]\n  revokedKeyIds: ["+revokedPub.KeyID+"]\n  jwksPath: /keys/issuer.jwks\n", 1)
		os.WriteFile(p, []byte(s), 0o644)
	})
	r := d.get("/keys/issuer.jwks")
	if r.status != 200 || r.header.Get("Content-Type") != "application/jwk-set+json" {
		t.Fatalf("jwks %d %q", r.status, r.header.Get("Content-Type"))
	}
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(r.body, &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 2 || set.Keys[0]["kid"] != d.cfg.Signing.Active.KeyID || set.Keys[1]["kid"] != nextPub.KeyID {
		t.Fatalf("key set %s", r.body)
	}
	for _, k := range set.Keys {
		if k["kty"] != "EC" || k["crv"] != "P-256" || k["alg"] != "ES256" || k["d"] != nil || k["kid"] == revokedPub.KeyID {
			t.Fatalf("key %v", k)
		}
	}
	// The default path is not served when another is configured.
	expectError(t, d.get("/.well-known/jwks.json"), 400, ErrorInvalidRequest)

	var first []byte
	for _, p := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		r := d.get(p)
		if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %q", p, r.status, r.header.Get("Content-Type"))
		}
		if first == nil {
			first = r.body
		} else if string(first) != string(r.body) {
			t.Fatal("the two metadata documents differ")
		}
		m := r.json(t)
		want := map[string]any{
			"issuer": d.cfg.Issuer,
			// The listener dev really serves (docs/decisions/dev-issuer-scheme.md).
			"token_endpoint": d.baseURL + "/token",
			"jwks_uri":       d.baseURL + "/keys/issuer.jwks",
		}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("%s = %v, want %v", k, m[k], v)
			}
		}
		if fmt.Sprint(m["grant_types_supported"]) != "[client_credentials]" ||
			fmt.Sprint(m["token_endpoint_auth_methods_supported"]) != "[private_key_jwt]" ||
			fmt.Sprint(m["token_endpoint_auth_signing_alg_values_supported"]) != "[ES256 EdDSA RS256]" {
			t.Errorf("metadata %s", r.body)
		}
	}
	for _, p := range []string{"/health", "/ready", "/keys/issuer.jwks"} {
		r := d.get(p)
		if r.header.Get("Cache-Control") != "no-store" || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", p, r.header)
		}
	}
}

// withListener sets listener limits in the dev config.
func withListener(t *testing.T, extra string) func(dir string) {
	return func(dir string) {
		p := filepath.Join(dir, "issuer.yaml")
		text, _ := os.ReadFile(p)
		s := strings.Replace(string(text), "listener:\n", "listener:\n"+extra, 1)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRequestSizeLimitAtItsEdge(t *testing.T) {
	d := startDeployment(t, withListener(t, "  maximumRequestBytes: 2048\n"))
	pad := func(total int) string {
		body := formBody(d.assertion(DevStandardClientID, d.keys[DevStandardClientID], nil)) + "&pad="
		if len(body) > total {
			t.Fatalf("assertion alone is %d bytes", len(body))
		}
		return body + strings.Repeat("p", total-len(body))
	}
	// Exactly the bound: accepted (unknown parameters are ignored).
	if r := d.post(pad(2048)); r.status != 200 {
		t.Fatalf("body of exactly 2048 bytes: %d %s", r.status, r.body)
	}
	// One byte more: refused, with and without a Content-Length.
	expectError(t, d.post(pad(2049)), 400, ErrorInvalidRequest)
	req, _ := http.NewRequest(http.MethodPost, d.baseURL+"/token", io.NopCloser(strings.NewReader(pad(2049))))
	req.ContentLength = -1 // chunked: the limit applies while reading
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	expectError(t, d.do(req), 400, ErrorInvalidRequest)
	req, _ = http.NewRequest(http.MethodPost, d.baseURL+"/token", io.NopCloser(strings.NewReader(pad(2048))))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if r := d.do(req); r.status != 200 {
		t.Fatalf("chunked body of exactly 2048 bytes: %d %s", r.status, r.body)
	}
}

func TestSlowClientCannotHoldTheServer(t *testing.T) {
	const timeout = 300 * time.Millisecond
	d := startDeployment(t, withListener(t, "  requestTimeoutMilliseconds: 300\n"))
	addr := strings.TrimPrefix(d.baseURL, "http://")
	measure := func(t *testing.T, send string) (time.Duration, string) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		if _, err := io.WriteString(conn, send); err != nil {
			t.Fatal(err)
		}
		// Far past the server's time-out and its slack: only the server's
		// own time-out ends the exchange in time.
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		out, _ := io.ReadAll(bufio.NewReader(conn)) // until the server closes
		return time.Since(start), string(out)
	}
	t.Run("body trickles", func(t *testing.T) {
		elapsed, out := measure(t, "POST /token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 500\r\n\r\ngrant_type=client")
		if elapsed < timeout-50*time.Millisecond {
			t.Fatalf("connection closed after %v, before the %v time-out", elapsed, timeout)
		}
		testslack.Stopped(t, "a trickling client's connection", elapsed, timeout)
		if out != "" && !strings.Contains(out, `{"error":"invalid_request"}`) {
			t.Fatalf("answer %q", out)
		}
	})
	t.Run("headers trickle", func(t *testing.T) {
		elapsed, _ := measure(t, "POST /token HTTP/1.1\r\nHost: x\r\n")
		testslack.Stopped(t, "a trickling client's connection", elapsed, timeout)
	})
	// The server still answers others.
	d.issue(DevStandardClientID, nil)
}

func TestHeaderSizeBounded(t *testing.T) {
	d := startDeployment(t, withListener(t, "  maximumRequestBytes: 1024\n"))
	req, _ := http.NewRequest(http.MethodGet, d.baseURL+"/health", nil)
	req.Header.Set("X-Big", strings.Repeat("h", 8192))
	if r := d.do(req); r.status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("oversized headers: %d", r.status)
	}
}
