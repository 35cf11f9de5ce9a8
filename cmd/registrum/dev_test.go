package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

type devRun struct {
	cmd    *exec.Cmd
	output strings.Builder
	// stderr is complete once the process has been waited for.
	stderr strings.Builder
}

// startDev runs `registrum dev` from the repository root and waits for its
// next steps.
func startDev(t *testing.T, data string, args ...string) *devRun {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"dev", "--data", data, "--port", "0", "--issuer-port", "0", "--desk-port", "0", "--verifier-port", "0"}, args...)...)
	cmd.Dir = filepath.Join("..", "..")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &devRun{cmd: cmd}
	stderr := &r.stderr
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			r.output.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "Press Ctrl-C") {
				done <- nil
				io.Copy(io.Discard, stdout)
				return
			}
		}
		done <- io.ErrUnexpectedEOF
	}()
	select {
	case err := <-done:
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("registrum dev ended before it was ready:\n%s\n%s", r.output.String(), stderr.String())
		}
	case <-time.After(120 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("registrum dev not ready after 120s:\n%s\n%s", r.output.String(), stderr.String())
	}
	// A cluster dev had to put outside the data folder goes with the test.
	if dir := clusterDirOf(t, data); !strings.HasPrefix(dir, data+string(filepath.Separator)) {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	return r
}

// stop sends sig and checks that dev exits cleanly with no postgres left.
func (r *devRun) stop(t *testing.T, data string, sig syscall.Signal) {
	t.Helper()
	pid := postmasterPID(t, data)
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- r.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("registrum dev exited with %v after %v:\n%s", err, sig, r.stderr.String())
		}
	case <-time.After(60 * time.Second):
		r.cmd.Process.Kill()
		t.Fatalf("registrum dev did not stop after %v", sig)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("postmaster %d outlived registrum dev", pid)
	}
}

func postmasterPID(t *testing.T, data string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(clusterDirOf(t, data), "data", "postmaster.pid"))
	if err != nil {
		t.Fatalf("no postmaster.pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// shellWords splits a printed command line as a POSIX shell would for the
// quoting the next steps use: single quotes, double quotes with \$ and \".
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			if c == '"' {
				quote = 0
			} else if c == '\\' && i+1 < len(line) && strings.ContainsRune(`$"\`, rune(line[i+1])) {
				i++
				cur.WriteByte(line[i])
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// printed returns the lines of the next steps that start with prefix.
func printed(out, prefix string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return lines
}

// printedToken runs the printed `export TOKEN=$(registrum token …)` command.
func printedToken(t *testing.T, run *devRun, out string) string {
	t.Helper()
	exportLine := printed(out, "export TOKEN=$(")
	if len(exportLine) != 1 {
		run.cmd.Process.Kill()
		t.Fatalf("no token export line in:\n%s", out)
	}
	tokenCmd := shellWords(strings.TrimSuffix(strings.TrimPrefix(exportLine[0], "export TOKEN=$("), ")"))
	tok, err := exec.Command(binary, tokenCmd[1:]...).Output()
	if err != nil || strings.Count(strings.TrimSpace(string(tok)), ".") != 2 {
		run.cmd.Process.Kill()
		t.Fatalf("the printed token command failed: %v %s", err, tok)
	}
	return strings.TrimSpace(string(tok))
}
