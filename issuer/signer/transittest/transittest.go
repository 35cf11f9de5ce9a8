// Package transittest runs an in-process HashiCorp Vault / OpenBao Transit
// server on a unix socket, for tests of the transit signer and of everything
// built on it.
//
// The server speaks the real wire format of the two Transit endpoints the
// issuer uses — reading a key (GET /v1/<mount>/keys/<name>) and signing
// (POST /v1/<mount>/sign/<name>[/<hash>]) — with the providers' request and
// response JSON, status codes and `{"errors":[...]}` error shape. It holds real
// P-256 keys, one per key version, and signs with them. Switches in
// [Controls] simulate each custody-control failure, a wrong key version, a
// wrong public key, a bad signature, slowness, oversized answers and
// unavailability (a sealed server answering 503, or a closed socket), and
// recovery from each.
//
//	srv := transittest.Start(t)
//	s, _ := signer.NewTransit(signer.TransitConfig{
//		UnixSocketPath: srv.SocketPath(), Mount: srv.Mount(), KeyName: srv.KeyName(),
//		KeyVersion: 1, Timeout: time.Second, Active: srv.PublicJWK(1),
//	})
//	srv.SetUnavailable(true) // the next call fails with a 503
package transittest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/issuer/keys"
)

// Controls are the switches that make the server misbehave. The zero value
// (after [Start]) is a healthy server: an ecdsa-p256 key that signs, is not
// derived, exportable, backed up in plaintext or deletable.
type Controls struct {
	// KeyType overrides the reported key type (default "ecdsa-p256").
	KeyType string
	// SigningUnsupported reports supports_signing: false and refuses to sign.
	SigningUnsupported bool
	// Derived, Exportable, AllowPlaintextBackup and DeletionAllowed report
	// the custody flags as true.
	Derived, Exportable, AllowPlaintextBackup, DeletionAllowed bool
	// OmitCustodyFlags leaves derived, exportable, allow_plaintext_backup and
	// deletion_allowed out of the key document.
	OmitCustodyFlags bool
	// MinEncryptionVersion sets min_encryption_version; signing with a lower
	// version is refused, as the providers do.
	MinEncryptionVersion int
	// HideVersion removes that version from the reported keys map.
	HideVersion int
	// WrongPublicKey reports another P-256 public key for every version.
	WrongPublicKey bool
	// SignWithVersion signs with this version's key (and labels the signature
	// with it) whatever version was asked for; 0 honours the request.
	SignWithVersion int
	// BadSignature returns a signature that does not verify.
	BadSignature bool
	// Unavailable answers every request with 503 {"errors":["Vault is sealed"]}.
	Unavailable bool
	// Delay holds every answer back this long (or until the client gives up).
	Delay time.Duration
	// OversizeResponse pads answers past 64 KiB.
	OversizeResponse bool
	// DuplicateMember answers the key document with a duplicated member.
	DuplicateMember bool
}

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// Option configures [Start].
type Option func(*config)

type config struct {
	mount, keyName       string
	versions             int
	token                string
	requireRequestHeader bool
}

// WithMount sets the Transit mount (default "transit").
func WithMount(mount string) Option { return func(c *config) { c.mount = mount } }

// WithKeyName sets the key name (default "registrum-issuer").
func WithKeyName(name string) Option { return func(c *config) { c.keyName = name } }

// WithVersions creates n key versions (default 1); latest_version is n.
func WithVersions(n int) Option { return func(c *config) { c.versions = n } }

// WithToken makes the server require this X-Vault-Token, as a Vault or
// OpenBao server without an injecting proxy does (403 otherwise).
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithoutRequestHeaderCheck stops requiring `X-Vault-Request: true`, which an
// Agent or Proxy with require_request_header demands (412 otherwise).
func WithoutRequestHeaderCheck() Option { return func(c *config) { c.requireRequestHeader = false } }

// Server is a running Transit server. Its methods are safe for concurrent use.
type Server struct {
	cfg    config
	dir    string
	socket string
	tb     testing.TB

	mu       sync.Mutex
	versions []*ecdsa.PrivateKey // index v-1
	wrong    *ecdsa.PrivateKey
	controls Controls
	requests []Request
	http     *http.Server
	created  time.Time
}

