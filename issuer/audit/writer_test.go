package audit

import (
	"bytes"
	"strings"
	"testing"
)

func TestAppendCloseReopenVerify(t *testing.T) {
	cfg := testConfig(t, 1<<20)
	w := mustOpen(t, cfg)
	appendN(t, w, 5)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2 := mustOpen(t, cfg)
	appendN(t, w2, 4)
	w2.Close()
	rep := verifyOK(t, cfg)
	if rep.Records != 9 || !rep.ActiveVerified {
		t.Fatalf("records %d active %v", rep.Records, rep.ActiveVerified)
	}
	var b bytes.Buffer
	rep.WriteTo(&b)
	t.Log(b.String())
	t.Log(strings.SplitN(string(readFile(t, cfg.Path)), "\n", 2)[0])
}
