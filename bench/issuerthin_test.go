package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/issuer/audit"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/issuer/keys"
	"github.com/registrum/registrum/issuer/signer"
)

// thinIssuer is the thinnest HTTP issuer of issue #31: a bare net/http
// server (httptest) whose one handler reads the form body, parses it with
// net/url, verifies the client assertion's ES256 signature with go-jose
// against the one client's public key (its algorithm chosen by
// issuer/keys, as the issuer chooses it) and reads its sub and exp, builds
// the token's claims from the claims of a token the issuer issued (fresh
// iat, nbf, exp and jti), signs them with the issuer's own local-jwk signer
// (issuer/signer), and appends the same audit entry (three keyed
// pseudonyms, token id, key id, expiry) to a chain of its own through
// issuer/audit, group-committed and durable before the answer, on the same
// filesystem as the issuer's chain.
//
// It has none of the issuer's layers: no router, no common headers, no
// content-type or size checks, no duplicate-member check of the assertion,
// no registry lookup, no audience, lifetime or time-claim checks beyond
// exp, no replay cache, no metrics, no log. Any issuer doing the work the
// specification requires adds at least this, so its rate bounds the
// issuer's from above at the same load.
type thinIssuer struct {
	clientID string
	key      *jose.JSONWebKey
	algs     []jose.SignatureAlgorithm
	signer   signer.Signer
	chain    *audit.Writer
	// chainPath is the chain's active segment.
	chainPath string
	// commits, grouped and commitTime count the chain's group commits, the
	// entries they made durable and the time they took.
	commits, grouped atomic.Int64
	commitTime       atomic.Int64
	// claims are the claims of a token the issuer issued, the template of
	// every token this one signs; lifetime is theirs (exp - iat).
	claims   map[string]any
	lifetime time.Duration
	// header is the token's encoded JWS header.
	header string
	// principal and authority stand for the client's values in its
	// pseudonyms (a pseudonym has one size whatever its input).
	principal, authority string
	srv                  *httptest.Server
}

// newThinIssuer serves the thinnest issuer of is's client clientID, whose
// public key is key, signing with s; sample is a token is issued to that
// client. Its audit chain lives under dir with is's chain settings.
func newThinIssuer(t *testing.T, is *issuertest.Issuer, clientID string, key *jose.JSONWebKey, s signer.Signer, sample, dir string) *thinIssuer {
	t.Helper()
	alg, err := keys.AlgorithmFor(key)
	if err != nil {
		t.Fatalf("thin issuer: the client's key: %v", err)
	}
	parts := strings.Split(sample, ".")
	if len(parts) != 3 {
		t.Fatalf("thin issuer: the sample token has %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("thin issuer: the sample token's claims: %v", err)
	}
	ti := &thinIssuer{clientID: clientID, key: key, algs: []jose.SignatureAlgorithm{jose.SignatureAlgorithm(alg)}, signer: s,
		header: parts[0], principal: "principal-of-" + clientID, authority: "authority-of-" + clientID}
	if err := json.Unmarshal(payload, &ti.claims); err != nil {
		t.Fatalf("thin issuer: the sample token's claims: %v", err)
	}
	iat, _ := ti.claims["iat"].(float64)
	exp, _ := ti.claims["exp"].(float64)
	ti.lifetime = time.Duration(exp-iat) * time.Second
	cfg := is.Config.Audit
	cfg.Path = filepath.Join(dir, "thin-audit", "audit.jsonl")
	cfg.OnCommit = func(entries int, took time.Duration) {
		ti.commits.Add(1)
		ti.grouped.Add(int64(entries))
		ti.commitTime.Add(int64(took))
	}
	ti.chainPath = cfg.Path
	if ti.chain, err = audit.Open(cfg); err != nil {
		t.Fatalf("thin issuer: open its audit chain: %v", err)
	}
	ti.srv = httptest.NewServer(ti)
	t.Cleanup(ti.close)
	return ti
}

// commitStats returns the number of group commits so far, the entries
// they made durable and the time they took in all.
func (ti *thinIssuer) commitStats() (commits, entries int64, took time.Duration) {
	return ti.commits.Load(), ti.grouped.Load(), time.Duration(ti.commitTime.Load())
}

// close stops the server and closes the chain.
func (ti *thinIssuer) close() {
	ti.srv.Close()
	ti.chain.Close()
}

// ServeHTTP answers one token request.
func (ti *thinIssuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := ti.issue(r)
	if err != nil {
		http.Error(w, `{"error":"invalid_client"}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// issue does the work of one token request and returns the response body.
func (ti *thinIssuer) issue(r *http.Request) ([]byte, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, fmt.Errorf("thin issuer: read the body: %w", err)
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		return nil, fmt.Errorf("thin issuer: parse the form: %w", err)
	}
	if form.Get("grant_type") != "client_credentials" || form.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
		return nil, fmt.Errorf("thin issuer: not a client_credentials request with a JWT assertion")
	}
	jws, err := jose.ParseSignedCompact(form.Get("client_assertion"), ti.algs)
	if err != nil {
		return nil, fmt.Errorf("thin issuer: parse the assertion: %w", err)
	}
	payload, err := jws.Verify(ti.key.Key)
	if err != nil {
		return nil, fmt.Errorf("thin issuer: verify the assertion: %w", err)
	}
	var claims struct {
		Sub string `json:"sub"`
		Exp int64  `json:"exp"`
	}
	now := time.Now()
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Sub != ti.clientID || claims.Exp <= now.Unix() {
		return nil, fmt.Errorf("thin issuer: the assertion's sub or exp")
	}
	var id [16]byte
	rand.Read(id[:])
	jti := base64.RawURLEncoding.EncodeToString(id[:])
	exp := now.Add(ti.lifetime)
	tc := maps.Clone(ti.claims)
	tc["iat"], tc["nbf"], tc["exp"], tc["jti"] = now.Unix(), now.Unix(), exp.Unix(), jti
	encoded, err := json.Marshal(tc)
	if err != nil {
		return nil, fmt.Errorf("thin issuer: encode the claims: %w", err)
	}
	input := ti.header + "." + base64.RawURLEncoding.EncodeToString(encoded)
	sig, err := ti.signer.Sign(r.Context(), []byte(input))
	if err != nil {
		return nil, fmt.Errorf("thin issuer: sign: %w", err)
	}
	if err := ti.chain.Append(context.WithoutCancel(r.Context()), audit.Entry{
		OperationID: audit.NewOperationID(),
		Outcome:     audit.OutcomeIssued,
		TokenID:     jti,
		KeyID:       ti.signer.KeyID(),
		ExpiresAt:   exp,
		Pseudonyms: map[string]string{
			audit.LabelClient:    ti.chain.Pseudonym(audit.LabelClient, ti.clientID),
			audit.LabelPrincipal: ti.chain.Pseudonym(audit.LabelPrincipal, ti.principal),
			audit.LabelAuthority: ti.chain.Pseudonym(audit.LabelAuthority, ti.authority),
		},
	}); err != nil {
		return nil, fmt.Errorf("thin issuer: audit: %w", err)
	}
	return json.Marshal(map[string]any{
		"access_token": input + "." + base64.RawURLEncoding.EncodeToString(sig),
		"token_type":   "Bearer",
		"expires_in":   int64(ti.lifetime / time.Second),
		"scope":        ti.claims["scope"],
	})
}
