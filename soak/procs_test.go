package soak

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// proc is one registrum process (serve or worker) that the harness kills
// and restarts under the same configuration and address.
type proc struct {
	name    string
	binary  string
	args    []string
	base    string // http base URL of a serve process, "" for the worker
	logPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	samples []sample // one per incarnation: at start and at its end
}

// sample is a process's open files, resident memory and threads.
type sample struct {
	PID                      int
	FDStart, FDEnd           int
	RSSKBStart, RSSKBEnd     int
	ThreadsStart, ThreadsEnd int
}

// freePort returns a loopback port free at the time of the call.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start starts the process and waits until it is ready: /ready answers 200
// for serve, the "workers running" line for the worker.
func (p *proc) start(t *testing.T, within time.Duration) error {
	t.Helper()
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("soak: open %s: %w", p.logPath, err)
	}
	fmt.Fprintf(log, "\n=== soak: start %s at %s\n", p.name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(p.binary, p.args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("soak: start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	deadline := time.Now().Add(within)
	for {
		select {
		case <-exited:
			return fmt.Errorf("soak: %s exited during start-up (log %s)", p.name, p.logPath)
		default:
		}
		if p.ready() {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("soak: %s not ready within %v (log %s)", p.name, within, p.logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fd, rss, threads := procStats(cmd.Process.Pid)
	p.mu.Lock()
	p.samples = append(p.samples, sample{PID: cmd.Process.Pid, FDStart: fd, RSSKBStart: rss, ThreadsStart: threads, FDEnd: -1, RSSKBEnd: -1, ThreadsEnd: -1})
	p.mu.Unlock()
	return nil
}

// ready reports whether the current incarnation is ready.
func (p *proc) ready() bool {
	if p.base == "" {
		b, _ := os.ReadFile(p.logPath)
		i := strings.LastIndex(string(b), "=== soak: start")
		return i >= 0 && strings.Contains(string(b[i:]), "record host workers running")
	}
	return p.readyStatus() == http.StatusOK
}

// readyStatus returns what a serve process's /ready answers (0: nothing).
func (p *proc) readyStatus() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", p.base+"/ready", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// endSample records the current incarnation's figures before it ends.
func (p *proc) endSample() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || len(p.samples) == 0 {
		return
	}
	s := &p.samples[len(p.samples)-1]
	s.FDEnd, s.RSSKBEnd, s.ThreadsEnd = procStats(p.cmd.Process.Pid)
}

// kill9 sends SIGKILL and waits for the process to be gone.
func (p *proc) kill9() {
	p.endSample()
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-exited
}

// alive reports whether the current incarnation still runs.
func (p *proc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// procStats reads a process's open file count, VmRSS (kB) and thread
// count; -1 for what cannot be read.
func procStats(pid int) (fds, rssKB, threads int) {
	fds, rssKB, threads = -1, -1, -1
	if entries, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd")); err == nil {
		fds = len(entries)
	}
	if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				rssKB, _ = strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			}
			if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				threads, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
	}
	return fds, rssKB, threads
}