// Start starts a server on a fresh unix socket and stops it when the test
// ends. It fails the test if the server cannot start.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	cfg := config{mount: "transit", keyName: "registrum-issuer", versions: 1, requireRequestHeader: true}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.versions < 1 {
		tb.Fatalf("transittest: WithVersions(%d): at least one version", cfg.versions)
	}
	// A short folder outside t.TempDir keeps the socket path under the
	// 107-byte limit of unix socket addresses.
	dir, err := os.MkdirTemp("", "transit")
	if err != nil {
		tb.Fatalf("transittest: %v", err)
	}
	s := &Server{cfg: cfg, dir: dir, socket: filepath.Join(dir, "s.sock"), tb: tb, created: time.Now().UTC()}
	for range cfg.versions {
		s.versions = append(s.versions, newKey(tb))
	}
	s.wrong = newKey(tb)
	tb.Cleanup(func() {
		s.Stop()
		os.RemoveAll(dir)
	})
	if err := s.listen(); err != nil {
		tb.Fatalf("transittest: %v", err)
	}
	return s
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("transittest: generate key: %v", err)
	}
	return k
}

func (s *Server) listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.http != nil {
		return nil
	}
	ln, err := net.Listen("unix", s.socket)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.socket, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 5 * time.Second}
	s.http = srv
	go srv.Serve(ln)
	return nil
}

// SocketPath returns the absolute path of the server's unix socket.
func (s *Server) SocketPath() string { return s.socket }

// Mount returns the Transit mount the server answers on.
func (s *Server) Mount() string { return s.cfg.mount }

// KeyName returns the name of the server's key.
func (s *Server) KeyName() string { return s.cfg.keyName }

// LatestVersion returns the newest key version.
func (s *Server) LatestVersion() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.versions)
}

// PublicJWK returns the public JWK of a key version, with kid = its RFC 7638
// thumbprint and alg ES256: the issuer's activePublicJwkFile for that version.
func (s *Server) PublicJWK(version int) *jose.JSONWebKey {
	s.tb.Helper()
	s.mu.Lock()
	if version < 1 || version > len(s.versions) {
		s.mu.Unlock()
		s.tb.Fatalf("transittest: PublicJWK(%d): the key has versions 1..%d", version, len(s.versions))
		return nil
	}
	pub := &s.versions[version-1].PublicKey
	s.mu.Unlock()
	k := &jose.JSONWebKey{Key: pub, Algorithm: "ES256", Use: "sig"}
	kid, err := keys.Thumbprint(k)
	if err != nil {
		s.tb.Fatalf("transittest: %v", err)
	}
	k.KeyID = kid
	return k
}

// WritePublicJWK writes the public JWK of a key version to dir as
// <kid>.json and returns the file's path.
func (s *Server) WritePublicJWK(dir string, version int) string {
	s.tb.Helper()
	k := s.PublicJWK(version)
	raw, err := json.Marshal(k)
	if err != nil {
		s.tb.Fatalf("transittest: %v", err)
	}
	path := filepath.Join(dir, k.KeyID+".json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		s.tb.Fatalf("transittest: %v", err)
	}
	return path
}

// Rotate adds a new key version, as POST /v1/<mount>/keys/<name>/rotate
// does, and returns its number.
func (s *Server) Rotate() int {
	k := newKey(s.tb)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versions = append(s.versions, k)
	return len(s.versions)
}

// Set changes the controls under the server's lock.
func (s *Server) Set(change func(c *Controls)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	change(&s.controls)
}

// Reset restores a healthy server (all controls off).
func (s *Server) Reset() { s.Set(func(c *Controls) { *c = Controls{} }) }

// SetUnavailable makes the server answer 503, as a sealed Vault or OpenBao
// does, or recover.
func (s *Server) SetUnavailable(unavailable bool) {
	s.Set(func(c *Controls) { c.Unavailable = unavailable })
}

// Stop closes the socket: connections fail until [Server.Restart].
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.http
	s.http = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
		os.Remove(s.socket)
	}
}

// Restart listens on the same socket path again after [Server.Stop].
func (s *Server) Restart() {
	s.tb.Helper()
	if err := s.listen(); err != nil {
		s.tb.Fatalf("transittest: restart: %v", err)
	}
}

