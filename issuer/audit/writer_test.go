package audit

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"testing"
)

// TestReopenContinuesChain: a restarted writer verifies the active segment
// and continues it from its last MAC at the next line number.
func TestReopenContinuesChain(t *testing.T) {
	cfg := testConfig(t, 1<<20)
	w := mustOpen(t, cfg)
	appendN(t, w, 5)
	must(t, w.Close())

	ls := bytes.Split(bytes.TrimSuffix(readFile(t, cfg.Path), []byte("\n")), []byte("\n"))
	var last struct {
		MAC string `json:"mac"`
	}
	must(t, json.Unmarshal(ls[len(ls)-1], &last))

	w2 := mustOpen(t, cfg)
	if w2.seq != 1 || w2.line != 5 || hex.EncodeToString(w2.head[:]) != last.MAC || w2.size != int64(len(readFile(t, cfg.Path))) {
		t.Fatalf("reopened at segment %d line %d size %d head %x; want 1, 5, file size, last MAC %s", w2.seq, w2.line, w2.size, w2.head, last.MAC)
	}
	appendN(t, w2, 4)
	must(t, w2.Close())

	var sixth struct {
		Line int    `json:"line"`
		Prev string `json:"prev"`
	}
	ls = bytes.Split(readFile(t, cfg.Path), []byte("\n"))
	must(t, json.Unmarshal(ls[5], &sixth))
	if sixth.Line != 6 || sixth.Prev != last.MAC {
		t.Fatalf("first record after restart: line %d prev %s; want 6 and %s", sixth.Line, sixth.Prev, last.MAC)
	}
	if rep := verifyOK(t, cfg); rep.Records != 9 || !rep.ActiveVerified {
		t.Fatalf("records %d active verified %v", rep.Records, rep.ActiveVerified)
	}
}
