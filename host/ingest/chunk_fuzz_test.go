package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/strictjson"
)

// FuzzChunkBody feeds arbitrary bytes to the chunk body parser: it never
// panics, refuses only with 400 request.invalid, and an accepted chunk's
// canonical body is the RFC 8785 form of {"items": items}, stable under a
// second canonicalisation, with the digest the server compares.
func FuzzChunkBody(f *testing.F) {
	for _, seed := range []string{
		`{"chunkIndex":0,"items":[{"operation":"create","data":{"code":"A-1","qty":1}}],"digest":"` + hex64('a') + `","prefixDigest":"` + hex64('b') + `"}`,
		`{"chunkIndex":3,"items":[{"operation":"patch","id":"00000000-0000-4000-8000-000000000000","ifMatch":"x","patch":[]}],"digest":"` + hex64('0') + `","prefixDigest":"` + hex64('1') + `"}`,
		`{"chunkIndex":-1,"items":[],"digest":"","prefixDigest":""}`,
		`{"chunkIndex":1e3,"items":[1e400],"digest":"x","prefixDigest":"y"}`,
		`{"chunkIndex":0,"chunkIndex":1}`,
		`{"items":[{"b":1,"a":"\u00e9"}],"chunkIndex":0,"digest":"` + hex64('c') + `","prefixDigest":"` + hex64('d') + `","x":1}`,
		`[]`, ``, `{`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		cb, err := ParseChunk(body)
		if err != nil {
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.Code != problem.RequestInvalid {
				t.Fatalf("refusal %v of %q is not request.invalid", err, body)
			}
			return
		}
		if cb.Index < 0 || len(cb.Items) == 0 || len(cb.Digest) != 64 || len(cb.PrefixDigest) != 64 {
			t.Fatalf("accepted %+v from %q", cb, body)
		}
		again, err := canonjson.Transform(cb.Canonical)
		if err != nil || !bytes.Equal(again, cb.Canonical) {
			t.Fatalf("canonical body %q is not canonical (%v)", cb.Canonical, err)
		}
		// The shared chunking definition writes what the general
		// canonical writer writes for the same items.
		general, err := canonjson.Marshal(map[string]any{"items": cb.Items})
		if err != nil || !bytes.Equal(general, cb.Canonical) {
			t.Fatalf("canonical body %q, the general writer %q (%v)", cb.Canonical, general, err)
		}
		sum := sha256.Sum256(cb.Canonical)
		if cb.CanonicalDigest() != hex.EncodeToString(sum[:]) {
			t.Fatal("digest is not the SHA-256 of the canonical body")
		}
		// The items are the decoded canonical body.
		doc, err := strictjson.Decode(cb.Canonical)
		if err != nil || !reflect.DeepEqual(doc.(map[string]any)["items"], cb.Items) {
			t.Fatalf("items %#v are not the decoded canonical body %q (%v)", cb.Items, cb.Canonical, err)
		}
		if !bytes.HasPrefix(cb.Canonical, []byte(`{"items":[`)) {
			t.Fatalf("canonical body %q", cb.Canonical)
		}
	})
}

func hex64(c byte) string { return string(bytes.Repeat([]byte{c}, 64)) }
