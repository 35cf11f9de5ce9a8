package verifier

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"testing"
	"testing/iotest"
)

// FuzzParseAnswer: a scanner answer is accepted only when it is one JSON
// object whose only member is "verdict" with the value approved or rejected.
func FuzzParseAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"verdict":"approved"}`, `{"verdict":"rejected"}`, ` {"verdict" : "approved"} `,
		`{"verdict":"approved","x":1}`, `{"verdict":"approved","verdict":"rejected"}`,
		`{"verdict":"retry"}`, `{"Verdict":"approved"}`, `{"verdict":"appr\u006fved"}`,
		`{"verdict":"approved"}{}`, `[]`, `null`, ``, `{"verdict":null}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := parseAnswer(b)
		if !ok {
			return
		}
		if len(b) > MaxAnswerBytes {
			t.Fatalf("accepted %d bytes", len(b))
		}
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("accepted non-object %q: %v", b, err)
		}
		if _, err := dec.Token(); err != io.EOF {
			t.Fatalf("accepted trailing data in %q", b)
		}
		if len(m) != 1 || m["verdict"] != string(got) || (got != Approved && got != Rejected) {
			t.Fatalf("accepted %q as %q", b, got)
		}
	})
}

// FuzzExactReader: the reader ends with io.EOF exactly when the source holds
// the declared bytes and nothing more, and passes through only those bytes.
func FuzzExactReader(f *testing.F) {
	f.Add([]byte("hello world"), []byte("hello world"), false)
	f.Add([]byte("hello world"), []byte("hello world!"), true)
	f.Add([]byte("hello world"), []byte("hello"), false)
	f.Add([]byte("hello world"), []byte("hello World"), true)
	f.Fuzz(func(t *testing.T, declared, source []byte, oneByte bool) {
		if len(declared) == 0 {
			return
		}
		sum := sha256.Sum256(declared)
		att := Attachment{SlotID: "s", MediaType: "a/b", DeclaredSize: int64(len(declared)), SHA256: hex.EncodeToString(sum[:])}
		var src io.Reader = bytes.NewReader(source)
		if oneByte {
			src = iotest.OneByteReader(src)
		}
		r := newExactReader(src, att)
		got, err := io.ReadAll(r)
		exact := bytes.Equal(declared, source)
		if exact != (err == nil) || exact != r.verified() {
			t.Fatalf("declared %q, source %q: err %v, verified %v", declared, source, err, r.verified())
		}
		if int64(len(got)) > att.DeclaredSize {
			t.Fatalf("passed %d bytes for %d declared", len(got), att.DeclaredSize)
		}
		if !exact && r.cause() == "" {
			t.Fatal("mismatch without a cause")
		}
	})
}
