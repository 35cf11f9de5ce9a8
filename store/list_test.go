package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store"
)

func TestScopeHidesRecordsOutsideTheBoundariesInPagesAndCounts(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	child := s.Package().EntityByID("child")
	for i, nid := range []string{"A-1", "A-2", "B-1", "C-1"} {
		if _, err := s.Create(ctx, child, uuid.NewString(), map[string]any{"national-id": nid, "age": int64(i)}, journal()); err != nil {
			t.Fatal(err)
		}
	}
	allowed := query.Allowed{Readable: []string{"national-id", "age"}, Filterable: []string{"age"}, Sortable: []string{"age"}, AllowCount: true}
	q, err := query.Parse(child, allowed, query.RawOptions{"$orderby": {"age"}, "$count": {"true"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		boundaries []store.Boundary
		want       []string
	}{
		{"unrestricted", nil, []string{"A-1", "A-2", "B-1", "C-1"}},
		{"equals", []store.Boundary{{FieldID: "national-id", Values: []any{"B-1"}}}, []string{"B-1"}},
		{"in", []store.Boundary{{FieldID: "national-id", Values: []any{"A-2", "C-1", "Z-9"}}}, []string{"A-2", "C-1"}},
		{"two boundaries", []store.Boundary{{FieldID: "national-id", Values: []any{"A-1", "A-2"}}, {FieldID: "age", Values: []any{int64(1)}}}, []string{"A-2"}},
		{"empty in", []store.Boundary{{FieldID: "national-id", Values: []any{}}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			scope, err := store.Scope(child, c.boundaries)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := s.Page(ctx, q, scope)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range recs {
				got = append(got, r.Values["national-id"].(string))
			}
			if len(got) != len(c.want) {
				t.Fatalf("page %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("page %v, want %v", got, c.want)
				}
			}
			n, err := s.Count(ctx, q, scope)
			if err != nil || n != int64(len(c.want)) {
				t.Fatalf("count %d (%v), want %d", n, err, len(c.want))
			}
		})
	}
	if _, err := store.Scope(child, []store.Boundary{{FieldID: "nope", Values: []any{"x"}}}); err == nil {
		t.Fatal("a boundary on an unknown field was accepted")
	}
	if _, err := store.Scope(child, []store.Boundary{{FieldID: "national-id", Values: []any{"x", int64(1)}}}); err == nil {
		t.Fatal("mixed boundary values were accepted")
	}
}
