package audit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenCreatesOwnerOnlyFiles(t *testing.T) {
	cfg := testConfig(t, 1<<20)
	cfg.Path = filepath.Join(filepath.Dir(cfg.Path), "deeper", "chain.jsonl")
	w := mustOpen(t, cfg)
	appendN(t, w, 1)
	for name, want := range map[string]os.FileMode{
		filepath.Dir(cfg.Path): os.ModeDir | 0o700,
		cfg.Path:               0o600,
		cfg.Path + ".lock":     0o600,
	} {
		fi, err := os.Lstat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s has mode %v, want %v", name, fi.Mode(), want)
		}
	}
}

func TestOpenRefusesLoosePermissions(t *testing.T) {
	prepare := func(t *testing.T) Config {
		cfg := testConfig(t, 1<<20)
		w := mustOpen(t, cfg)
		appendN(t, w, 2)
		w.Close()
		return cfg
	}
	cases := map[string]struct {
		mut  func(t *testing.T, cfg Config) string // returns the path the error must name
		want string
	}{
		"folder readable by group": {func(t *testing.T, c Config) string {
			must(t, os.Chmod(filepath.Dir(c.Path), 0o750))
			return filepath.Dir(c.Path)
		}, "has mode 0750; group and other must have no access"},
		"folder readable by other": {func(t *testing.T, c Config) string {
			must(t, os.Chmod(filepath.Dir(c.Path), 0o705))
			return filepath.Dir(c.Path)
		}, "has mode 0705"},
		"chain readable by group": {func(t *testing.T, c Config) string {
			must(t, os.Chmod(c.Path, 0o640))
			return c.Path
		}, "has mode 0640; group and other must have no access"},
		"chain readable by other": {func(t *testing.T, c Config) string {
			must(t, os.Chmod(c.Path, 0o604))
			return c.Path
		}, "has mode 0604"},
		"lock readable by other": {func(t *testing.T, c Config) string {
			must(t, os.Chmod(c.Path+".lock", 0o644))
			return c.Path + ".lock"
		}, "has mode 0644"},
		"chain is a symlink": {func(t *testing.T, c Config) string {
			must(t, os.Rename(c.Path, c.Path+".real"))
			must(t, os.Symlink(c.Path+".real", c.Path))
			return c.Path
		}, "is not a regular file"},
		"chain has two links": {func(t *testing.T, c Config) string {
			must(t, os.Link(c.Path, c.Path+".copy"))
			return c.Path
		}, "has 2 links"},
		"older sealed segment readable by other": {func(t *testing.T, c Config) string {
			must(t, os.WriteFile(sealedName(c.Path, 1), nil, 0o600))
			must(t, os.WriteFile(sealedName(c.Path, 2), nil, 0o600))
			must(t, os.Chmod(sealedName(c.Path, 1), 0o604))
			return sealedName(c.Path, 1)
		}, "has mode 0604"},
		"sealed segment readable by group": {func(t *testing.T, c Config) string {
			must(t, os.WriteFile(sealedName(c.Path, 1), nil, 0o640))
			must(t, os.Chmod(sealedName(c.Path, 1), 0o640))
			return sealedName(c.Path, 1)
		}, "has mode 0640"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := prepare(t)
			named := tc.mut(t, cfg)
			before := snapshot(t, filepath.Dir(cfg.Path))
			_, err := Open(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), named) {
				t.Fatalf("Open error = %v, want %q naming %s", err, tc.want, named)
			}
			if after := snapshot(t, filepath.Dir(cfg.Path)); after != before {
				t.Fatalf("refused Open changed the folder:\n%s\n---\n%s", before, after)
			}
		})
	}
}

func TestSecondOpenFailsWhileLocked(t *testing.T) {
	cfg := testConfig(t, 1<<20)
	w := mustOpen(t, cfg)
	_, err := Open(cfg)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), cfg.Path+".lock") {
		t.Fatalf("second Open = %v, want ErrLocked naming the lock file", err)
	}
	// The refused Open did not disturb the first writer.
	appendN(t, w, 2)
	w.Close()
	w2 := mustOpen(t, cfg)
	appendN(t, w2, 1)
}

// TestLockHeldByAnotherProcess runs a real writer in a child process and
// checks that this process can neither open the chain nor verify its active
// segment while the child holds the lock.
func TestLockHeldByAnotherProcess(t *testing.T) {
	cfg := testConfig(t, 1<<20)
	w := mustOpen(t, cfg)
	appendN(t, w, 3)
	w.Close()

	child := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLock$")
	child.Env = append(os.Environ(), "AUDIT_HELPER_PATH="+cfg.Path)
	stdin, err := child.StdinPipe()
	must(t, err)
	stdout, err := child.StdoutPipe()
	must(t, err)
	child.Stderr = os.Stderr
	must(t, child.Start())
	defer func() { stdin.Close(); _ = child.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "holding\n" {
		t.Fatalf("child said %q, %v", line, err)
	}

	if _, err := Open(cfg); !errors.Is(err, ErrLocked) {
		t.Fatalf("Open beside a running writer = %v, want ErrLocked", err)
	}
	rep, err := Verify(cfg)
	must(t, err)
	var out bytes.Buffer
	rep.WriteTo(&out)
	if rep.ActiveVerified || !strings.Contains(out.String(), "active-segment: not verified") || !rep.OK() {
		t.Fatalf("Verify beside a running writer:\n%s", out.String())
	}

	stdin.Close()
	must(t, child.Wait())
	rep = verifyOK(t, cfg)
	if !rep.ActiveVerified || rep.Records != 4 {
		t.Fatalf("after the child exited: active verified %v, records %d", rep.ActiveVerified, rep.Records)
	}
}

// TestHelperHoldLock is the child process of TestLockHeldByAnotherProcess.
func TestHelperHoldLock(t *testing.T) {
	path := os.Getenv("AUDIT_HELPER_PATH")
	if path == "" {
		return // not running as a helper
	}
	cfg := Config{Path: path, MaximumFileBytes: 1 << 20, HashKey: testKey, HashKeyVersion: 3}
	w, err := Open(cfg)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	if err := w.Append(context.Background(), denied()); err != nil {
		fmt.Println("append:", err)
		os.Exit(2)
	}
	fmt.Println("holding")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
	if err := w.Close(); err != nil {
		os.Exit(2)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot describes every file in dir: name, mode and content hash.
func snapshot(t testing.TB, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	must(t, err)
	var b strings.Builder
	for _, e := range ents {
		fi, err := os.Lstat(filepath.Join(dir, e.Name()))
		must(t, err)
		content := ""
		if fi.Mode().IsRegular() {
			content = fmt.Sprintf("%x", readFile(t, filepath.Join(dir, e.Name())))
		}
		fmt.Fprintf(&b, "%s %v %s\n", e.Name(), fi.Mode(), content)
	}
	return b.String()
}