// Requests returns a copy of the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// maxRequestBody bounds request bodies, like the providers' own limits.
const maxRequestBody = 1 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		writeErrors(w, http.StatusBadRequest, "failed to read request body")
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	ctl := s.controls
	s.mu.Unlock()

	if ctl.Delay > 0 {
		select {
		case <-time.After(ctl.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if ctl.Unavailable {
		writeErrors(w, http.StatusServiceUnavailable, "Vault is sealed")
		return
	}
	if s.cfg.requireRequestHeader && r.Header.Get("X-Vault-Request") != "true" {
		writeErrors(w, http.StatusPreconditionFailed, "missing 'X-Vault-Request' header")
		return
	}
	if s.cfg.token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Vault-Token")), []byte(s.cfg.token)) != 1 {
		writeErrors(w, http.StatusForbidden, "permission denied")
		return
	}
	if len(body) > maxRequestBody {
		writeErrors(w, http.StatusRequestEntityTooLarge, "http: request body too large")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/"+s.cfg.mount+"/")
	if !ok {
		writeErrors(w, http.StatusNotFound, "no handler for route \""+strings.TrimPrefix(r.URL.Path, "/v1/")+"\". route entry not found.")
		return
	}
	switch {
	case rest == "keys/"+s.cfg.keyName:
		if r.Method != http.MethodGet {
			writeErrors(w, http.StatusMethodNotAllowed, "1 error occurred:\n\t* unsupported operation\n\n")
			return
		}
		s.readKey(w, ctl)
	case strings.HasPrefix(rest, "keys/"):
		writeJSON(w, http.StatusNotFound, map[string]any{"errors": []string{}})
	case rest == "sign/"+s.cfg.keyName || strings.HasPrefix(rest, "sign/"+s.cfg.keyName+"/"):
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			writeErrors(w, http.StatusMethodNotAllowed, "1 error occurred:\n\t* unsupported operation\n\n")
			return
		}
		s.sign(w, ctl, strings.TrimPrefix(strings.TrimPrefix(rest, "sign/"+s.cfg.keyName), "/"), body)
	case strings.HasPrefix(rest, "sign/"):
		writeErrors(w, http.StatusBadRequest, "signing key not found")
	default:
		writeErrors(w, http.StatusNotFound, "1 error occurred:\n\t* unsupported path\n\n")
	}
}

func (s *Server) readKey(w http.ResponseWriter, ctl Controls) {
	s.mu.Lock()
	versions := append([]*ecdsa.PrivateKey(nil), s.versions...)
	wrong := s.wrong
	s.mu.Unlock()

	keyType := "ecdsa-p256"
	if ctl.KeyType != "" {
		keyType = ctl.KeyType
	}
	keyMap := map[string]any{}
	for i, k := range versions {
		v := i + 1
		if v == ctl.HideVersion {
			continue
		}
		pub := &k.PublicKey
		if ctl.WrongPublicKey {
			pub = &wrong.PublicKey
		}
		keyMap[strconv.Itoa(v)] = map[string]any{
			"certificate_chain": "",
			"creation_time":     s.created.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano),
			"name":              "P-256",
			"public_key":        publicPEM(pub),
		}
	}
	data := map[string]any{
		"auto_rotate_period":     0,
		"imported_key":           false,
		"keys":                   keyMap,
		"latest_version":         len(versions),
		"min_available_version":  0,
		"min_decryption_version": 1,
		"min_encryption_version": ctl.MinEncryptionVersion,
		"name":                   s.cfg.keyName,
		"supports_decryption":    false,
		"supports_derivation":    false,
		"supports_encryption":    false,
		"supports_signing":       !ctl.SigningUnsupported,
		"type":                   keyType,
	}
	if !ctl.OmitCustodyFlags {
		data["derived"] = ctl.Derived
		data["exportable"] = ctl.Exportable
		data["allow_plaintext_backup"] = ctl.AllowPlaintextBackup
		data["deletion_allowed"] = ctl.DeletionAllowed
	}
	resp := envelope(data)
	if ctl.OversizeResponse {
		resp["warnings"] = []string{strings.Repeat("w", 70<<10)}
	}
	if ctl.DuplicateMember {
		raw, _ := json.Marshal(resp)
		// Repeat the "data" member with a harmless object: strict decoders refuse it.
		raw = append(raw[:len(raw)-1], []byte(`,"data":{}}`)...)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(raw)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// signBody is the request body of the sign endpoint.
type signBody struct {
	Input               *string `json:"input"`
	KeyVersion          int     `json:"key_version"`
	Prehashed           bool    `json:"prehashed"`
	MarshalingAlgorithm string  `json:"marshaling_algorithm"`
	HashAlgorithm       string  `json:"hash_algorithm"`
	Algorithm           string  `json:"algorithm"`
	SignatureAlgorithm  string  `json:"signature_algorithm"`
}

func (s *Server) sign(w http.ResponseWriter, ctl Controls, urlHash string, raw []byte) {
	var body signBody
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &body); err != nil {
			writeErrors(w, http.StatusBadRequest, "failed to parse JSON input: "+err.Error())
			return
		}
	}
	hashAlg := "sha2-256"
	switch {
	case urlHash != "":
		hashAlg = urlHash
	case body.HashAlgorithm != "":
		hashAlg = body.HashAlgorithm
	case body.Algorithm != "":
		hashAlg = body.Algorithm
	}
	if hashAlg != "sha2-256" {
		writeErrors(w, http.StatusBadRequest, fmt.Sprintf("unsupported hash algorithm %s", hashAlg))
		return
	}
	if ctl.SigningUnsupported || (ctl.KeyType != "" && ctl.KeyType != "ecdsa-p256") {
		writeErrors(w, http.StatusBadRequest, "key type does not support signing")
		return
	}
	if body.Input == nil {
		writeErrors(w, http.StatusBadRequest, "missing input for processing")
		return
	}
	input, err := base64.StdEncoding.DecodeString(*body.Input)
	if err != nil {
		writeErrors(w, http.StatusBadRequest, "unable to decode input as base64: "+err.Error())
		return
	}
	marshaling := body.MarshalingAlgorithm
	if marshaling == "" {
		marshaling = "asn1"
	}
	if marshaling != "asn1" && marshaling != "jws" {
		writeErrors(w, http.StatusBadRequest, fmt.Sprintf("invalid marshaling type %q", marshaling))
		return
	}

	s.mu.Lock()
	versions := append([]*ecdsa.PrivateKey(nil), s.versions...)
	s.mu.Unlock()
	ver := body.KeyVersion
	if ver == 0 {
		ver = len(versions)
	}
	switch {
	case ver < 0 || ver > len(versions):
		writeErrors(w, http.StatusBadRequest, "requested version for signing does not exist")
		return
	case ctl.MinEncryptionVersion > 0 && ver < ctl.MinEncryptionVersion:
		writeErrors(w, http.StatusBadRequest, "requested version for signing is less than the minimum encryption version")
		return
	}
	if ctl.SignWithVersion > 0 && ctl.SignWithVersion <= len(versions) {
		ver = ctl.SignWithVersion
	}
	digest := input
	if !body.Prehashed {
		sum := sha256.Sum256(input)
		digest = sum[:]
	}
	sig, err := signDigest(versions[ver-1], digest, marshaling)
	if err != nil {
		writeErrors(w, http.StatusInternalServerError, "failed to sign")
		return
	}
	if ctl.BadSignature {
		sig[len(sig)/2] ^= 0x5a
	}
	enc := base64.StdEncoding.EncodeToString(sig)
	if marshaling == "jws" {
		enc = base64.RawURLEncoding.EncodeToString(sig)
	}
	data := map[string]any{"key_version": ver, "signature": "vault:v" + strconv.Itoa(ver) + ":" + enc}
	resp := envelope(data)
	if ctl.OversizeResponse {
		resp["warnings"] = []string{strings.Repeat("w", 70<<10)}
	}
	writeJSON(w, http.StatusOK, resp)
}

func signDigest(k *ecdsa.PrivateKey, digest []byte, marshaling string) ([]byte, error) {
	if marshaling == "asn1" {
		return ecdsa.SignASN1(rand.Reader, k, digest)
	}
	r, s, err := ecdsa.Sign(rand.Reader, k, digest)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 64)
	r.FillBytes(out[:32])
	s.FillBytes(out[32:])
	return out, nil
}

func publicPEM(pub *ecdsa.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic(err) // a P-256 public key always marshals
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func envelope(data map[string]any) map[string]any {
	id := make([]byte, 16)
	rand.Read(id)
	return map[string]any{
		"request_id":     fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:]),
		"lease_id":       "",
		"renewable":      false,
		"lease_duration": 0,
		"data":           data,
		"wrap_info":      nil,
		"warnings":       nil,
		"auth":           nil,
		"mount_type":     "transit",
	}
}

func writeErrors(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"errors": []string{msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(raw, '\n'))
}
