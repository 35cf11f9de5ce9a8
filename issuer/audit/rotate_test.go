package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fixedDenial returns a denial whose line length is the same at every line
// number 1..9 when time is fixed.
func fixedDenial(i int) Entry {
	return Entry{OperationID: "op-" + string(rune('a'+i%26)), Outcome: OutcomeDenied, Category: "invalid_client"}
}

func lineLen(t *testing.T) int64 {
	rec, err := fixedDenial(0).encode(3)
	must(t, err)
	line, _ := encodeLine([]byte("k"), 1, 1, 1_700_000_000_000, genesis, rec)
	must(t, err)
	return int64(len(line))
}

func openFixed(t *testing.T, cfg Config) *Writer {
	w := mustOpen(t, cfg)
	w.now = func() time.Time { return time.UnixMilli(1_700_000_000_000) }
	return w
}

// TestRotationThresholdEdge: a segment may reach exactly MaximumFileBytes;
// the append that would exceed it seals first.
func TestRotationThresholdEdge(t *testing.T) {
	L := lineLen(t)
	for _, tc := range []struct {
		max        int64
		perSegment int
	}{{3 * L, 3}, {3*L - 1, 2}, {3*L + 1, 3}} {
		cfg := testConfig(t, tc.max)
		w := openFixed(t, cfg)
		for i := range 7 {
			must(t, w.Append(context.Background(), fixedDenial(i)))
		}
		w.Close()
		seqs, err := listSealed(cfg.Path)
		must(t, err)
		wantSealed := (7 - 1) / tc.perSegment
		if len(seqs) != wantSealed {
			t.Fatalf("max %d: %d sealed segments, want %d", tc.max, len(seqs), wantSealed)
		}
		for _, s := range seqs {
			fi, err := os.Stat(sealedName(cfg.Path, s))
			must(t, err)
			if fi.Size() != int64(tc.perSegment)*L || fi.Size() > tc.max {
				t.Fatalf("max %d: segment %08d is %d bytes, want %d", tc.max, s, fi.Size(), int64(tc.perSegment)*L)
			}
		}
		verifyOK(t, cfg)
	}
}

func TestRotationContinuesChainAcrossSegments(t *testing.T) {
	cfg := testConfig(t, 2048)
	w := mustOpen(t, cfg)
	appendN(t, w, 20)
	w.Close()
	seqs, err := listSealed(cfg.Path)
	must(t, err)
	if len(seqs) < 3 {
		t.Fatalf("sealed %v, want at least 3", seqs)
	}
	for i, s := range seqs {
		if s != uint32(i+1) {
			t.Fatalf("sealed %v not numbered 1, 2, 3, ...", seqs)
		}
		name := sealedName(cfg.Path, s)
		if filepath.Base(name) != "chain.jsonl.0000000"+string(rune('0'+s)) {
			t.Fatalf("sealed name %s", filepath.Base(name))
		}
		fi, err := os.Stat(name)
		must(t, err)
		if fi.Mode().Perm() != 0o600 || fi.Size() > cfg.MaximumFileBytes {
			t.Fatalf("%s: mode %v size %d", name, fi.Mode(), fi.Size())
		}
	}
	// The first record of each segment binds to the last MAC of the previous one.
	names := []string{}
	for _, s := range seqs {
		names = append(names, sealedName(cfg.Path, s))
	}
	names = append(names, cfg.Path)
	prevMAC := "0000000000000000000000000000000000000000000000000000000000000000"
	for i, name := range names {
		lines := bytes.Split(bytes.TrimSuffix(readFile(t, name), []byte("\n")), []byte("\n"))
		for j, l := range lines {
			var env struct {
				Segment uint32 `json:"segment"`
				Line    int    `json:"line"`
				Prev    string `json:"prev"`
				MAC     string `json:"mac"`
			}
			must(t, json.Unmarshal(l, &env))
			if env.Prev != prevMAC || env.Segment != uint32(i+1) || env.Line != j+1 {
				t.Fatalf("%s line %d: segment %d line %d prev %s, want segment %d line %d prev %s", name, j+1, env.Segment, env.Line, env.Prev, i+1, j+1, prevMAC)
			}
			prevMAC = env.MAC
		}
	}
	// A restarted writer continues in the same segment numbering.
	w2 := mustOpen(t, cfg)
	appendN(t, w2, 20)
	w2.Close()
	rep := verifyOK(t, cfg)
	if rep.Records != 40 || rep.Sealed[0] != 1 {
		t.Fatalf("records %d", rep.Records)
	}
	if rep.Segments != len(rep.Sealed)+1 {
		t.Fatalf("segments %d, sealed %d", rep.Segments, len(rep.Sealed))
	}
}

// TestReopenAfterSealWithEmptyActive covers a restart right after a seal (or
// a crash between the rename and the new segment's creation).
func TestReopenAfterSealWithEmptyActive(t *testing.T) {
	cfg := testConfig(t, 2048)
	w := mustOpen(t, cfg)
	appendN(t, w, 10)
	w.Close()
	// Seal by hand as the writer does, leaving no active segment.
	seqs, _ := listSealed(cfg.Path)
	next := seqs[len(seqs)-1] + 1
	must(t, os.Rename(cfg.Path, sealedName(cfg.Path, next)))
	w2 := mustOpen(t, cfg)
	if w2.seq != next+1 || w2.line != 0 {
		t.Fatalf("continued at segment %d line %d, want %d line 0", w2.seq, w2.line, next+1)
	}
	appendN(t, w2, 3)
	w2.Close()
	if rep := verifyOK(t, cfg); rep.Records != 13 {
		t.Fatalf("records %d", rep.Records)
	}
}

func TestSealRefusesToOverwrite(t *testing.T) {
	L := lineLen(t)
	cfg := testConfig(t, 2*L)
	w := openFixed(t, cfg)
	must(t, w.Append(context.Background(), fixedDenial(0)))
	must(t, w.Append(context.Background(), fixedDenial(1)))
	// Someone puts a file where the next sealed segment must go.
	must(t, os.WriteFile(sealedName(cfg.Path, 1), []byte("precious\n"), 0o600))
	if err := w.Append(context.Background(), fixedDenial(2)); err == nil || w.Err() == nil {
		t.Fatalf("seal over an existing file: Append %v, Err %v", err, w.Err())
	}
	if got := readFile(t, sealedName(cfg.Path, 1)); string(got) != "precious\n" {
		t.Fatal("existing file was overwritten")
	}
}
