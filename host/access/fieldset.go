package access

import (
	"iter"
	"slices"
)

// FieldSet is an immutable set of authored field (or attachment slot) ids.
// The grants of one profile and entity share their sets, which no caller
// can change. The zero FieldSet is empty.
type FieldSet struct {
	members map[string]bool
	sorted  []string
}

// NewFieldSet returns the set of ids.
func NewFieldSet(ids ...string) FieldSet {
	s := FieldSet{members: make(map[string]bool, len(ids))}
	for _, id := range ids {
		if !s.members[id] {
			s.members[id] = true
			s.sorted = append(s.sorted, id)
		}
	}
	slices.Sort(s.sorted)
	return s
}

// Has reports whether id is in the set.
func (s FieldSet) Has(id string) bool { return s.members[id] }

// Len is the number of ids in the set.
func (s FieldSet) Len() int { return len(s.sorted) }

// IDs returns the ids in ascending order, in a slice the caller owns.
func (s FieldSet) IDs() []string { return slices.Clone(s.sorted) }

// All yields the ids in ascending order.
func (s FieldSet) All() iter.Seq[string] { return slices.Values(s.sorted) }
