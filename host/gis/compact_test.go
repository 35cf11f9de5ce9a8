package gis

import (
	"bytes"
	"encoding/json"
	"testing"
)

// appendCompact writes what json.Compact writes for every valid JSON text:
// white space inside strings (escaped quotes and backslashes included) is
// kept, between tokens dropped.
func FuzzAppendCompact(f *testing.F) {
	for _, s := range []string{
		`{"type": "Point", "coordinates": [12.5, -7.25]}`,
		"{\n\t\"a\" :\r [ 1 , 2 ] }",
		`{"name": "a \"quoted\" b", "path": "c:\\ d\\", "tab": "x\ty"}`,
		`{"s": "\\", "t": " \" "}`,
		`[]`, `"  "`, `null`, ` 1 `,
		`{"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]], "bbox": [0, 0, 1, 1]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(s)); err != nil {
			t.Fatal(err)
		}
		if got := appendCompact([]byte("prefix"), []byte(s)); string(got) != "prefix"+want.String() {
			t.Fatalf("appendCompact(%q) = %q, want %q", s, got[6:], want.String())
		}
	})
}
