package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// buildChain writes a chain of three sealed segments and an active one.
func buildChain(t *testing.T) Config {
	t.Helper()
	cfg := testConfig(t, 2048)
	w := mustOpen(t, cfg)
	appendN(t, w, 14)
	w.Close()
	seqs, err := listSealed(cfg.Path)
	must(t, err)
	if len(seqs) < 3 {
		t.Fatalf("only %d sealed segments", len(seqs))
	}
	return cfg
}

func lines(t *testing.T, name string) [][]byte {
	return bytes.SplitAfter(readFile(t, name), []byte("\n"))[:bytes.Count(readFile(t, name), []byte("\n"))]
}

func writeLines(t *testing.T, name string, ls [][]byte) {
	must(t, os.WriteFile(name, bytes.Join(ls, nil), 0o600))
}

func report(t *testing.T, cfg Config) (*Report, string) {
	t.Helper()
	rep, err := Verify(cfg)
	must(t, err)
	var b bytes.Buffer
	if _, err := rep.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return rep, b.String()
}

func TestVerifyNamesFirstBrokenRecord(t *testing.T) {
	cases := map[string]struct {
		mut         func(t *testing.T, cfg Config)
		segment     string
		line        uint64
		reasonWords string
	}{
		"tampered byte in a sealed segment": {func(t *testing.T, cfg Config) {
			ls := lines(t, sealedName(cfg.Path, 2))
			ls[1] = bytes.Replace(ls[1], []byte(`"invalid_client"`), []byte(`"invalid_clienT"`), 1)
			ls[1] = bytes.Replace(ls[1], []byte(`"kid-abc"`), []byte(`"kid-abd"`), 1)
			writeLines(t, sealedName(cfg.Path, 2), ls)
		}, "00000002", 2, "MAC does not verify"},
		"whitespace added": {func(t *testing.T, cfg Config) {
			ls := lines(t, sealedName(cfg.Path, 1))
			ls[2] = bytes.Replace(ls[2], []byte(`,"segment"`), []byte(`, "segment"`), 1)
			writeLines(t, sealedName(cfg.Path, 1), ls)
		}, "00000001", 3, "MAC does not verify"},
		"deleted line": {func(t *testing.T, cfg Config) {
			ls := lines(t, sealedName(cfg.Path, 2))
			writeLines(t, sealedName(cfg.Path, 2), append(ls[:1:1], ls[2:]...))
		}, "00000002", 2, "line number does not match"},
		"reordered lines": {func(t *testing.T, cfg Config) {
			ls := lines(t, sealedName(cfg.Path, 1))
			ls[1], ls[2] = ls[2], ls[1]
			writeLines(t, sealedName(cfg.Path, 1), ls)
		}, "00000001", 2, "line number does not match"},
		"truncated line": {func(t *testing.T, cfg Config) {
			b := readFile(t, sealedName(cfg.Path, 3))
			must(t, os.WriteFile(sealedName(cfg.Path, 3), b[:len(b)-10], 0o600))
		}, "00000003", 0, "truncated"}, // 0: the segment's last line
		"last line of a sealed segment removed": {func(t *testing.T, cfg Config) {
			ls := lines(t, sealedName(cfg.Path, 1))
			writeLines(t, sealedName(cfg.Path, 1), ls[:len(ls)-1])
		}, "00000002", 1, "prev does not match"},
		"line moved into the next segment": {func(t *testing.T, cfg Config) {
			a, b := lines(t, sealedName(cfg.Path, 1)), lines(t, sealedName(cfg.Path, 2))
			writeLines(t, sealedName(cfg.Path, 1), a[:len(a)-1])
			writeLines(t, sealedName(cfg.Path, 2), append([][]byte{a[len(a)-1]}, b...))
		}, "00000002", 1, "line number does not match"},
		"tampered active segment": {func(t *testing.T, cfg Config) {
			ls := lines(t, cfg.Path)
			ls[0] = bytes.Replace(ls[0], []byte(`"outcome":"issued"`), []byte(`"outcome":"denied"`), 1)
			ls[0] = bytes.Replace(ls[0], []byte(`"category":"invalid_client"`), []byte(`"category":"invalid_request"`), 1)
			writeLines(t, cfg.Path, ls)
		}, "active", 1, "MAC does not verify"},
		"unknown member": {func(t *testing.T, cfg Config) {
			ls := lines(t, cfg.Path)
			ls[0] = bytes.Replace(ls[0], []byte(`{"line"`), []byte(`{"extra":1,"line"`), 1)
			writeLines(t, cfg.Path, ls)
		}, "active", 1, "not a chain line"},
		"first record not from genesis": {func(t *testing.T, cfg Config) {
			// Drop the first line: the new first record claims line 2.
			ls := lines(t, sealedName(cfg.Path, 1))
			writeLines(t, sealedName(cfg.Path, 1), ls[1:])
		}, "00000001", 1, "line number does not match"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := buildChain(t)
			if tc.line == 0 {
				tc.line = uint64(len(lines(t, sealedName(cfg.Path, 3))))
			}
			tc.mut(t, cfg)
			rep, out := report(t, cfg)
			if rep.OK() || rep.Broken == nil {
				t.Fatalf("tampered chain verified:\n%s", out)
			}
			if rep.Broken.Segment != tc.segment || rep.Broken.Line != tc.line || !strings.Contains(rep.Broken.Reason, tc.reasonWords) {
				t.Fatalf("broken = %+v, want segment %s line %d %q", rep.Broken, tc.segment, tc.line, tc.reasonWords)
			}
			want := "broken: segment " + tc.segment + " line "
			if !strings.Contains(out, want) || !strings.HasSuffix(out, "result: failed\n") {
				t.Fatalf("output lacks %q:\n%s", want, out)
			}
			assertNoSecrets(t, out)
		})
	}
}

