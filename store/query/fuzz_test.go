package query_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/store/query"
)

var placeholder = regexp.MustCompile(`\$[0-9]+::`)

// FuzzParseFilter: any filter text either parses to a query whose SQL holds
// no literal and whose canonical form parses to itself, or is refused with
// query.invalid. Seeds: testdata/fuzz/FuzzParseFilter.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"age eq 1", "name eq 'O''Brien' or not (flag eq true)", "status in ('active','a_b')",
		"startswith(name,'%_\\') and contains(note,'x')", "seen ge 2024-01-31T10:00:00Z and born lt 2024-02-29",
		"amount gt -1.25", "where eq null", "((age gt 1))", "age eq", "'"} {
		f.Add(s)
	}
	e := personEntity()
	a := fullAllowed()
	f.Fuzz(func(t *testing.T, src string) {
		q, err := query.Parse(e, a, query.RawOptions{query.OptFilter: {src}})
		if err != nil {
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.Code != problem.QueryInvalid {
				t.Fatalf("%q: refusal is not query.invalid: %v", src, err)
			}
			return
		}
		w := q.Where(2)
		if n := len(placeholder.FindAllString(w.SQL, -1)); n != len(w.Args) {
			t.Fatalf("%q: %d placeholders, %d args: %s", src, n, len(w.Args), w.SQL)
		}
		if strings.Contains(strings.ReplaceAll(w.SQL, `ESCAPE '\'`, ""), "'") {
			t.Fatalf("%q: a quote reached the SQL text: %s", src, w.SQL)
		}
		canon := q.Filter()
		again, err := query.Parse(e, a, query.RawOptions{query.OptFilter: {canon}})
		if err == nil && again.Filter() != canon {
			t.Fatalf("%q: canonical form %q reparses as %q", src, canon, again.Filter())
		}
	})
}

// FuzzOpenCursor: no text but a cursor sealed under this key opens, and every
// refusal is query.cursor_invalid. Seeds: testdata/fuzz/FuzzOpenCursor.
func FuzzOpenCursor(f *testing.F) {
	s, err := query.NewSealer(testSecret)
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
		var pe *problem.Error
		if !errors.As(err, &pe) || pe.Code != problem.QueryCursorInvalid {
			t.Fatalf("%q: refusal is not query.cursor_invalid: %v", token, err)
		}
	})
}
