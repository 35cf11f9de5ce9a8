package signer

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejson "github.com/go-jose/go-jose/v4/json"
)

// Bounds of the transit signer's settings.
const (
	// MaxUnixSocketPath is the longest socket path a unix socket address can hold.
	MaxUnixSocketPath = 107
	// MaxTransitNameBytes bounds Mount and KeyName.
	MaxTransitNameBytes = 128
	// MinTransitTimeout and MaxTransitTimeout bound the per-request timeout.
	MinTransitTimeout = time.Millisecond
	MaxTransitTimeout = 30 * time.Second
	// DefaultTransitTimeout is the per-request timeout when the configuration
	// leaves timeoutMilliseconds out.
	DefaultTransitTimeout = 5 * time.Second
	// MaxTransitTokenBytes bounds the optional provider token.
	MaxTransitTokenBytes = 4096
	// MaxTransitResponseBytes bounds a provider response body.
	MaxTransitResponseBytes = 64 << 10
)

// transitName is the grammar of Mount and KeyName: one path segment.
var transitName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// Errors of the transit signer. Each failure of [Signer.SelfTest] wraps
// exactly one of them, so callers and operators can tell them apart with
// errors.Is; none carries provider response bodies or secrets.
var (
	// ErrTransitUnavailable: the provider could not be reached, timed out, or
	// answered with a server error (5xx, e.g. a sealed Vault).
	ErrTransitUnavailable = errors.New("signer: transit provider unavailable")
	// ErrTransitRefused: the provider refused the request (4xx other than 404).
	ErrTransitRefused = errors.New("signer: transit provider refused the request")
	// ErrTransitKeyNotFound: the mount or key does not exist (404).
	ErrTransitKeyNotFound = errors.New("signer: transit key not found")
	// ErrTransitResponse: the provider's answer is malformed or too large.
	ErrTransitResponse = errors.New("signer: malformed transit response")
	// ErrTransitKeyType: the key is not an ecdsa-p256 signing key.
	ErrTransitKeyType = errors.New("signer: transit key is not an ecdsa-p256 signing key")
	// ErrTransitExportable: the key can be exported.
	ErrTransitExportable = errors.New("signer: transit key is exportable")
	// ErrTransitPlaintextBackup: the key allows plaintext backup.
	ErrTransitPlaintextBackup = errors.New("signer: transit key allows plaintext backup")
	// ErrTransitDeletionAllowed: the key can be deleted.
	ErrTransitDeletionAllowed = errors.New("signer: transit key allows deletion")
	// ErrTransitDerived: the key uses key derivation.
	ErrTransitDerived = errors.New("signer: transit key is derived")
	// ErrTransitKeyVersion: the pinned key version is missing or outside
	// min_encryption_version..latest_version, or a signature came from
	// another version.
	ErrTransitKeyVersion = errors.New("signer: transit key version is not usable")
	// ErrTransitPublicKey: the provider's public key of the pinned version is
	// not the active public JWK.
	ErrTransitPublicKey = errors.New("signer: transit public key does not equal the active public JWK")
)

// TransitConfig configures the transit signer. The YAML mapping and bounds
// are documented in docs/issuer-signers.md.
type TransitConfig struct {
	// UnixSocketPath is the absolute path of the workload-local proxy's unix
	// socket (at most 107 bytes).
	UnixSocketPath string
	// Mount is the Transit mount, one segment of 1 to 128 bytes of A-Z a-z 0-9 _ -.
	Mount string
	// KeyName is the Transit key name, same grammar as Mount.
	KeyName string
	// KeyVersion is the pinned key version, 1 to 2147483647 (0, the
	// provider's "latest", is refused so key bytes cannot change under a kid).
	KeyVersion int
	// Timeout bounds each request to the provider, 1ms to 30s.
	Timeout time.Duration
	// Token is the optional Vault/OpenBao token sent as X-Vault-Token (from a
	// secret; trailing white space is ignored). Leave it empty when the local
	// proxy injects authentication.
	Token []byte
	// Active is the configured active public JWK (EC P-256).
	Active *jose.JSONWebKey
}

