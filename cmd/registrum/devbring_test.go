package main

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startShell runs a printed `registrum dev` command line through sh, as a
// user pasting it would, from the folder dev is started from, and waits for
// its summary. sh execs it, so the devRun's process is dev itself.
func startShell(t *testing.T, data, line string) *devRun {
	t.Helper()
	cmd := exec.Command("sh", "-c", "exec "+line)
	cmd.Dir = filepath.Join("..", "..")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &devRun{cmd: cmd}
	cmd.Stderr = &r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			r.output.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "Press Ctrl-C") {
				ready <- true
				io.Copy(io.Discard, stdout)
				return
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			cmd.Wait()
			t.Fatalf("%s ended before it was ready:\n%s\n%s", line, r.output.String(), r.stderr.String())
		}
	case <-time.After(120 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%s not ready after 120s", line)
	}
	// A cluster dev had to put outside the data folder goes with the test.
	if dir := clusterDirOf(t, data); !strings.HasPrefix(dir, data+string(filepath.Separator)) {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	return r
}

// devFails runs `registrum dev` with args, expecting it to stop with an
// error, and returns what it printed.
func devFails(t *testing.T, data string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"dev", "--data", data, "--port", "0", "--issuer-port", "0"}, args...)...)
	cmd.Dir = filepath.Join("..", "..")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("registrum dev %s did not stop", strings.Join(args, " "))
	}
	if err == nil {
		t.Fatalf("registrum dev %s succeeded:\n%s", strings.Join(args, " "), out)
	}
	return string(out)
}

// TestDevBringsYourOwn: --review-config names the project's review
// authority (dev runs no desk and does not listen on the desk port),
// --own-verifiers leaves the package's http verifier to the operator's
// service (dev runs no scanner on the verifier port), and a secret those
// files name that the data folder's secrets lack is refused before
// anything starts, naming the file and line, not the generated
// registrum.yaml.
func TestDevBringsYourOwn(t *testing.T) {
	root, err := os.MkdirTemp("", "rgdevown")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	data := filepath.Join(root, "data")
	// The desk and verifier ports are taken: dev must not need them.
	taken := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
	deskPort, verifierPort := taken(), taken()
	review := filepath.Join(root, "review.yaml")
	os.WriteFile(review, []byte("# My authority.\nreviewAuthorities:\n  casework:\n    endpoint: http://127.0.0.1:1/review\n    profile: mine\n    producerId: childsupport\n    staticTokenRef: secret:file/casework-token\n"), 0o600)
	events := filepath.Join(root, "events.yaml")
	os.WriteFile(events, []byte("eventDestinations:\n  casework-events:\n    url: http://127.0.0.1:1/events\n    hmacSha256KeyRef: secret:file/events-key\n    classificationCeiling: internal\n    network: loopback\n"), 0o600)
	args := []string{"--desk-port", deskPort, "--verifier-port", verifierPort, "--review-config", review, "--own-verifiers", "--event-destinations", events}

	out := devFails(t, data, args...)
	if !strings.Contains(out, "--event-destinations: "+events+":4") || !strings.Contains(out, "hmacSha256KeyRef") || strings.Contains(out, "registrum.yaml") {
		t.Fatalf("a missing event key:\n%s", out)
	}
	secrets := filepath.Join(data, "secrets")
	os.MkdirAll(secrets, 0o700)
	os.WriteFile(filepath.Join(secrets, "events-key"), make([]byte, 32), 0o600)
	out = devFails(t, data, args...)
	if !strings.Contains(out, "--review-config: "+review+":7") || !strings.Contains(out, "staticTokenRef") || strings.Contains(out, "registrum.yaml") {
		t.Fatalf("a missing review secret:\n%s", out)
	}
	os.WriteFile(filepath.Join(secrets, "casework-token"), []byte("a-token\n"), 0o600)
	os.WriteFile(filepath.Join(secrets, "eicar-scanner-token"), []byte("x"), 0o600)

	run := startDev2(t, data, args...)
	summary := run.output.String()
	for _, absent := range []string{"review desk", "scanner "} {
		if strings.Contains(summary, absent) {
			t.Errorf("dev ran its own %s:\n%s", absent, summary)
		}
	}
	if !strings.Contains(summary, "the review authorities and executors of "+review) {
		t.Errorf("the summary does not name the review configuration:\n%s", summary)
	}
	cfg, _ := os.ReadFile(filepath.Join(data, "registrum.yaml"))
	if !strings.Contains(string(cfg), "staticTokenRef: secret:file/casework-token") || strings.Contains(string(cfg), "registrum-host") {
		t.Errorf("registrum.yaml does not carry the own authority alone:\n%s", cfg)
	}
	run.stop(t, data, syscall.SIGTERM)
}

// startDev2 is startDev without its port flags, which args give.
func startDev2(t *testing.T, data string, args ...string) *devRun {
	t.Helper()
	line := binary + " dev --data " + data + " --port 0 --issuer-port 0"
	for _, a := range args {
		line += " '" + a + "'"
	}
	return startShell(t, data, line)
}
