package verifier_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/plugins/verifier"
)

// entries lists everything under dir, sockets marked.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.Type()&fs.ModeSocket != 0 {
			rel += " (socket)"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKilledAndCrashedVerifiersLeaveNothingInTheTemporaryFolder runs a
// go-plugin verifier with the temporary folder pointed at a fresh one: its
// socket lives there, in a folder of the process's own, and once the
// process is killed at a deadline, has crashed, and the verifier is
// closed, nothing is left (a SIGKILLed plugin cannot remove its socket;
// the host removes the folder).
func TestKilledAndCrashedVerifiersLeaveNothingInTheTemporaryFolder(t *testing.T) {
	// Not t.TempDir(): its long path would leave no room for the socket's
	// name (a Unix socket path holds at most 107 bytes).
	tmp, err := os.MkdirTemp("", "rgl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	t.Setenv("TMPDIR", tmp)
	p := newProcess(t, "hostile")
	if _, err := verify(t, p, 10*time.Second, attachment("ok", []byte("x")), strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	got := entries(t, tmp)
	if len(got) != 2 || !strings.HasSuffix(got[1], " (socket)") {
		t.Fatalf("a running verifier's temporary folder holds %q, want one folder of its own holding its socket", got)
	}

	// Killed at its deadline.
	v, err := verify(t, p, 300*time.Millisecond, attachment("hang", []byte("x")), strings.NewReader("x"))
	wantRetry(t, v, err, verifier.CauseDeadline)
	// Crashed (the plugin exits inside the call), after a restart.
	v, err = verify(t, p, 10*time.Second, attachment("exits", []byte("x")), strings.NewReader("x"))
	wantRetry(t, v, err, verifier.CauseCrashed)
	// Running again, then closed.
	if _, err := verify(t, p, 10*time.Second, attachment("ok", []byte("x")), strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if p.Starts() != 3 {
		t.Fatalf("started %d processes, want 3", p.Starts())
	}
	// The killed processes' folders are removed in the background.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := entries(t, tmp)
		if len(got) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left in the temporary folder: %q", got)
		}
	}
}