// Validate checks the configuration's bounds without contacting the provider.
func (c TransitConfig) Validate() error {
	switch {
	case c.UnixSocketPath == "":
		return errors.New("signer: transit: unixSocketPath is required")
	case !filepath.IsAbs(c.UnixSocketPath):
		return fmt.Errorf("signer: transit: unixSocketPath %q must be absolute", c.UnixSocketPath)
	case len(c.UnixSocketPath) > MaxUnixSocketPath:
		return fmt.Errorf("signer: transit: unixSocketPath is %d bytes, at most %d fit a unix socket address", len(c.UnixSocketPath), MaxUnixSocketPath)
	case !transitName.MatchString(c.Mount):
		return fmt.Errorf("signer: transit: mount %q must be 1 to %d bytes of A-Z a-z 0-9 _ -", c.Mount, MaxTransitNameBytes)
	case !transitName.MatchString(c.KeyName):
		return fmt.Errorf("signer: transit: keyName %q must be 1 to %d bytes of A-Z a-z 0-9 _ -", c.KeyName, MaxTransitNameBytes)
	case c.KeyVersion < 1 || c.KeyVersion > math.MaxInt32:
		return fmt.Errorf("signer: transit: keyVersion %d must be between 1 and %d (pinned, never 0)", c.KeyVersion, math.MaxInt32)
	case c.Timeout < MinTransitTimeout || c.Timeout > MaxTransitTimeout:
		return fmt.Errorf("signer: transit: timeout %s must be between %s and %s", c.Timeout, MinTransitTimeout, MaxTransitTimeout)
	}
	if tok := bytes.TrimRight(c.Token, " \t\r\n"); len(c.Token) > 0 {
		if len(tok) == 0 || len(tok) > MaxTransitTokenBytes {
			return fmt.Errorf("signer: transit: the token must be 1 to %d bytes", MaxTransitTokenBytes)
		}
		for _, b := range tok {
			if b < 0x21 || b > 0x7e {
				return errors.New("signer: transit: the token must be printable ASCII without spaces")
			}
		}
	}
	_, err := activeP256(c.Active)
	return err
}

// transit signs through a Vault or OpenBao Transit key.
type transit struct {
	cfg     TransitConfig
	pub     *ecdsa.PublicKey
	token   string
	client  *http.Client
	keyURL  string
	signURL string
	prefix  string // "vault:v<N>:"
	closed  atomic.Bool
}

// NewTransit builds the transit signer. It checks the configuration but does
// not contact the provider: call [Signer.SelfTest] before admitting traffic.
func NewTransit(cfg TransitConfig) (Signer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pub, _ := activeP256(cfg.Active)
	socket := cfg.UnixSocketPath
	dialer := &net.Dialer{}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:          4,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: cfg.Timeout,
		DisableCompression:    true,
	}
	t := &transit{
		cfg:     cfg,
		pub:     pub,
		token:   string(bytes.TrimRight(cfg.Token, " \t\r\n")),
		client:  &http.Client{Transport: tr, Timeout: cfg.Timeout, CheckRedirect: noRedirect},
		keyURL:  "http://localhost/v1/" + cfg.Mount + "/keys/" + cfg.KeyName,
		signURL: "http://localhost/v1/" + cfg.Mount + "/sign/" + cfg.KeyName + "/sha2-256",
		prefix:  "vault:v" + strconv.Itoa(cfg.KeyVersion) + ":",
	}
	return t, nil
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (t *transit) KeyID() string { return t.cfg.Active.KeyID }

// signRequest is the body of POST /v1/<mount>/sign/<name>/sha2-256.
type signRequest struct {
	Input               string `json:"input"`
	KeyVersion          int    `json:"key_version"`
	Prehashed           bool   `json:"prehashed"`
	MarshalingAlgorithm string `json:"marshaling_algorithm"`
}

type signResponse struct {
	Data *struct {
		Signature  string `json:"signature"`
		KeyVersion *int   `json:"key_version"`
	} `json:"data"`
}

