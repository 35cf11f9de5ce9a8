package store

import (
	"slices"
	"testing"
)

// A write's snapshot sees the write's own transaction: when its xmax is at
// or below the transaction's id, xmax moves just above it and every id in
// between is in progress; a snapshot that already sees it is kept.
func TestWithOwnSeesTheTransactionItself(t *testing.T) {
	s := withOwn(Snapshot{Xmin: 100, Xmax: 103, Xip: []uint64{101}}, 106)
	if s.Xmin != 100 || s.Xmax != 107 || !slices.Equal(s.Xip, []uint64{101, 103, 104, 105}) || !s.Valid() || !s.Sees(106) || s.Sees(105) || !s.Sees(102) {
		t.Fatalf("%+v", s)
	}
	kept := Snapshot{Xmin: 100, Xmax: 110, Xip: []uint64{101, 108}}
	if got := withOwn(kept, 105); !slices.Equal(got.Xip, kept.Xip) || got.Xmax != 110 || !got.Sees(105) {
		t.Fatalf("%+v", got)
	}
	if got := withOwn(kept, 108); slices.Contains(got.Xip, 108) || !got.Sees(108) {
		t.Fatalf("%+v", got)
	}
}

func TestParseSnapshotReadsPostgreSQLText(t *testing.T) {
	s, err := parseSnapshot("740:745:742,740")
	if err != nil || s.String() != "740:745:740,742" {
		t.Fatalf("%v %v", s, err)
	}
	for _, bad := range []string{"", "1:2", "5:4:", "1:5:7", "0:0:", "a:b:", "1:5:x"} {
		if _, err := parseSnapshot(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
