package audit

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var testKey = bytes.Repeat([]byte("k"), 32)

// testConfig returns a config for a chain in a fresh owner-only folder.
func testConfig(t testing.TB, max int64) Config {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "audit")
	return Config{Path: filepath.Join(dir, "chain.jsonl"), MaximumFileBytes: max, HashKey: testKey, HashKeyVersion: 3}
}

func mustOpen(t testing.TB, cfg Config) *Writer {
	t.Helper()
	w, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func issued(w *Writer, n int) Entry {
	return Entry{
		OperationID: NewOperationID(),
		Outcome:     OutcomeIssued,
		TokenID:     "tok-" + NewOperationID(),
		KeyID:       "kid-abc",
		ExpiresAt:   time.Unix(1_900_000_000+int64(n), 0),
		Pseudonyms:  map[string]string{LabelClient: w.Pseudonym(LabelClient, "client-x")},
	}
}

func denied() Entry {
	return Entry{OperationID: NewOperationID(), Outcome: OutcomeDenied, Category: "invalid_client"}
}

func appendN(t testing.TB, w *Writer, n int) {
	t.Helper()
	for i := range n {
		e := issued(w, i)
		if i%3 == 2 {
			e = denied()
		}
		if err := w.Append(context.Background(), e); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
	}
}

func verifyOK(t testing.TB, cfg Config) *Report {
	t.Helper()
	rep, err := Verify(cfg)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !rep.OK() {
		var b bytes.Buffer
		rep.WriteTo(&b)
		t.Fatalf("Verify not OK:\n%s", b.String())
	}
	return rep
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