func TestVerifyWrongKey(t *testing.T) {
	cfg := buildChain(t)
	cfg.HashKey = bytes.Repeat([]byte("w"), 32)
	rep, out := report(t, cfg)
	if rep.OK() || rep.Broken.Segment != "00000001" || rep.Broken.Line != 1 || !strings.Contains(rep.Broken.Reason, "wrong hash key") {
		t.Fatalf("wrong key:\n%s", out)
	}
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "MAC does not verify") {
		t.Fatalf("Open with the wrong key = %v", err)
	}
}

func TestVerifyMissingSegments(t *testing.T) {
	cfg := buildChain(t)
	seqs, _ := listSealed(cfg.Path)
	last := seqs[len(seqs)-1]
	must(t, os.Remove(sealedName(cfg.Path, 2)))
	rep, out := report(t, cfg)
	if rep.OK() || !strings.Contains(out, "segment 00000002: missing\n") || rep.Broken != nil {
		t.Fatalf("middle segment removed:\n%s", out)
	}
	// The newest sealed segment missing is found through the active segment.
	must(t, os.Remove(sealedName(cfg.Path, last)))
	rep, out = report(t, cfg)
	if rep.OK() || !strings.Contains(out, "segment 00000002: missing\n") ||
		!strings.Contains(out, "segment "+pad(last)+": missing\n") || rep.Broken != nil || !rep.ActiveVerified {
		t.Fatalf("newest sealed segment removed:\n%s", out)
	}
	// The writer refuses to continue a chain whose newest sealed segment is gone.
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "segment number does not match") {
		t.Fatalf("Open with the newest sealed segment missing = %v", err)
	}
}

func pad(n uint32) string { s := "0000000" + string(rune('0'+n)); return s[len(s)-8:] }

func TestVerifyArchivedPrefix(t *testing.T) {
	cfg := buildChain(t)
	archive := filepath.Join(t.TempDir(), "archive")
	must(t, os.Mkdir(archive, 0o700))
	for _, s := range []uint32{1, 2} {
		must(t, os.Rename(sealedName(cfg.Path, s), filepath.Join(archive, filepath.Base(sealedName(cfg.Path, s)))))
	}
	rep, out := report(t, cfg)
	if !rep.OK() || rep.Archived != 2 || !strings.Contains(out, "archived: 00000001-00000002") || !strings.HasSuffix(out, "result: ok\n") {
		t.Fatalf("archived prefix:\n%s", out)
	}
	// The writer still continues the chain.
	w := mustOpen(t, cfg)
	appendN(t, w, 2)
	w.Close()
	verifyOK(t, cfg)
}