func (t *transit) Sign(ctx context.Context, signingInput []byte) ([]byte, error) {
	if t.closed.Load() {
		return nil, errors.New("signer: transit: signer is closed")
	}
	if err := checkInput(signingInput); err != nil {
		return nil, err
	}
	digest := sha256.Sum256(signingInput)
	body, err := json.Marshal(signRequest{
		Input:               base64.StdEncoding.EncodeToString(digest[:]),
		KeyVersion:          t.cfg.KeyVersion,
		Prehashed:           true,
		MarshalingAlgorithm: "jws",
	})
	if err != nil {
		return nil, fmt.Errorf("signer: transit sign: %w", err)
	}
	var resp signResponse
	if err := t.do(ctx, http.MethodPost, t.signURL, body, &resp); err != nil {
		return nil, fmt.Errorf("signer: transit sign: %w", err)
	}
	if resp.Data == nil || resp.Data.Signature == "" {
		return nil, fmt.Errorf("signer: transit sign: %w: no data.signature", ErrTransitResponse)
	}
	encoded, ok := strings.CutPrefix(resp.Data.Signature, t.prefix)
	if !ok {
		return nil, fmt.Errorf("signer: transit sign: %w: the signature is not from the pinned version %d", ErrTransitKeyVersion, t.cfg.KeyVersion)
	}
	if resp.Data.KeyVersion != nil && *resp.Data.KeyVersion != t.cfg.KeyVersion {
		return nil, fmt.Errorf("signer: transit sign: %w: data.key_version is %d, pinned %d", ErrTransitKeyVersion, *resp.Data.KeyVersion, t.cfg.KeyVersion)
	}
	sig, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("signer: transit sign: %w: the signature is not unpadded base64url (jws marshaling)", ErrTransitResponse)
	}
	if err := verifyP256(t.pub, signingInput, sig); err != nil {
		return nil, fmt.Errorf("signer: transit sign: %w", err)
	}
	return sig, nil
}

// keyResponse is the part of GET /v1/<mount>/keys/<name> the self-test reads.
type keyResponse struct {
	Data *struct {
		Type                 string `json:"type"`
		Derived              *bool  `json:"derived"`
		Exportable           *bool  `json:"exportable"`
		AllowPlaintextBackup *bool  `json:"allow_plaintext_backup"`
		DeletionAllowed      *bool  `json:"deletion_allowed"`
		SupportsSigning      *bool  `json:"supports_signing"`
		LatestVersion        *int   `json:"latest_version"`
		MinEncryptionVersion *int   `json:"min_encryption_version"`
		Keys                 map[string]struct {
			PublicKey string `json:"public_key"`
		} `json:"keys"`
	} `json:"data"`
}

// SelfTest reads the key and checks, in order: the key type (ecdsa-p256, able
// to sign), the custody controls (not derived, not exportable, no plaintext
// backup, deletion not allowed), the pinned version (present, within
// min_encryption_version..latest_version), that version's public key against
// the active JWK, and finally that a test signature verifies.
func (t *transit) SelfTest(ctx context.Context) error {
	if err := t.checkKey(ctx); err != nil {
		return fmt.Errorf("signer: transit self-test: %w", err)
	}
	if _, err := t.Sign(ctx, selfTestInput); err != nil {
		return fmt.Errorf("signer: transit self-test: %w", err)
	}
	return nil
}

