package soak

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	metrics string // base URL of its metrics listener
	logPath string
	// warmStart is closed when the traffic starts; warmAt then says when
	// an incarnation ready at the given time is warmed up (its footprint's
	// first sample).
	warmStart <-chan struct{}
	warmAt    func(ready time.Time) time.Time

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	exitCode *int     // the incarnation's exit code, once exited is closed
	samples  []sample // one per incarnation: at start and at its end
}

// sample is a process's open files, resident memory and threads, and its
// goroutines and heap in use (its metrics listener) after warm-up and at
// the end of the run; -1 where nothing was read.
type sample struct {
	PID                           int
	FDStart, FDEnd                int
	RSSKBStart, RSSKBEnd          int
	ThreadsStart, ThreadsEnd      int
	WarmGoroutines, EndGoroutines int
	WarmHeap, EndHeap             int64
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
	code := new(int)
	go func() {
		cmd.Wait()
		*code = cmd.ProcessState.ExitCode()
		log.Close()
		close(exited)
	}()
	p.mu.Lock()
	p.cmd, p.exited, p.exitCode = cmd, exited, code
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
	ready := time.Now()
	fd, rss, threads := procStats(cmd.Process.Pid)
	p.mu.Lock()
	p.samples = append(p.samples, sample{PID: cmd.Process.Pid, FDStart: fd, RSSKBStart: rss, ThreadsStart: threads, FDEnd: -1, RSSKBEnd: -1, ThreadsEnd: -1,
		WarmGoroutines: -1, EndGoroutines: -1, WarmHeap: -1, EndHeap: -1})
	idx := len(p.samples) - 1
	p.mu.Unlock()
	if p.metrics != "" && p.warmStart != nil {
		go func() {
			select {
			case <-exited:
				return
			case <-p.warmStart:
			}
			select {
			case <-exited:
				return
			case <-time.After(time.Until(p.warmAt(ready))):
			}
			g, heap, err := p.footprint()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.samples[idx].WarmGoroutines, p.samples[idx].WarmHeap = g, heap
			p.mu.Unlock()
		}()
	}
	return nil
}

// footprint reads go_goroutines and go_memstats_heap_inuse_bytes from the
// process's metrics listener.
func (p *proc) footprint() (goroutines int, heap int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", p.metrics+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("soak: %s metrics: %w", p.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("soak: %s metrics: %d %v", p.name, resp.StatusCode, err)
	}
	got := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if ok && (name == "go_goroutines" || name == "go_memstats_heap_inuse_bytes") {
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				return 0, 0, fmt.Errorf("soak: %s metrics: %s %q: %w", p.name, name, value, err)
			}
			got[name] = v
		}
	}
	g, okG := got["go_goroutines"]
	h, okH := got["go_memstats_heap_inuse_bytes"]
	if !okG || !okH {
		return 0, 0, fmt.Errorf("soak: %s metrics: go_goroutines or go_memstats_heap_inuse_bytes missing", p.name)
	}
	return int(g), int64(h), nil
}

// endFootprint samples the current incarnation's goroutines and heap at
// the end of the run.
func (p *proc) endFootprint() error {
	g, heap, err := p.footprint()
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.samples) > 0 {
		s := &p.samples[len(p.samples)-1]
		s.EndGoroutines, s.EndHeap = g, heap
	}
	return nil
}

// term sends SIGTERM to the current incarnation.
func (p *proc) term() error {
	p.endSample()
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("soak: %s is not running", p.name)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("soak: SIGTERM %s: %w", p.name, err)
	}
	return nil
}

// waitExit waits at most within for the current incarnation to exit and
// returns its exit code (-1 when a signal ended it).
func (p *proc) waitExit(within time.Duration) (int, error) {
	p.mu.Lock()
	exited, code := p.exited, p.exitCode
	p.mu.Unlock()
	select {
	case <-exited:
		return *code, nil
	case <-time.After(within):
		return 0, fmt.Errorf("soak: %s still runs %v after SIGTERM (log %s)", p.name, within, p.logPath)
	}
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
