package issuer

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/issuer/keys"
	"github.com/registrum/registrum/issuer/signer"
)

func TestIssueStandardToken(t *testing.T) {
	d := startDeployment(t, nil)
	body, header, claims := d.issue(DevStandardClientID, map[string]any{
		// Authority in the assertion must never reach the token.
		"scope": "admin", "purpose": "forged", "client_id": "someone-else", "aud_extra": "x",
	})
	if body["token_type"] != "Bearer" || body["expires_in"] != float64(900) || body["scope"] != "records:read records:write" {
		t.Fatalf("response %v", body)
	}
	if len(body) != 4 {
		t.Fatalf("response members %v", body)
	}
	if header["alg"] != "ES256" || header["typ"] != "at+jwt" || header["kid"] != d.cfg.Signing.Active.KeyID {
		t.Fatalf("header %v", header)
	}
	want := map[string]any{
		"iss": d.cfg.Issuer, "aud": "urn:registrum:dev", "client_id": DevStandardClientID,
		"sub": "service:" + DevStandardClientID, "scope": "records:read records:write", "purpose": "local-development",
	}
	for k, v := range want {
		if claims[k] != v {
			t.Errorf("claim %s = %v, want %v", k, claims[k], v)
		}
	}
	if _, ok := claims["aud_extra"]; ok {
		t.Error("assertion claim copied into token")
	}
	iat, exp := claims["iat"].(float64), claims["exp"].(float64)
	if claims["nbf"] != iat || exp-iat != 900 {
		t.Errorf("times iat=%v nbf=%v exp=%v", iat, claims["nbf"], exp)
	}
	if jti, _ := claims["jti"].(string); len(jti) < 16 {
		t.Errorf("jti %q", jti)
	}
	if len(claims) != 10 {
		t.Errorf("unexpected claims: %v", claims)
	}
	// The signature verifies with the published key.
	verifyWithJWKS(t, d, body["access_token"].(string))
}

func verifyWithJWKS(t *testing.T, d *deployment, tok string) {
	t.Helper()
	r := d.get(d.cfg.Signing.JWKSPath)
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(r.body, &set); err != nil {
		t.Fatal(err)
	}
	jws, err := jose.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	keys := set.Key(jws.Signatures[0].Header.KeyID)
	if len(keys) != 1 {
		t.Fatalf("kid %q not in key set", jws.Signatures[0].Header.KeyID)
	}
	if _, err := jws.Verify(keys[0].Key); err != nil {
		t.Fatalf("token does not verify against the key set: %v", err)
	}
	if len(jws.Signatures[0].Signature) != 64 {
		t.Fatalf("signature length %d", len(jws.Signatures[0].Signature))
	}
}

func TestIssueEvidenceToken(t *testing.T) {
	d := startDeployment(t, nil)
	body, _, claims := d.issue(DevEvidenceClientID, map[string]any{"requester_tags": []string{"forged"}})
	if _, ok := body["scope"]; ok {
		t.Fatalf("evidence response carries scope: %v", body)
	}
	if tags, _ := claims["requester_tags"].([]any); len(tags) != 1 || tags[0] != "dev" {
		t.Errorf("requester_tags %v", claims["requester_tags"])
	}
	for k, v := range map[string]any{"evidence_aud": "https://evidence.localhost", "grant_id": "grant-dev-1", "grant_authority": "registrum-dev", "sub": "service:" + DevEvidenceClientID} {
		if claims[k] != v {
			t.Errorf("claim %s = %v, want %v", k, claims[k], v)
		}
	}
	for _, k := range []string{"scope", "act", "subject"} {
		if _, ok := claims[k]; ok {
			t.Errorf("undelegated evidence token has %s", k)
		}
	}
	verifyWithJWKS(t, d, body["access_token"].(string))
}

