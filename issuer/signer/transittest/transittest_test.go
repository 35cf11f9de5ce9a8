package transittest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/registrum/registrum/issuer/keys"
	"github.com/registrum/registrum/issuer/signer/transittest"
)

type answer struct {
	status int
	body   map[string]any
}

// call sends one raw HTTP request over the server's socket.
func call(t *testing.T, srv *transittest.Server, method, path, body string, header map[string]string) answer {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", srv.SocketPath())
	}}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Vault-Request", "true")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: content type %q", method, path, ct)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: %v in %q", method, path, err, raw)
	}
	return answer{res.StatusCode, m}
}

func wantError(t *testing.T, a answer, status int, msg string) {
	t.Helper()
	errs, ok := a.body["errors"].([]any)
	if a.status != status || !ok {
		t.Fatalf("got %d %v, want %d with an errors array", a.status, a.body, status)
	}
	if msg != "" && (len(errs) != 1 || !strings.Contains(errs[0].(string), msg)) {
		t.Fatalf("errors %v, want one mentioning %q", errs, msg)
	}
}

func TestReadKeyDocument(t *testing.T) {
	srv := transittest.Start(t, transittest.WithMount("pki-transit"), transittest.WithKeyName("issuer"), transittest.WithVersions(2))
	a := call(t, srv, "GET", "/v1/pki-transit/keys/issuer", "", nil)
	if a.status != 200 {
		t.Fatalf("status %d", a.status)
	}
	d := a.body["data"].(map[string]any)
	for member, want := range map[string]any{
		"type": "ecdsa-p256", "name": "issuer", "latest_version": float64(2), "min_encryption_version": float64(0),
		"min_decryption_version": float64(1), "exportable": false, "allow_plaintext_backup": false,
		"deletion_allowed": false, "derived": false, "supports_signing": true, "supports_encryption": false,
	} {
		if d[member] != want {
			t.Fatalf("data.%s = %v, want %v", member, d[member], want)
		}
	}
	versions := d["keys"].(map[string]any)
	for _, v := range []int{1, 2} {
		entry := versions[strconv.Itoa(v)].(map[string]any)
		block, _ := pem.Decode([]byte(entry["public_key"].(string)))
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if !pub.(*ecdsa.PublicKey).Equal(srv.PublicJWK(v).Key) || entry["name"] != "P-256" {
			t.Fatalf("version %d public key differs from PublicJWK", v)
		}
	}
	if tp, _ := keys.Thumbprint(srv.PublicJWK(1)); tp != srv.PublicJWK(1).KeyID {
		t.Fatal("PublicJWK kid is not its thumbprint")
	}
	if path := srv.WritePublicJWK(t.TempDir(), 2); !strings.HasSuffix(path, srv.PublicJWK(2).KeyID+".json") {
		t.Fatalf("path %q", path)
	} else if _, err := keys.LoadActiveP256(path); err != nil {
		t.Fatal(err)
	}
}

