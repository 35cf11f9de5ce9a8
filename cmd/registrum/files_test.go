package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tree lists every path under dir with its size and mode, to show that a
// refused command changed nothing.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		lines = append(lines, p+" "+info.Mode().String()+" "+strconv.FormatInt(info.Size(), 10)+" "+info.ModTime().String())
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func compileTo(t *testing.T, project, out string, extra ...string) (string, error) {
	t.Helper()
	args := append([]string{"compile", project, "--out", out}, extra...)
	b, err := exec.Command(binary, args...).CombinedOutput()
	return string(b), err
}

func TestCompileNeverReplacesAnotherRegistrysPackage(t *testing.T) {
	out := filepath.Join(t.TempDir(), "pkg")
	if b, err := compileTo(t, "../../project/testdata/minimal", out); err != nil {
		t.Fatalf("first compile: %v\n%s", err, b)
	}
	// The same project again replaces its own package.
	if b, err := compileTo(t, "../../project/testdata/minimal", out); err != nil {
		t.Fatalf("recompiling the same project: %v\n%s", err, b)
	}
	before := tree(t, out)
	b, err := compileTo(t, "../../examples/childsupport", out)
	if err == nil || !strings.Contains(b, `registry "parcels"`) || !strings.Contains(b, "--force") {
		t.Fatalf("compiling another registry over a package: %v\n%s", err, b)
	}
	if after := tree(t, out); after != before {
		t.Fatalf("the refused compile changed the folder:\n%s\nwas\n%s", after, before)
	}
	if b, err := compileTo(t, "../../examples/childsupport", out, "--force"); err != nil {
		t.Fatalf("--force: %v\n%s", err, b)
	}
	pkg, err := os.ReadFile(filepath.Join(out, "package.json"))
	if err != nil || !strings.Contains(string(pkg), `"childsupport"`) {
		t.Fatalf("--force did not replace the package: %v", err)
	}

	// A folder of other files is never replaced, even with --force.
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o644)
	for _, force := range [][]string{nil, {"--force"}} {
		if b, err := compileTo(t, "../../project/testdata/minimal", other, force...); err == nil {
			t.Fatalf("compile %v over a folder of notes succeeded:\n%s", force, b)
		}
		if got, _ := os.ReadFile(filepath.Join(other, "notes.txt")); string(got) != "mine" {
			t.Fatal("the user's file was changed")
		}
	}
}

// runDevBriefly runs `registrum dev` and returns its output, for starts
// that must be refused before serving.
func runDevBriefly(t *testing.T, data string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, "dev", "--data", data, "--port", "0", "--issuer-port", "0", "--desk-port", "0", "--verifier-port", "0")
	cmd.Dir = filepath.Join("..", "..")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("registrum dev did not stop:\n%s", out)
	}
	return string(out), err
}

func TestDevRefusesAFolderItDidNotMakeAndChangesNothing(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"notes":   {"notes.txt": "mine", "sub/config.yaml": "a: 1"},
		"package": {"package.json": "{}", "openapi.json": "{}"},
		// The names dev uses, but no marker and no configuration of its own.
		"lookalike": {"registrum.yaml": "version: 1\n", "secrets/host-key": "k"},
	} {
		t.Run(name, func(t *testing.T) {
			data := t.TempDir()
			for p, c := range files {
				os.MkdirAll(filepath.Dir(filepath.Join(data, p)), 0o755)
				os.WriteFile(filepath.Join(data, p), []byte(c), 0o644)
			}
			before := tree(t, data)
			out, err := runDevBriefly(t, data)
			if err == nil || !strings.Contains(out, "did not create") {
				t.Fatalf("dev in a foreign folder: %v\n%s", err, out)
			}
			for p := range files {
				if !strings.Contains(out, strconv.Quote(strings.SplitN(p, "/", 2)[0])) {
					t.Errorf("the refusal does not name %s:\n%s", p, out)
				}
			}
			if after := tree(t, data); after != before {
				t.Fatalf("dev changed a folder it refused:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

func TestSecondDevOnOneFolderChangesNothingAndNamesTheHolder(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	run := startDev(t, data)
	before := tree(t, data)
	out, err := runDevBriefly(t, data)
	if err == nil || !strings.Contains(out, "in use") || !strings.Contains(out, "pid "+strconv.Itoa(run.cmd.Process.Pid)) {
		t.Fatalf("a second dev on the same folder: %v\n%s", err, out)
	}
	if after := tree(t, data); after != before {
		t.Fatalf("the second dev changed the folder:\n%s\nwas\n%s", after, before)
	}
	run.stop(t, data, syscall.SIGTERM)
}

func TestDevStopsWhenItsPostgresDies(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	run := startDev(t, data)
	pid := postmasterPID(t, data)
	exited := make(chan error, 1)
	go func() { exited <- run.cmd.Wait() }()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err == nil {
			t.Fatal("registrum dev exited 0 after its PostgreSQL died")
		}
	case <-time.After(30 * time.Second):
		run.cmd.Process.Kill()
		t.Fatal("registrum dev kept running after its PostgreSQL died")
	}
	if !strings.Contains(run.stderr.String(), "PostgreSQL (pid "+strconv.Itoa(pid)+") stopped unexpectedly") {
		t.Fatalf("no clear message:\n%s", run.stderr.String())
	}
}

// clusterDirOf returns the private cluster's folder of a dev data folder.
func clusterDirOf(t *testing.T, data string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "registrum-dev.json"))
	if err != nil {
		t.Fatalf("no dev marker: %v", err)
	}
	var m struct {
		ClusterDir string `json:"clusterDir"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.ClusterDir != "" {
		return m.ClusterDir
	}
	return filepath.Join(data, "postgres")
}
