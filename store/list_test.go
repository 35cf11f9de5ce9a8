package store_test

import (
	"context"
	"slices"
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
				got = append(got, r.Value(child.Field("national-id")).(string))
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

// TestPagesSortDecimalsAsNumbersAcrossCursors holds the page order on the
// column's value, not on the text the select list casts it to ("10.25" sorts
// before "9.5" as text): the keyset predicate compares numbers, so an order
// by text would skip or repeat records from one page to the next.
func TestPagesSortDecimalsAsNumbersAcrossCursors(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	child := s.Package().EntityByID("child")
	amounts := []string{"9.5", "10.25", "100.00", "2.75", "20.10", "1.00", "3.30"}
	for i, a := range amounts {
		if _, err := s.Create(ctx, child, uuid.NewString(), map[string]any{"national-id": "N-" + a, "amount": a, "age": int64(i)}, journal()); err != nil {
			t.Fatal(err)
		}
	}
	allowed := query.Allowed{Readable: []string{"national-id", "amount"}, Sortable: []string{"amount"}}
	want := []string{"1.00", "2.75", "3.30", "9.5", "10.25", "20.10", "100.00"}
	for _, desc := range []bool{false, true} {
		order := "amount"
		exp := slices.Clone(want)
		if desc {
			order = "amount desc"
			slices.Reverse(exp)
		}
		first, err := query.Parse(child, allowed, query.RawOptions{"$orderby": {order}, "$top": {"2"}})
		if err != nil {
			t.Fatal(err)
		}
		scope, err := store.Scope(child, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for q, page := first, 0; page < 10; page++ {
			recs, err := s.Page(ctx, q, scope)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range recs {
				if i < q.Top {
					got = append(got, r.Value(child.Field("national-id")).(string)[2:])
				}
			}
			if len(recs) <= q.Top {
				break
			}
			// The next page starts after this page's last record, as a
			// cursor's query does.
			next := *q
			last := recs[q.Top-1]
			next.Position = &query.Row{ID: last.ID, Values: last.ValueMap()}
			q = &next
		}
		if !slices.Equal(got, exp) {
			t.Errorf("$orderby=%s through cursors: %v, want %v", order, got, exp)
		}
	}
}