func TestSignEndpoint(t *testing.T) {
	srv := transittest.Start(t, transittest.WithVersions(2))
	pub1 := srv.PublicJWK(1).Key.(*ecdsa.PublicKey)
	digest := sha256.Sum256([]byte("message"))
	input := base64.StdEncoding.EncodeToString([]byte("message"))

	// Default marshaling is ASN.1 in standard base64; the default version is the latest.
	a := call(t, srv, "POST", "/v1/transit/sign/registrum-issuer", `{"input":"`+input+`"}`, nil)
	d := a.body["data"].(map[string]any)
	sig := d["signature"].(string)
	if a.status != 200 || !strings.HasPrefix(sig, "vault:v2:") || d["key_version"] != float64(2) {
		t.Fatalf("%d %v", a.status, a.body)
	}
	der, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sig, "vault:v2:"))
	if err != nil || !ecdsa.VerifyASN1(srv.PublicJWK(2).Key.(*ecdsa.PublicKey), digest[:], der) {
		t.Fatalf("ASN.1 signature does not verify: %v", err)
	}

	// jws marshaling, prehashed input, pinned version, hash in the URL; PUT works like POST.
	pre := base64.StdEncoding.EncodeToString(digest[:])
	a = call(t, srv, "PUT", "/v1/transit/sign/registrum-issuer/sha2-256", `{"input":"`+pre+`","prehashed":true,"key_version":1,"marshaling_algorithm":"jws"}`, nil)
	sig = a.body["data"].(map[string]any)["signature"].(string)
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(sig, "vault:v1:"))
	if a.status != 200 || err != nil || len(raw) != 64 {
		t.Fatalf("%d %v %v", a.status, a.body, err)
	}
	r, s := new(big.Int).SetBytes(raw[:32]), new(big.Int).SetBytes(raw[32:])
	if !ecdsa.Verify(pub1, digest[:], r, s) {
		t.Fatal("jws signature does not verify")
	}

	wantError(t, call(t, srv, "POST", "/v1/transit/sign/registrum-issuer", `{"input":"`+input+`","key_version":3}`, nil), 400, "does not exist")
	wantError(t, call(t, srv, "POST", "/v1/transit/sign/registrum-issuer", `{"input":"%%%"}`, nil), 400, "base64")
	wantError(t, call(t, srv, "POST", "/v1/transit/sign/registrum-issuer", `{}`, nil), 400, "missing input")
	wantError(t, call(t, srv, "POST", "/v1/transit/sign/registrum-issuer/sha2-512", `{"input":"`+input+`"}`, nil), 400, "unsupported hash")
	wantError(t, call(t, srv, "POST", "/v1/transit/sign/registrum-issuer", `{"input":"`+input+`","marshaling_algorithm":"der"}`, nil), 400, "marshaling")
	wantError(t, call(t, srv, "GET", "/v1/transit/sign/registrum-issuer", "", nil), 405, "unsupported operation")
	wantError(t, call(t, srv, "POST", "/v1/transit/sign/other", `{"input":"`+input+`"}`, nil), 400, "signing key not found")
	srv.Set(func(c *transittest.Controls) { c.MinEncryptionVersion = 2 })
	wantError(t, call(t, srv, "POST", "/v1/transit/sign/registrum-issuer", `{"input":"`+input+`","key_version":1}`, nil), 400, "minimum encryption version")
}

func TestGuardsAndErrorShapes(t *testing.T) {
	srv := transittest.Start(t, transittest.WithToken("hvs.token"))
	good := map[string]string{"X-Vault-Token": "hvs.token"}
	if a := call(t, srv, "GET", "/v1/transit/keys/registrum-issuer", "", good); a.status != 200 {
		t.Fatalf("status %d", a.status)
	}
	wantError(t, call(t, srv, "GET", "/v1/transit/keys/registrum-issuer", "", nil), 403, "permission denied")
	wantError(t, call(t, srv, "GET", "/v1/transit/keys/registrum-issuer", "", map[string]string{"X-Vault-Token": "hvs.other"}), 403, "permission denied")
	wantError(t, call(t, srv, "GET", "/v1/transit/keys/registrum-issuer", "", map[string]string{"X-Vault-Token": "hvs.token", "X-Vault-Request": ""}), 412, "X-Vault-Request")
	wantError(t, call(t, srv, "GET", "/v1/transit/keys/absent", "", good), 404, "")
	wantError(t, call(t, srv, "GET", "/v1/other/keys/registrum-issuer", "", good), 404, "route entry not found")
	srv.SetUnavailable(true)
	wantError(t, call(t, srv, "GET", "/v1/transit/keys/registrum-issuer", "", good), 503, "Vault is sealed")
	srv.SetUnavailable(false)
	if a := call(t, srv, "GET", "/v1/transit/keys/registrum-issuer", "", good); a.status != 200 {
		t.Fatalf("status %d after recovery", a.status)
	}

	open := transittest.Start(t, transittest.WithoutRequestHeaderCheck())
	if a := call(t, open, "GET", "/v1/transit/keys/registrum-issuer", "", map[string]string{"X-Vault-Request": ""}); a.status != 200 {
		t.Fatalf("status %d without the request header check", a.status)
	}
}
