package access_test

import (
	"slices"
	"testing"

	"github.com/registrum/registrum/host/access"
)

func TestFieldSet(t *testing.T) {
	var zero access.FieldSet
	if zero.Has("a") || zero.Len() != 0 || len(zero.IDs()) != 0 {
		t.Fatal("the zero FieldSet is not empty")
	}
	s := access.NewFieldSet("b", "a", "b", "c")
	if s.Len() != 3 || !s.Has("a") || !s.Has("c") || s.Has("d") {
		t.Fatalf("set = %v", s.IDs())
	}
	if got := slices.Collect(s.All()); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("All = %v", got)
	}
	ids := s.IDs()
	ids[0] = "z"
	if !s.Has("a") || s.Has("z") || s.IDs()[0] != "a" {
		t.Fatal("changing the slice IDs returned changed the set")
	}
}