func TestDelegatedToken(t *testing.T) {
	d := startDeployment(t, func(dir string) {
		p := filepath.Join(dir, "clients", DevEvidenceClientID+".yaml")
		raw, _ := os.ReadFile(p)
		s := strings.Replace(string(raw), "delegation:\n", "delegation:\n  actors: [\"clerk-7\", \"clerk-8\"]\n", 1)
		s = strings.Replace(s, "    id: \"subject.id\"\n", "    id: \"subject.id\"\n    minor: \"subject.minor\"\n", 1)
		os.WriteFile(p, []byte(s), 0o644)
	})
	obo := map[string]any{"actor": "clerk-7", "subject": map[string]any{"id": "person-42", "minor": true}}
	_, _, claims := d.issue(DevEvidenceClientID, map[string]any{"on_behalf_of": obo})
	if claims["act"] != "clerk-7" {
		t.Fatalf("actor claim %v", claims["act"])
	}
	subj, _ := claims["subject"].(map[string]any)
	if subj["id"] != "person-42" || subj["minor"] != true || len(subj) != 2 {
		t.Fatalf("subject claims %v", claims["subject"])
	}
	lines := d.auditLines()
	if !strings.Contains(lines[len(lines)-1], `"delegated":true`) {
		t.Fatalf("audit record not marked delegated: %s", lines[len(lines)-1])
	}
	for _, secret := range []string{"clerk-7", "person-42", DevEvidenceClientID} {
		if strings.Contains(strings.Join(lines, "\n"), secret) {
			t.Fatalf("audit chain holds the raw value %q", secret)
		}
	}

	refusals := map[string]any{
		"unknown actor":            map[string]any{"actor": "clerk-9", "subject": map[string]any{"id": "p", "minor": false}},
		"missing subject field":    map[string]any{"actor": "clerk-7", "subject": map[string]any{"id": "p"}},
		"unregistered field":       map[string]any{"actor": "clerk-7", "subject": map[string]any{"id": "p", "age": 3}},
		"extra member":             map[string]any{"actor": "clerk-7", "subject": map[string]any{"id": "p", "minor": false}, "x": 1},
		"object value":             map[string]any{"actor": "clerk-7", "subject": map[string]any{"id": map[string]any{}, "minor": false}},
		"fractional value":         map[string]any{"actor": "clerk-7", "subject": map[string]any{"id": 1.5, "minor": false}},
		"blank actor":              map[string]any{"actor": " ", "subject": map[string]any{"id": "p", "minor": false}},
		"not an object":            "clerk-7",
		"subject missing entirely": map[string]any{"actor": "clerk-7"},
	}
	for name, obo := range refusals {
		t.Run(name, func(t *testing.T) {
			jti := newTokenID()
			a := d.assertion(DevEvidenceClientID, d.keys[DevEvidenceClientID], map[string]any{"on_behalf_of": obo, "jti": jti})
			expectError(t, d.post(formBody(a)), http.StatusUnauthorized, ErrorInvalidClient)
			// A refused delegation does not spend the jti.
			d.issue(DevEvidenceClientID, map[string]any{"jti": jti})
		})
	}
	t.Run("client not registered for delegation", func(t *testing.T) {
		a := d.assertion(DevStandardClientID, d.keys[DevStandardClientID], map[string]any{"on_behalf_of": obo})
		expectError(t, d.post(formBody(a)), http.StatusUnauthorized, ErrorInvalidClient)
	})
}