func (t *transit) checkKey(ctx context.Context) error {
	var resp keyResponse
	if err := t.do(ctx, http.MethodGet, t.keyURL, nil, &resp); err != nil {
		return fmt.Errorf("read key: %w", err)
	}
	d := resp.Data
	if d == nil {
		return fmt.Errorf("read key: %w: no data member", ErrTransitResponse)
	}
	if d.Type != "ecdsa-p256" {
		return fmt.Errorf("%w: type is %q", ErrTransitKeyType, d.Type)
	}
	if d.SupportsSigning != nil && !*d.SupportsSigning {
		return fmt.Errorf("%w: supports_signing is false", ErrTransitKeyType)
	}
	controls := []struct {
		name string
		val  *bool
		err  error
	}{
		{"derived", d.Derived, ErrTransitDerived},
		{"exportable", d.Exportable, ErrTransitExportable},
		{"allow_plaintext_backup", d.AllowPlaintextBackup, ErrTransitPlaintextBackup},
		{"deletion_allowed", d.DeletionAllowed, ErrTransitDeletionAllowed},
	}
	for _, c := range controls {
		if c.val == nil {
			return fmt.Errorf("%w: the key does not report %s", c.err, c.name)
		}
		if *c.val {
			return fmt.Errorf("%w (%s is true)", c.err, c.name)
		}
	}
	v := t.cfg.KeyVersion
	if d.LatestVersion == nil || v > *d.LatestVersion {
		return fmt.Errorf("%w: pinned version %d is above latest_version", ErrTransitKeyVersion, v)
	}
	if d.MinEncryptionVersion != nil && v < *d.MinEncryptionVersion {
		return fmt.Errorf("%w: pinned version %d is below min_encryption_version %d", ErrTransitKeyVersion, v, *d.MinEncryptionVersion)
	}
	entry, ok := d.Keys[strconv.Itoa(v)]
	if !ok {
		return fmt.Errorf("%w: pinned version %d is not in the key's versions", ErrTransitKeyVersion, v)
	}
	block, _ := pem.Decode([]byte(entry.PublicKey))
	if block == nil || block.Type != "PUBLIC KEY" {
		return fmt.Errorf("%w: version %d has no PEM public key", ErrTransitResponse, v)
	}
	parsed, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return fmt.Errorf("%w: version %d public key does not parse", ErrTransitResponse, v)
	}
	got, ok := parsed.(*ecdsa.PublicKey)
	if !ok || !got.Equal(t.pub) {
		return fmt.Errorf("%w: version %d, active kid %q", ErrTransitPublicKey, v, t.cfg.Active.KeyID)
	}
	return nil
}

// do sends one request and decodes a 2xx JSON answer into out. Non-2xx
// answers become errors carrying only the status; provider bodies are never
// echoed.
func (t *transit) do(ctx context.Context, method, url string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("X-Vault-Request", "true")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if t.token != "" {
		req.Header.Set("X-Vault-Token", t.token)
	}
	res, err := t.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrTransitUnavailable, transportReason(ctx, err))
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, MaxTransitResponseBytes+1))
	if err != nil {
		return fmt.Errorf("%w: reading the response: %s", ErrTransitUnavailable, transportReason(ctx, err))
	}
	switch {
	case res.StatusCode >= 500:
		return fmt.Errorf("%w: HTTP %d", ErrTransitUnavailable, res.StatusCode)
	case res.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: HTTP 404 for mount %q key %q", ErrTransitKeyNotFound, t.cfg.Mount, t.cfg.KeyName)
	case res.StatusCode < 200 || res.StatusCode > 299:
		return fmt.Errorf("%w: HTTP %d", ErrTransitRefused, res.StatusCode)
	}
	if len(raw) > MaxTransitResponseBytes {
		return fmt.Errorf("%w: the response exceeds %d bytes", ErrTransitResponse, MaxTransitResponseBytes)
	}
	if err := josejson.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%w: %s", ErrTransitResponse, jsonReason(err))
	}
	return nil
}

// transportReason names why a request failed without quoting anything the
// provider sent.
func transportReason(ctx context.Context, err error) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "timed out"
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return "cannot connect to the socket: " + oe.Err.Error()
	}
	return "connection failed"
}

// jsonReason reports a decoding failure by kind; the message of go-jose's
// JSON decoder can quote member names but never values.
func jsonReason(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "duplicate key") {
		return "duplicate member in the JSON body"
	}
	return "the body is not the expected JSON"
}

func (t *transit) Close() error {
	t.closed.Store(true)
	t.client.CloseIdleConnections()
	return nil
}