func TestVerifyOutput(t *testing.T) {
	cfg := buildChain(t)
	rep, out := report(t, cfg)
	seqs, _ := listSealed(cfg.Path)
	want := []string{
		"segments: " + string(rune('0'+len(seqs)+1)),
		"records: 14",
		"sealed-sequence: 00000001-" + pad(seqs[len(seqs)-1]),
		"head: " + rep.Head,
		"active-segment: verified",
		"result: ok",
	}
	if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("output:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	if !isLowerHex(rep.Head, 64) {
		t.Fatalf("head %q", rep.Head)
	}
	assertNoSecrets(t, out)

	empty := testConfig(t, 2048)
	if _, err := Verify(empty); err == nil || !strings.Contains(err.Error(), filepath.Dir(empty.Path)+": ") {
		t.Fatalf("Verify of a missing folder = %v", err)
	}
	must(t, os.Mkdir(filepath.Dir(empty.Path), 0o700))
	_, out = report(t, empty)
	if out != "segments: 0\nrecords: 0\nsealed-sequence: none\nhead: none\nactive-segment: verified\nresult: ok\n" {
		t.Fatalf("empty chain output:\n%s", out)
	}
}

func TestVerifyChangesNothing(t *testing.T) {
	cfg := testConfig(t, 2048)
	w := mustOpen(t, cfg)
	appendN(t, w, 12)
	w.Close()
	must(t, os.Remove(cfg.Path+".lock"))
	before := snapshot(t, filepath.Dir(cfg.Path))
	verifyOK(t, cfg)
	if after := snapshot(t, filepath.Dir(cfg.Path)); after != before {
		t.Fatalf("Verify changed the folder:\n%s\n---\n%s", before, after)
	}
}

func TestOpenRefusesBrokenActiveSegment(t *testing.T) {
	cases := map[string]func(b []byte) []byte{
		"tampered byte":  func(b []byte) []byte { return bytes.Replace(b, []byte(`"kid-abc"`), []byte(`"kid-abX"`), 1) },
		"torn last line": func(b []byte) []byte { return b[:len(b)-7] },
		"deleted line": func(b []byte) []byte {
			i := bytes.IndexByte(b, '\n')
			return b[i+1:]
		},
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t, 1<<20)
			w := mustOpen(t, cfg)
			appendN(t, w, 4)
			w.Close()
			must(t, os.WriteFile(cfg.Path, mut(readFile(t, cfg.Path)), 0o600))
			before := snapshot(t, filepath.Dir(cfg.Path))
			_, err := Open(cfg)
			if err == nil || !strings.Contains(err.Error(), "active segment") || !strings.Contains(err.Error(), "line ") {
				t.Fatalf("Open = %v, want a refusal naming the line", err)
			}
			if after := snapshot(t, filepath.Dir(cfg.Path)); after != before {
				t.Fatal("refused Open changed the chain")
			}
			// The lock was released: a later Open is refused for the chain, not the lock.
			if _, err := Open(cfg); err == nil || strings.Contains(err.Error(), "locked") {
				t.Fatalf("second Open = %v", err)
			}
		})
	}
}

// TestOpenRefusesTamperedSealedTail: the writer checks the newest sealed
// segment's last record before continuing from it.
func TestOpenRefusesTamperedSealedTail(t *testing.T) {
	cfg := buildChain(t)
	seqs, _ := listSealed(cfg.Path)
	name := sealedName(cfg.Path, seqs[len(seqs)-1])
	b := readFile(t, name)
	i := bytes.LastIndex(b, []byte(`"operationId":"`)) + len(`"operationId":"`)
	b[i] ^= 1
	must(t, os.WriteFile(name, b, 0o600))
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "last record") {
		t.Fatalf("Open = %v", err)
	}
}

func assertNoSecrets(t *testing.T, out string) {
	t.Helper()
	if strings.Contains(out, "hmac-sha256:") || strings.Contains(out, string(testKey)) || strings.Contains(out, "client-x") {
		t.Fatalf("report output holds a pseudonym, key or value:\n%s", out)
	}
}

func TestVerifyEmptySealedSegment(t *testing.T) {
	cfg := buildChain(t)
	must(t, os.WriteFile(sealedName(cfg.Path, 2), nil, 0o600))
	rep, out := report(t, cfg)
	if rep.OK() || rep.Broken.Segment != "00000002" || !strings.Contains(out, "sealed segment is empty") ||
		!strings.Contains(out, "active-segment: not verified: verification stopped at the broken record") {
		t.Fatalf("empty sealed segment:\n%s", out)
	}
}