func TestFormParsing(t *testing.T) {
	d := startDeployment(t, nil)
	good := d.assertion(DevStandardClientID, d.keys[DevStandardClientID], nil)
	cases := []struct {
		name   string
		ctype  string
		body   string
		status int
		code   string
	}{
		{"missing grant_type", "", "client_assertion_type=" + url.QueryEscape(jwtBearerAssertionType) + "&client_assertion=" + good, 400, ErrorInvalidRequest},
		{"other grant", "", "grant_type=password&client_assertion_type=" + url.QueryEscape(jwtBearerAssertionType) + "&client_assertion=" + good, 400, ErrorUnsupportedGrantType},
		{"empty grant", "", "grant_type=&client_assertion_type=" + url.QueryEscape(jwtBearerAssertionType) + "&client_assertion=" + good, 400, ErrorUnsupportedGrantType},
		{"repeated grant", "", formBody(good) + "&grant_type=client_credentials", 400, ErrorInvalidRequest},
		{"repeated assertion", "", formBody(good) + "&client_assertion=" + good, 400, ErrorInvalidRequest},
		{"repeated assertion type", "", formBody(good) + "&client_assertion_type=x", 400, ErrorInvalidRequest},
		{"missing assertion", "", "grant_type=client_credentials&client_assertion_type=" + url.QueryEscape(jwtBearerAssertionType), 400, ErrorInvalidRequest},
		{"missing assertion type", "", "grant_type=client_credentials&client_assertion=" + good, 400, ErrorInvalidRequest},
		{"missing fields beat wrong grant", "", "grant_type=password", 400, ErrorInvalidRequest},
		{"wrong assertion type", "", "grant_type=client_credentials&client_assertion_type=urn%3Aother&client_assertion=" + good, 400, ErrorInvalidRequest},
		{"json body", "application/json", `{"grant_type":"client_credentials"}`, 400, ErrorInvalidRequest},
		{"no content type", "-", formBody(good), 400, ErrorInvalidRequest},
		{"bad charset", "application/x-www-form-urlencoded; charset=latin1", formBody(good), 400, ErrorInvalidRequest},
		{"bad escape", "", "grant_type=%zz&" + formBody(good), 400, ErrorInvalidRequest},
		{"mismatching client_id", "", formBody(good) + "&client_id=demo-evidence", 401, ErrorInvalidClient},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ct := c.ctype
			switch ct {
			case "":
				ct = "application/x-www-form-urlencoded"
			case "-":
				ct = ""
			}
			expectError(t, d.postType(ct, c.body), c.status, c.code)
		})
	}
	// Unknown parameters are ignored, even repeated; charset=utf-8 and a
	// matching client_id are accepted.
	r := d.postType("application/x-www-form-urlencoded; charset=UTF-8", formBody(d.assertion(DevStandardClientID, d.keys[DevStandardClientID], nil))+"&x=1&x=2&client_id="+DevStandardClientID)
	if r.status != http.StatusOK {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	// Every decision above was audited: one record per request.
	if n := len(d.auditLines()); n != len(cases)+1 {
		t.Fatalf("%d audit records for %d decisions", n, len(cases)+1)
	}
	// Other paths and methods.
	expectError(t, d.get("/token"), 400, ErrorInvalidRequest)
	expectError(t, d.get("/nope"), 400, ErrorInvalidRequest)
}

