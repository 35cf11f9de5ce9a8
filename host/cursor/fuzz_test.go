package cursor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/registrum/registrum/host/cursor"
	"github.com/registrum/registrum/model/query"
)

// FuzzOpenCursor: no text but a cursor sealed under this key opens, and every
// refusal is query.cursor_invalid. Seeds: testdata/fuzz/FuzzOpenCursor.
func FuzzOpenCursor(f *testing.F) {
	s, err := cursor.NewSealer(testSecret)
	if err != nil {
		f.Fatal(err)
	}
	e := personEntity()
	now := time.Unix(1_800_000_000, 0)
	q, err := query.Parse(e, fullAllowed(), opts("$filter", "age gt 1", "$orderby", "name desc,seen"))
	if err != nil {
		f.Fatal(err)
	}
	valid, err := s.Seal(q, staff, query.Row{ID: uuidA, Values: map[string]any{"name": "x", "seen": now}}, now)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, token string) {
		got, err := s.Open(token, e, fullAllowed(), staff, now)
		if err == nil {
			// Only a cursor this key sealed opens (each fuzz worker seals its
			// own, so compare what it carries rather than its bytes).
			if got.Digest() != q.Digest() || got.Position == nil || got.Position.ID != uuidA {
				t.Fatalf("%q opened as another query", token)
			}
			return
		}
		var qe *query.Error
		if !errors.As(err, &qe) || qe.Kind != query.CursorInvalid {
			t.Fatalf("%q: refusal is not query.cursor_invalid: %v", token, err)
		}
	})
}
