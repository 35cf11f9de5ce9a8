package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestConfigRejected(t *testing.T) {
	good := testConfig(t, 1<<20)
	cases := map[string]struct {
		mut  func(*Config)
		want string
	}{
		"empty path":       {func(c *Config) { c.Path = "" }, "path is empty"},
		"zero max":         {func(c *Config) { c.MaximumFileBytes = 0 }, "maximumFileBytes must be positive"},
		"short key":        {func(c *Config) { c.HashKey = c.HashKey[:31] }, "hash key is 31 bytes, at least 32"},
		"zero key version": {func(c *Config) { c.HashKeyVersion = 0 }, "hashKeyVersion must be nonzero"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := good
			tc.mut(&cfg)
			if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open error = %v, want %q", err, tc.want)
			}
			if _, err := Verify(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify error = %v, want %q", err, tc.want)
			}
		})
	}
	// Exactly 32 bytes is enough.
	cfg := good
	cfg.HashKey = bytes.Repeat([]byte{7}, 32)
	mustOpen(t, cfg)
}

func TestEntryShapeRefusedWithoutWriting(t *testing.T) {
	cfg := testConfig(t, 1<<20)
	w := mustOpen(t, cfg)
	good := issued(w, 0)
	otherVersion := (keys{pseudonym: w.keys.pseudonym, version: 4}).pseudonymOf(LabelClient, "client-x")
	cases := map[string]struct {
		e    Entry
		want string
	}{
		"no outcome":                {Entry{OperationID: "op1"}, "outcome must be"},
		"unknown outcome":           {Entry{OperationID: "op1", Outcome: "maybe"}, "outcome must be"},
		"empty operation id":        {Entry{Outcome: OutcomeDenied, Category: "invalid_client"}, "operation id must be 1 to 128"},
		"long operation id":         {Entry{OperationID: strings.Repeat("a", 129), Outcome: OutcomeDenied, Category: "x"}, "operation id must be 1 to 128"},
		"operation id with space":   {Entry{OperationID: "a b", Outcome: OutcomeDenied, Category: "x"}, "operation id may hold only"},
		"denial without category":   {Entry{OperationID: "op1", Outcome: OutcomeDenied}, "denial category"},
		"denial category uppercase": {Entry{OperationID: "op1", Outcome: OutcomeDenied, Category: "Invalid"}, "denial category"},
		"denial category too long":  {Entry{OperationID: "op1", Outcome: OutcomeDenied, Category: strings.Repeat("a", 65)}, "denial category"},
		"denial with token id":      {Entry{OperationID: "op1", Outcome: OutcomeDenied, Category: "invalid_client", TokenID: "t"}, "a denial carries only its category"},
		"denial with pseudonyms":    {Entry{OperationID: "op1", Outcome: OutcomeDenied, Category: "invalid_client", Pseudonyms: good.Pseudonyms}, "a denial carries only its category"},
		"issued with category":      {func() Entry { e := good; e.Category = "x"; return e }(), "an issued entry has no category"},
		"issued without token id":   {func() Entry { e := good; e.TokenID = ""; return e }(), "token id must be"},
		"issued without key id":     {func() Entry { e := good; e.KeyID = ""; return e }(), "key id must be"},
		"issued without expiry":     {func() Entry { e := good; e.ExpiresAt = time.Time{}; return e }(), "needs an expiry"},
		"issued without pseudonym":  {func() Entry { e := good; e.Pseudonyms = nil; return e }(), "needs at least the \"client\" pseudonym"},
		"unknown label": {func() Entry {
			e := good
			e.Pseudonyms = map[string]string{"email": good.Pseudonyms[LabelClient]}
			return e
		}(), "label \"email\""},
		"raw value as pseudonym": {func() Entry {
			e := good
			e.Pseudonyms = map[string]string{LabelClient: "raw-client-secret-id"}
			return e
		}(), "pseudonyms[\"client\"] is not a pseudonym of hash key version 3"},
		"other key version": {func() Entry { e := good; e.Pseudonyms = map[string]string{LabelClient: otherVersion}; return e }(), "not a pseudonym of hash key version 3"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := w.Append(context.Background(), tc.e)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Append error = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "raw-client-secret-id") {
				t.Fatalf("error echoes the refused value: %v", err)
			}
		})
	}
	if w.Err() != nil {
		t.Fatalf("refused entries poisoned the writer: %v", w.Err())
	}
	if fi, _ := os.Stat(cfg.Path); fi.Size() != 0 {
		t.Fatalf("refused entries wrote %d bytes", fi.Size())
	}
	if err := w.Append(context.Background(), good); err != nil {
		t.Fatalf("valid entry after refusals: %v", err)
	}
}