func TestClientAuthenticationFailuresLookAlike(t *testing.T) {
	d := startDeployment(t, nil)
	key := d.keys[DevStandardClientID]
	other := d.keys[DevEvidenceClientID]
	stranger, _, _ := keys.Generate("ES256")
	now := time.Now()
	replayed := d.assertion(DevStandardClientID, key, nil)
	if r := d.post(formBody(replayed)); r.status != 200 {
		t.Fatalf("first use: %d %s", r.status, r.body)
	}
	maxLife := int64(d.cfg.ClientAssertion.MaximumLifetime / time.Second)
	cases := map[string]string{
		"replayed jti":           replayed,
		"unknown client":         d.assertion("nobody", stranger, nil),
		"bad signature":          d.assertion(DevStandardClientID, stranger, nil),
		"other client's key":     d.assertion(DevStandardClientID, other, nil),
		"expired":                d.assertion(DevStandardClientID, key, map[string]any{"iat": now.Add(-3 * time.Minute).Unix(), "exp": now.Add(-31 * time.Second).Unix()}),
		"issued in the future":   d.assertion(DevStandardClientID, key, map[string]any{"iat": now.Add(time.Minute).Unix(), "exp": now.Add(2 * time.Minute).Unix()}),
		"lifetime too long":      d.assertion(DevStandardClientID, key, map[string]any{"iat": now.Unix(), "exp": now.Unix() + maxLife + 1}),
		"exp before iat":         d.assertion(DevStandardClientID, key, map[string]any{"iat": now.Unix(), "exp": now.Unix() - 1}),
		"missing iat":            d.assertion(DevStandardClientID, key, map[string]any{"iat": nil}),
		"missing exp":            d.assertion(DevStandardClientID, key, map[string]any{"exp": nil}),
		"missing jti":            d.assertion(DevStandardClientID, key, map[string]any{"jti": nil}),
		"empty jti":              d.assertion(DevStandardClientID, key, map[string]any{"jti": ""}),
		"long jti":               d.assertion(DevStandardClientID, key, map[string]any{"jti": strings.Repeat("j", 257)}),
		"wrong aud":              d.assertion(DevStandardClientID, key, map[string]any{"aud": "https://elsewhere/token"}),
		"token URL as aud":       d.assertion(DevStandardClientID, key, map[string]any{"aud": d.setup.TokenURL}),
		"token URL in aud array": d.assertion(DevStandardClientID, key, map[string]any{"aud": []string{d.setup.TokenURL}}),
		"two audiences":          d.assertion(DevStandardClientID, key, map[string]any{"aud": []string{d.cfg.ClientAssertion.Audience, "x"}}),
		"sub differs":            d.assertion(DevStandardClientID, key, map[string]any{"sub": "someone"}),
		"missing sub":            d.assertion(DevStandardClientID, key, map[string]any{"sub": nil}),
		"iss of another client":  d.assertion(DevEvidenceClientID, key, map[string]any{"sub": DevEvidenceClientID}),
		"not yet valid":          d.assertion(DevStandardClientID, key, map[string]any{"nbf": now.Add(2 * time.Minute).Unix()}),
		"garbage":                "not.a.jws",
		"JSON serialization":     `{"payload":"e30","signatures":[{"protected":"eyJhbGciOiJFUzI1NiJ9","signature":"AAAA"}]}`,
		"alg none":               base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"demo-standard"}`)) + ".",
		"at+jwt typ":             signAssertion(t, key, map[string]any{"iss": DevStandardClientID, "sub": DevStandardClientID, "aud": d.cfg.ClientAssertion.Audience, "jti": "t1", "iat": now.Unix(), "exp": now.Unix() + 60}, map[jose.HeaderKey]any{"typ": "at+jwt"}),
	}
	var first response
	for name, a := range cases {
		r := d.post(formBody(a))
		expectError(t, r, http.StatusUnauthorized, ErrorInvalidClient)
		if first.header == nil {
			first = r
			continue
		}
		// Same headers (names and values) apart from the date.
		for k := range first.header {
			if k == "Date" {
				continue
			}
			if first.header.Get(k) != r.header.Get(k) {
				t.Errorf("%s: header %s = %q, differs from %q", name, k, r.header.Get(k), first.header.Get(k))
			}
		}
		if len(r.header) != len(first.header) {
			t.Errorf("%s: header set differs: %v vs %v", name, r.header, first.header)
		}
	}
	// Within the skew an assertion is still accepted; a fresh jti works.
	d.issue(DevStandardClientID, map[string]any{"iat": now.Add(-2 * time.Minute).Unix(), "exp": now.Add(-10 * time.Second).Unix()})
	d.issue(DevStandardClientID, map[string]any{"aud": []string{d.cfg.ClientAssertion.Audience}})
	d.issue(DevStandardClientID, map[string]any{"iat": now.Unix(), "exp": now.Unix() + maxLife})
}

func TestEveryAssertionAlgorithm(t *testing.T) {
	rs, rsPub, _ := keys.Generate("RS256")
	ed, edPub, _ := keys.Generate("EdDSA")
	d := startDeployment(t, func(dir string) {
		for id, pub := range map[string]*jose.JSONWebKey{"rs": rsPub, "ed": edPub} {
			raw, _ := pub.MarshalJSON()
			writeFile(t, filepath.Join(dir, "clients"), id+".yaml", "clientId: "+id+"\nprincipal: p-"+id+"\nauthorization:\n  scopes: [a]\nkeys:\n  - "+string(raw)+"\n", 0o644)
		}
	})
	d.keys["rs"], d.keys["ed"] = rs, ed
	for _, id := range []string{"rs", "ed", DevStandardClientID} {
		d.issue(id, nil)
	}
	// A key is used only with its own algorithm: an RS256 client cannot pass
	// with an EdDSA signature even if the header names its kid.
	a := signAssertion(t, ed, map[string]any{"iss": "rs", "sub": "rs", "aud": d.cfg.ClientAssertion.Audience, "jti": "x1", "iat": time.Now().Unix(), "exp": time.Now().Unix() + 60}, map[jose.HeaderKey]any{"kid": rs.KeyID})
	expectError(t, d.post(formBody(a)), http.StatusUnauthorized, ErrorInvalidClient)
}

func TestAssertionAlgorithmAllowlist(t *testing.T) {
	ed, edPub, _ := keys.Generate("EdDSA")
	d := startDeployment(t, func(dir string) {
		p := filepath.Join(dir, "issuer.yaml")
		raw, _ := os.ReadFile(p)
		os.WriteFile(p, []byte(strings.Replace(string(raw), "algorithms: [ES256, EdDSA, RS256]", "algorithms: [EdDSA]", 1)), 0o644)
		pub, _ := edPub.MarshalJSON()
		writeFile(t, filepath.Join(dir, "clients"), "ed.yaml", "clientId: ed\nprincipal: ed-principal\nauthorization:\n  scopes: [a]\nkeys:\n  - "+string(pub)+"\n", 0o644)
	})
	d.keys["ed"] = ed
	d.issue("ed", nil)
	// ES256 is not in the allowlist any more: the registered ES256 client is refused.
	a := d.assertion(DevStandardClientID, d.keys[DevStandardClientID], nil)
	expectError(t, d.post(formBody(a)), http.StatusUnauthorized, ErrorInvalidClient)
}

func TestReplayCacheFullRefuses(t *testing.T) {
	d := startDeployment(t, func(dir string) {
		p := filepath.Join(dir, "issuer.yaml")
		raw, _ := os.ReadFile(p)
		os.WriteFile(p, []byte(strings.Replace(string(raw), "clientAssertion:\n", "clientAssertion:\n  replayCacheEntries: 256\n", 1)), 0o644)
	})
	for range 256 {
		d.issue(DevStandardClientID, nil)
	}
	a := d.assertion(DevStandardClientID, d.keys[DevStandardClientID], nil)
	expectError(t, d.post(formBody(a)), http.StatusUnauthorized, ErrorInvalidClient)
}

func TestAuditFailureReleasesNothing(t *testing.T) {
	d := startDeployment(t, nil)
	d.issue(DevStandardClientID, nil)
	if r := d.get("/ready"); r.status != 200 {
		t.Fatalf("ready: %d", r.status)
	}
	// Make the chain unwritable under the running writer.
	if err := os.Chmod(d.cfg.Audit.Path, 0o400); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(d.cfg.Audit.Path)
	r := d.post(formBody(d.assertion(DevStandardClientID, d.keys[DevStandardClientID], nil)))
	expectError(t, r, http.StatusInternalServerError, ErrorServerError)
	if strings.Contains(string(r.body), "access_token") {
		t.Fatal("token released")
	}
	if r := d.get("/ready"); r.status != http.StatusServiceUnavailable || string(r.body) != `{"status":"not ready"}` {
		t.Fatalf("ready after audit failure: %d %s", r.status, r.body)
	}
	// Denials cannot be recorded either: they answer server_error too.
	expectError(t, d.post("grant_type=password"), http.StatusInternalServerError, ErrorServerError)
	after, _ := os.ReadFile(d.cfg.Audit.Path)
	if len(after) != len(before) {
		t.Fatal("chain changed after poisoning")
	}
}

func TestSignerFailureAndSelfTestRecovery(t *testing.T) {
	fs := &flakySigner{}
	d := startDeployment(t, nil, WithSelfTestInterval(50*time.Millisecond), WithSignerWrapper(fs))
	d.issue(DevStandardClientID, nil)
	fs.fail.Store(true)
	expectError(t, d.post(formBody(d.assertion(DevStandardClientID, d.keys[DevStandardClientID], nil))), 500, ErrorServerError)
	if r := d.get("/ready"); r.status != 503 {
		t.Fatalf("ready with failing signer: %d", r.status)
	}
	fs.fail.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if fs.selfTests.Load() > 0 && d.srv.Ready() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("periodic self-test did not make the issuer ready again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := d.get("/ready"); r.status != 200 || string(r.body) != `{"status":"ready"}` {
		t.Fatalf("ready after recovery: %d %s", r.status, r.body)
	}
	d.issue(DevStandardClientID, nil)
	// A failing periodic self-test alone (no traffic) also turns readiness off.
	fs.fail.Store(true)
	deadline = time.Now().Add(5 * time.Second)
	for d.srv.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("failing self-test did not make the issuer not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTokenLargestResponseProjection(t *testing.T) {
	setup, _ := newSetup(t)
	cfg, err := LoadConfig(setup.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := LoadRegistry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := reg.Client(DevStandardClientID)
	n, err := largestStandardResponse(cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	// The projection is an upper bound of a real response.
	d := startDeployment(t, nil)
	r := d.post(formBody(d.assertion(DevStandardClientID, d.keys[DevStandardClientID], nil)))
	if len(r.body) > n {
		t.Fatalf("real response %d bytes above projection %d", len(r.body), n)
	}
}

// flakySigner wraps the configured signer and fails on demand.
type flakySigner struct {
	signer.Signer
	fail      atomic.Bool
	selfTests atomic.Int64
}

func (f *flakySigner) Sign(ctx context.Context, in []byte) ([]byte, error) {
	if f.fail.Load() {
		return nil, errors.New("provider unavailable")
	}
	return f.Signer.Sign(ctx, in)
}

func (f *flakySigner) SelfTest(ctx context.Context) error {
	if f.fail.Load() {
		return errors.New("provider unavailable")
	}
	f.selfTests.Add(1)
	return f.Signer.SelfTest(ctx)
}

// WithSignerWrapper makes the server use f around the configured signer.
func WithSignerWrapper(f *flakySigner) Option {
	return func(o *options) {
		o.wrapSigner = func(s signer.Signer) signer.Signer { f.Signer = s; return f }
	}
}

func TestAuditRecordsAreValueFree(t *testing.T) {
	d := startDeployment(t, nil)
	var tokens []map[string]any
	for _, id := range []string{DevStandardClientID, DevStandardClientID, DevEvidenceClientID} {
		body, _, claims := d.issue(id, nil)
		claims["access_token"] = body["access_token"]
		tokens = append(tokens, claims)
	}
	expectError(t, d.post("grant_type=password"), 400, ErrorInvalidRequest)
	lines := d.auditLines()
	if len(lines) != 4 {
		t.Fatalf("%d records", len(lines))
	}
	type rec struct {
		Record struct {
			OperationID string            `json:"operationId"`
			Outcome     string            `json:"outcome"`
			Category    string            `json:"category"`
			TokenID     string            `json:"tokenId"`
			KeyID       string            `json:"keyId"`
			ExpiresAt   int64             `json:"expiresAt"`
			Pseudonyms  map[string]string `json:"pseudonyms"`
		} `json:"record"`
	}
	var recs []rec
	ops := map[string]bool{}
	for _, l := range lines {
		var r rec
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if ops[r.Record.OperationID] || len(r.Record.OperationID) < 16 {
			t.Fatalf("operation id %q missing or repeated", r.Record.OperationID)
		}
		ops[r.Record.OperationID] = true
		recs = append(recs, r)
	}
	for i, tok := range tokens {
		r := recs[i].Record
		if r.Outcome != "issued" || r.TokenID != tok["jti"] || r.KeyID != d.cfg.Signing.Active.KeyID || float64(r.ExpiresAt) != tok["exp"] {
			t.Fatalf("record %d %+v for token %v", i, r, tok)
		}
		for _, label := range []string{"client", "principal", "authority"} {
			if !strings.HasPrefix(r.Pseudonyms[label], "hmac-sha256:v1:") {
				t.Fatalf("record %d pseudonym %s = %q", i, label, r.Pseudonyms[label])
			}
		}
	}
	// Same client, same pseudonyms (correlation); another client, different ones.
	if recs[0].Record.Pseudonyms["client"] != recs[1].Record.Pseudonyms["client"] || recs[0].Record.Pseudonyms["client"] == recs[2].Record.Pseudonyms["client"] {
		t.Fatal("client pseudonyms do not correlate")
	}
	if r := recs[3].Record; r.Outcome != "denied" || r.Category != ErrorInvalidRequest || r.TokenID != "" || len(r.Pseudonyms) != 0 {
		t.Fatalf("denial record %+v", r)
	}
	all := strings.Join(lines, "\n")
	raws := []string{DevStandardClientID, DevEvidenceClientID, "service:demo", "records:read", "local-development", "grant-dev-1"}
	for _, tok := range tokens {
		parts := strings.Split(tok["access_token"].(string), ".")
		raws = append(raws, parts[1], parts[2])
	}
	for _, raw := range raws {
		if strings.Contains(all, raw) {
			t.Fatalf("audit chain holds the raw value %q", raw)
		}
	}
}
