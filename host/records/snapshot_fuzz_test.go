package records

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/store"
)

// FuzzSnapshotToken holds the snapshot token parser to its contract on any
// input: it refuses with 400 query.invalid or reads a well-formed snapshot
// (xmin <= xmax, in-progress ids ascending within [xmin, xmax)) from a
// token of at most 4096 bytes that is exactly the host's own encoding of
// what it read (one spelling per state); and every snapshot built from the
// fuzzed numbers that fits in 4096 bytes reads back as itself.
func FuzzSnapshotToken(f *testing.F) {
	tag := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	for _, s := range []store.Snapshot{{Xmin: 1, Xmax: 1}, {Xmin: 740, Xmax: 745, Xip: []uint64{740, 742}}, {Xmin: 1 << 40, Xmax: 1<<40 + 3, Xip: []uint64{1<<40 + 2}}} {
		tok, err := SnapshotToken(tag, s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(tok, uint64(5), uint64(3), []byte{1, 0, 2})
	}
	for _, s := range []string{"", "engine2_", "engine1_0b0e5f46-8c1c-4d8e-9d55-2f0e3c2a9a11", "ENGINE2_AQIDBAUGBwgBAAA", "engine2_AQIDBAUGBwgBAAA=",
		"engine2_AQIDBAUGBwgBAAAA", "engine2_AQIDBAUGBwiAAAAA", "engine2_" + strings.Repeat("A", 5000)} {
		f.Add(s, uint64(0), uint64(0), []byte(nil))
	}
	f.Fuzz(func(t *testing.T, tok string, xmin, span uint64, gaps []byte) {
		gotTag, snap, err := ParseSnapshotToken(tok)
		if err != nil {
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.Code != problem.QueryInvalid {
				t.Fatalf("%q: refused with %v, want query.invalid", tok, err)
			}
		} else {
			if len(tok) > MaxSnapshotTokenBytes || !snap.Valid() {
				t.Fatalf("%q: read %+v", tok, snap)
			}
			again, err := SnapshotToken(gotTag, snap)
			if err != nil || again != tok {
				t.Fatalf("%q: read %+v, which encodes as %q (%v)", tok, snap, again, err)
			}
		}
		// Round trip of a snapshot built from the fuzzed numbers.
		if xmin == 0 {
			xmin = 1
		}
		if span > 1<<32 {
			span %= 1 << 32
		}
		if xmin > ^uint64(0)-span {
			xmin = ^uint64(0) - span
		}
		s := store.Snapshot{Xmin: xmin, Xmax: xmin + span}
		x := xmin
		for _, g := range gaps {
			x += uint64(g)
			if x >= s.Xmax {
				break
			}
			if len(s.Xip) == 0 || x > s.Xip[len(s.Xip)-1] {
				s.Xip = append(s.Xip, x)
			}
			x++
		}
		if !s.Valid() {
			t.Fatalf("built an invalid snapshot %+v", s)
		}
		enc, err := SnapshotToken(tag, s)
		if err != nil {
			if len(s.Xip) < 400 {
				t.Fatalf("%+v: %v", s, err)
			}
			return
		}
		back, read, err := ParseSnapshotToken(enc)
		if err != nil || back != tag || read.Xmin != s.Xmin || read.Xmax != s.Xmax || !slices.Equal(read.Xip, s.Xip) {
			t.Fatalf("%+v encoded as %q reads as %+v (%v)", s, enc, read, err)
		}
	})
}

// A state with too many transactions in progress has no token: the read
// or write that needs one answers 503 source.unavailable.
func TestSnapshotTokenBound(t *testing.T) {
	s := store.Snapshot{Xmin: 1, Xmax: 1 << 40}
	for i := range 2000 {
		s.Xip = append(s.Xip, 2+uint64(i)*100000)
	}
	if _, err := SnapshotToken([8]byte{}, s); !errors.Is(err, errSnapshotTooLong) {
		t.Fatalf("a token of %d in-progress ids: %v", len(s.Xip), err)
	}
	s.Xip = s.Xip[:300]
	tok, err := SnapshotToken([8]byte{}, s)
	if err != nil || len(tok) > MaxSnapshotTokenBytes {
		t.Fatalf("300 in-progress ids: %d bytes, %v", len(tok), err)
	}
	var pe *problem.Error
	if !errors.As(SourceUnavailable(errSnapshotTooLong), &pe) || pe.Code != problem.SourceUnavailable {
		t.Fatal("a token too long is not source.unavailable")
	}
}

// Every snapshot the store lets a write have (store.MaxWriteInProgress
// in-progress ids) has a token, even wider than PostgreSQL makes one
// (whose ids lie within 2^31 of each other): every distance of five
// varint bytes, above an xmin of ten.
func TestEveryWriteSnapshotHasAToken(t *testing.T) {
	const step = 1 << 29
	s := store.Snapshot{Xmin: math.MaxUint64 - (store.MaxWriteInProgress+2)*step}
	s.Xmax = s.Xmin + (store.MaxWriteInProgress+1)*step
	for i := range store.MaxWriteInProgress {
		s.Xip = append(s.Xip, s.Xmin+uint64(i+1)*step)
	}
	if !s.Valid() {
		t.Fatal("not a valid snapshot")
	}
	tok, err := SnapshotToken([8]byte{}, s)
	if err != nil || len(tok) > MaxSnapshotTokenBytes {
		t.Fatalf("%d in-progress ids: %d bytes, %v", len(s.Xip), len(tok), err)
	}
	t.Logf("the widest write snapshot's token: %d bytes", len(tok))
}