func TestPseudonym(t *testing.T) {
	cfg := testConfig(t, 1<<20)
	w := mustOpen(t, cfg)
	p := w.Pseudonym(LabelClient, "client-a")
	if !isPseudonym(p, "hmac-sha256:v3:") {
		t.Fatalf("pseudonym %q lacks the version label or 64 hex digits", p)
	}
	if p != w.Pseudonym(LabelClient, "client-a") {
		t.Fatal("pseudonym is not deterministic")
	}
	for _, other := range []string{
		w.Pseudonym(LabelClient, "client-b"),
		w.Pseudonym(LabelPrincipal, "client-a"),
		w.Pseudonym("clien", "tclient-a"), // the length prefixes keep label and value apart
	} {
		if other == p {
			t.Fatalf("distinct inputs share pseudonym %q", p)
		}
	}
	// Another hash key (or version) gives another pseudonym.
	cfg2 := testConfig(t, 1<<20)
	cfg2.HashKey = bytes.Repeat([]byte("z"), 32)
	w2 := mustOpen(t, cfg2)
	if w2.Pseudonym(LabelClient, "client-a") == p {
		t.Fatal("pseudonym does not depend on the hash key")
	}
}

func TestNewOperationID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewOperationID()
		if !isLowerHex(id, 32) || seen[id] {
			t.Fatalf("operation id %q malformed or repeated", id)
		}
		seen[id] = true
	}
}

// TestChainIsValueFree appends realistic decisions and proves the chain file
// holds none of the raw values, and that each record holds what the spec asks.
func TestChainIsValueFree(t *testing.T) {
	cfg := testConfig(t, 1<<20)
	w := mustOpen(t, cfg)
	raw := map[string]string{
		"client id": "svc-payroll-exporter",
		"principal": "urn:example:principal:4711",
		"assertion": "eyJhbGciOiJFUzI1NiIsImtpZCI6ImsxIn0.eyJpc3MiOiJzdmMtcGF5cm9sbC1leHBvcnRlciJ9.c2lnbmF0dXJlLWJ5dGVz",
		"token":     "eyJ0eXAiOiJhdCtqd3QiLCJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1cm46ZXhhbXBsZTpwcmluY2lwYWw6NDcxMSJ9.dG9rZW4tc2lnbmF0dXJl",
		"actor":     "caseworker-0042",
		"subject":   `{"person":"NL-123456789"}`,
		"authority": `{"principal":"urn:example:principal:4711","scopes":["records.read"]}`,
	}
	exp := time.Unix(1_900_000_300, 0)
	e := Entry{
		OperationID: NewOperationID(),
		Outcome:     OutcomeIssued,
		TokenID:     "jti-5f1c0e2a",
		KeyID:       "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs",
		ExpiresAt:   exp,
		Delegated:   true,
		Pseudonyms: map[string]string{
			LabelClient:    w.Pseudonym(LabelClient, raw["client id"]),
			LabelPrincipal: w.Pseudonym(LabelPrincipal, raw["principal"]),
			LabelAuthority: w.Pseudonym(LabelAuthority, raw["authority"]),
			LabelActor:     w.Pseudonym(LabelActor, raw["actor"]),
			LabelSubject:   w.Pseudonym(LabelSubject, raw["subject"]),
		},
	}
	if err := w.Append(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	den := Entry{OperationID: NewOperationID(), Outcome: OutcomeDenied, Category: "invalid_client"}
	if err := w.Append(context.Background(), den); err != nil {
		t.Fatal(err)
	}
	w.Close()
	chain := readFile(t, cfg.Path)
	for what, v := range raw {
		for _, form := range []string{v, strings.ToLower(v), string(mustJSON(t, v))} {
			if bytes.Contains(bytes.ToLower(chain), []byte(strings.ToLower(form))) {
				t.Errorf("chain holds the raw %s", what)
			}
		}
	}
	if bytes.Contains(chain, testKey) {
		t.Error("chain holds the hash key")
	}
	lines := bytes.Split(bytes.TrimSuffix(chain, []byte("\n")), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2", len(lines))
	}
	var rel, dn struct {
		Record map[string]any `json:"record"`
	}
	if err := json.Unmarshal(lines[0], &rel); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(lines[1], &dn); err != nil {
		t.Fatal(err)
	}
	r := rel.Record
	if r["operationId"] != e.OperationID || r["outcome"] != "issued" || r["tokenId"] != e.TokenID ||
		r["keyId"] != e.KeyID || r["expiresAt"] != float64(exp.Unix()) || r["delegated"] != true {
		t.Errorf("release record misses a required member: %v", r)
	}
	ps := r["pseudonyms"].(map[string]any)
	if len(ps) != 5 {
		t.Errorf("pseudonyms = %v", ps)
	}
	for label, p := range ps {
		if p != e.Pseudonyms[label] || !strings.HasPrefix(p.(string), "hmac-sha256:v3:") {
			t.Errorf("pseudonym %s = %v, not labelled with hash key version 3", label, p)
		}
	}
	if len(dn.Record) != 3 || dn.Record["operationId"] != den.OperationID || dn.Record["outcome"] != "denied" || dn.Record["category"] != "invalid_client" {
		t.Errorf("denial record = %v, want only operationId, outcome and category", dn.Record)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAppendAfterCloseAndCancelled(t *testing.T) {
	cfg := testConfig(t, 1<<20)
	w := mustOpen(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Append(ctx, denied()); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Append = %v", err)
	}
	if fi, _ := os.Stat(cfg.Path); fi.Size() != 0 {
		t.Fatal("cancelled Append wrote")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := w.Append(context.Background(), denied()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v", err)
	}
}
