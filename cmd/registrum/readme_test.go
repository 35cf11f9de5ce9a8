package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Limits of the README's commands on a fresh clone, each far above what the
// work needs: the build compiles the module's own packages again (their
// dependencies come from the module and build caches), dev starts a
// PostgreSQL cluster, the tour runs every step.
const (
	readmeBuildLimit = 10 * time.Minute
	readmeDevLimit   = 2 * time.Minute
	readmeStopLimit  = time.Minute
)

// readmeCommands are the commands of the README's "Start" section that a
// newcomer types, in the order the README gives them.
type readmeCommands struct {
	build, dev, tour string
	// bin is the binary the build writes, as the README names it.
	bin string
}

// TestReadmeOnAFreshClone runs the README's quick start as a newcomer would:
// on a fresh clone of this repository in a temporary folder, the build
// command, then dev in the background until it says "Press Ctrl-C", then
// the tour to its end, then Ctrl-C (SIGINT to dev's process group, as a
// terminal sends it), after which dev has exited 0, its PostgreSQL is gone
// and its data folder is kept. Every command is the README's line run
// through sh, with two additions the README's reader does not need: dev
// listens on free ports (--port 0 …, so that the test never meets another
// service on 8080–8083) and the tour runs with --no-pause.
//
// The clone is of HEAD; the working tree's changes (files changed, deleted,
// or new and not ignored) are laid over it, so that a change is tested
// before it is committed. On CI's clean checkout there are none. An ignored
// file (bin/, .registrum-dev/) is never copied: a newcomer's clone lacks it.
func TestReadmeOnAFreshClone(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: no repository to clone")
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("not in a git work tree: no repository to clone")
	}
	repo := strings.TrimSpace(string(top))
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := parseReadmeStart(t, string(readme))

	// A short folder: the cluster's socket path must fit in its limit.
	root, err := os.MkdirTemp("", "rgreadme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	clone := filepath.Join(root, "registrum")
	if out, err := exec.Command("git", "clone", "--quiet", repo, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone %s: %v\n%s", repo, err, out)
	}
	overlayWorkingTree(t, repo, clone)

	// The build.
	start := time.Now()
	if out, err := readmeShell(t, clone, cmds.build, readmeBuildLimit); err != nil {
		t.Fatalf("%s: %v\n%s", cmds.build, err, out)
	}
	t.Logf("%s: %v", cmds.build, time.Since(start).Round(time.Second))

	// dev, in the background.
	dev := exec.Command("sh", "-c", "exec "+cmds.dev+" --port 0 --issuer-port 0 --desk-port 0 --verifier-port 0")
	dev.Dir = clone
	dev.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := dev.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var summary, stderr strings.Builder
	dev.Stderr = &stderr
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	stopped, pid := false, 0
	// On a failure before the stop below: Ctrl-C, then kill what is left
	// (dev's PostgreSQL runs in a process group of its own).
	t.Cleanup(func() {
		if stopped {
			return
		}
		syscall.Kill(-dev.Process.Pid, syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(readmeStopLimit):
			syscall.Kill(-dev.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); pid != 0 && err == nil && strings.HasPrefix(string(comm), "postgres") {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	ready := make(chan bool, 2)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			summary.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "Press Ctrl-C") {
				ready <- true
				io.Copy(io.Discard, stdout)
				break
			}
		}
		ready <- false
		exited <- dev.Wait()
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("%s ended before it was ready:\n%s\n%s", cmds.dev, &summary, stderr.String())
		}
	case <-time.After(readmeDevLimit):
		t.Fatalf("%s not ready after %v:\n%s", cmds.dev, readmeDevLimit, &summary)
	}
	data := filepath.Join(clone, ".registrum-dev")
	if dir := clusterDirOf(t, data); !strings.HasPrefix(dir, data+string(filepath.Separator)) {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	if !strings.Contains(summary.String(), "  "+cmds.tour+"\n") {
		t.Errorf("dev's summary does not name the README's tour command %q:\n%s", cmds.tour, &summary)
	}
	pid = postmasterPID(t, data)

	// The tour, to its end.
	if out, err := readmeShell(t, clone, cmds.tour+" --no-pause", tourLimit); err != nil || !strings.Contains(out, "━━ Step "+strconv.Itoa(len(tourSteps))+" of "+strconv.Itoa(len(tourSteps))+": ") {
		t.Errorf("%s --no-pause: %v\n%s", cmds.tour, err, out)
	}

	// Ctrl-C.
	if err := syscall.Kill(-dev.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("%s exited with %v after Ctrl-C:\n%s", cmds.dev, err, stderr.String())
		}
	case <-time.After(readmeStopLimit):
		t.Fatalf("%s did not stop within %v of Ctrl-C", cmds.dev, readmeStopLimit)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("dev's PostgreSQL (pid %d) outlived it", pid)
	}
	for _, kept := range []string{"registrum-dev.json", filepath.Join(clusterDirOf(t, data), "data", "PG_VERSION")} {
		if !filepath.IsAbs(kept) {
			kept = filepath.Join(data, kept)
		}
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("dev did not keep its data folder: %v", err)
		}
	}
}

