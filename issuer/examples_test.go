package issuer

import (
	"context"
	"crypto/rand"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/issuer/keys"
	"github.com/registrum/registrum/issuer/signer/transittest"
)

// copyExample copies examples/issuer into a fresh folder and creates the
// secrets layout its README describes.
func copyExample(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "examples", "issuer")
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), raw, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dst, "secrets"), 0o700)
	os.Mkdir(filepath.Join(dst, "audit"), 0o700)
	hk := make([]byte, 32)
	rand.Read(hk)
	writeFile(t, filepath.Join(dst, "secrets"), "audit-hash-key", string(hk), 0o600)
	return dst
}

// exampleListener rewrites the example's port (and the identifier and
// endpoint base naming it) to a free port.
func exampleListener(t *testing.T, dir, name string) (string, net.Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	p := filepath.Join(dir, name)
	raw, _ := os.ReadFile(p)
	s := strings.Replace(string(raw), "port: 8443", "port: "+port, 1)
	s = strings.ReplaceAll(s, "localhost:8443", "localhost:"+port)
	s = strings.ReplaceAll(s, "127.0.0.1:8443", "127.0.0.1:"+port)
	s = strings.Replace(s, "address: 0.0.0.0", "address: 127.0.0.1", 1)
	writeFile(t, dir, name, s, 0o644)
	return p, ln
}

// rekeyClients gives each example client a fresh key pair and returns the private keys.
func rekeyClients(t *testing.T, dir string) map[string]*jose.JSONWebKey {
	t.Helper()
	out := map[string]*jose.JSONWebKey{}
	for _, id := range []string{"records-sync", "benefits-evidence"} {
		priv, pub, _ := keys.Generate("ES256")
		raw, _ := pub.MarshalJSON()
		p := filepath.Join(dir, "clients", id+".yaml")
		text, _ := os.ReadFile(p)
		s := regexp.MustCompile(`(?m)^  - \{"use".*$`).ReplaceAllString(string(text), "  - "+string(raw))
		writeFile(t, filepath.Join(dir, "clients"), id+".yaml", s, 0o644)
		out[id] = priv
	}
	return out
}

func serveExample(t *testing.T, configPath string, ln net.Listener, clientKeys map[string]*jose.JSONWebKey) *deployment {
	t.Helper()
	cfg, err := LoadConfig(configPath)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Registry().Len() != 2 {
		t.Fatalf("%d example clients", srv.Registry().Len())
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &deployment{t: t, cfg: cfg, srv: srv, baseURL: "http://" + ln.Addr().String(), keys: clientKeys, cancel: cancel, done: make(chan error, 1)}
	go func() { d.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-d.done; srv.Close() })
	return d
}

func exerciseExample(t *testing.T, d *deployment) {
	t.Helper()
	body, _, claims := d.issue("records-sync", nil)
	if body["scope"] != "records:read records:write" || claims["purpose"] != "case-management" || claims["office"] != "district-north" {
		t.Fatalf("standard token %v %v", body, claims)
	}
	_, _, claims = d.issue("benefits-evidence", map[string]any{"on_behalf_of": map[string]any{
		"actor": "caseworker:anna", "subject": map[string]any{"person-id": "P-1", "case": 17},
	}})
	subj, _ := claims["subject"].(map[string]any)
	if claims["act"] != "caseworker:anna" || subj["person_id"] != "P-1" || subj["case"] != float64(17) || claims["grant_id"] != "grant-2026-017" {
		t.Fatalf("evidence token %v", claims)
	}
}

func TestExampleLocalConfiguration(t *testing.T) {
	dir := copyExample(t)
	priv, pub, _ := keys.Generate("ES256")
	rawPriv, _ := priv.MarshalJSON()
	rawPub, _ := pub.MarshalJSON()
	writeFile(t, filepath.Join(dir, "secrets"), "issuer-signing.jwk", string(rawPriv), 0o600)
	writeFile(t, filepath.Join(dir, "keys"), "active.jwk.json", string(rawPub), 0o644)
	clientKeys := rekeyClients(t, dir)
	p, ln := exampleListener(t, dir, "issuer-local.yaml")
	exerciseExample(t, serveExample(t, p, ln, clientKeys))
}

func TestExampleStrictConfiguration(t *testing.T) {
	dir := copyExample(t)
	ts := transittest.Start(t, transittest.WithMount("transit"), transittest.WithKeyName("registrum-issuer"))
	pubPath := ts.WritePublicJWK(t.TempDir(), 1)
	raw, _ := os.ReadFile(pubPath)
	writeFile(t, filepath.Join(dir, "keys"), "active.jwk.json", string(raw), 0o644)
	p, ln := exampleListener(t, dir, "issuer.yaml")
	text, _ := os.ReadFile(p)
	writeFile(t, dir, "issuer.yaml", strings.Replace(string(text), "/run/registrum/transit.sock", ts.SocketPath(), 1), 0o644)
	clientKeys := rekeyClients(t, dir)
	exerciseExample(t, serveExample(t, p, ln, clientKeys))
}

func TestExampleAsCommittedLoads(t *testing.T) {
	dir := copyExample(t)
	// The committed configuration, public key and registrations load unchanged.
	cfg, err := LoadConfig(filepath.Join(dir, "issuer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := LoadRegistry(cfg)
	if err != nil || reg.Len() != 2 {
		t.Fatalf("%v (%d clients)", err, reg.Len())
	}
	// Both examples expect the issuer identifier as the assertion audience
	// (docs/decisions/client-assertion-audience.md).
	for _, name := range []string{"issuer.yaml", "issuer-local.yaml"} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		issuer := regexp.MustCompile(`(?m)^issuer: (\S+)$`).FindStringSubmatch(string(raw))
		audience := regexp.MustCompile(`(?m)^  audience: (\S+)$`).FindStringSubmatch(string(raw))
		if issuer == nil || audience == nil || audience[1] != issuer[1] {
			t.Errorf("%s: clientAssertion.audience %v, want the issuer identifier %v", name, audience, issuer)
		}
	}
}