// parseReadmeStart returns the commands of the README's "Start" section: its
// sh blocks, comments dropped. `go run` lines (the slower alternative to the
// build) and `go test` lines are not part of the quick start; any other line
// the test does not know fails it, so that a step added to the README is
// added here too.
func parseReadmeStart(t *testing.T, readme string) readmeCommands {
	t.Helper()
	section := regexp.MustCompile(`(?ms)^## Start\n(.*?)(?:^## |\z)`).FindStringSubmatch(readme)
	if section == nil {
		t.Fatal("README.md has no Start section")
	}
	var c readmeCommands
	var lines []string
	for _, block := range regexp.MustCompile("(?ms)^```sh\n(.*?)^```").FindAllStringSubmatch(section[1], -1) {
		for _, l := range strings.Split(block[1], "\n") {
			if i := strings.Index(l, "#"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
	}
	for _, l := range lines {
		w := strings.Fields(l)
		switch {
		case len(w) >= 2 && w[0] == "go" && (w[1] == "run" || w[1] == "test"):
		case len(w) >= 2 && w[0] == "go" && w[1] == "build":
			for i := range w[:len(w)-1] {
				if w[i] == "-o" {
					c.bin = w[i+1]
				}
			}
			c.build = l
		case c.bin != "" && w[0] == c.bin && len(w) >= 2 && w[1] == "dev":
			c.dev = l
		case c.bin != "" && w[0] == c.bin && len(w) >= 2 && w[1] == "tour":
			c.tour = l
		default:
			t.Fatalf("README.md's Start section has a command this test does not run: %q", l)
		}
	}
	if c.build == "" || c.bin == "" || c.dev == "" || c.tour == "" {
		t.Fatalf("README.md's Start section lacks a build (with -o), a dev or a tour command of the built binary: %q", lines)
	}
	return c
}

// overlayWorkingTree copies over clone the files of repo's working tree that
// differ from HEAD and those git does not track but does not ignore, and
// removes those deleted there. It only reads repo (no index refresh).
func overlayWorkingTree(t *testing.T, repo, clone string) {
	t.Helper()
	var names []string
	for _, args := range [][]string{
		{"diff", "--no-ext-diff", "--no-renames", "--name-only", "-z", "HEAD"},
		{"ls-files", "-z", "--others", "--exclude-standard"},
	} {
		git := exec.Command("git", args...)
		git.Dir = repo
		git.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
		out, err := git.Output()
		if err != nil {
			t.Fatalf("git %s in %s: %v", args[0], repo, err)
		}
		names = append(names, strings.Split(string(out), "\x00")...)
	}
	for _, name := range names {
		if name == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(repo, name))
		if errors.Is(err, os.ErrNotExist) {
			os.Remove(filepath.Join(clone, name))
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join(repo, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(clone, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(clone, name), b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// readmeShell runs line through sh -c in dir under limit.
func readmeShell(t *testing.T, dir, line string, limit time.Duration) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s did not end within %v:\n%s", line, limit, out)
	}
	return string(out), err
}
