// Package bombtest runs a hostile input (a YAML alias bomb, say) against an
// entry point in a child process held to a memory limit and killed after a
// timeout, and checks that the entry point refused it with little work (processor
// time), with a clear error and bounded memory. It is a test helper: only tests import it.
//
// The child is the test binary itself, re-run for the one calling test; in
// the child Refuses runs the entry point and prints what it answered, in the
// parent it starts the child and judges that answer.
package bombtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// AliasBomb is a "billion laughs" YAML document of about 400 bytes: ten
// levels of ten aliases each, 10^10 nodes once expanded. Each line is a
// top-level key (l0 to l10).
func AliasBomb() string {
	var b strings.Builder
	b.WriteString("l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// Budgets a refusal must keep.
const (
	// MaxPeakBytes bounds the child's peak resident memory, the whole test
	// binary included.
	MaxPeakBytes = 100 << 20
	// MaxCPU bounds the processor time the entry point spends (the child's
	// user and system time while it runs, its garbage collection included).
	// Processor time, not the wall clock: it measures the work done, which a
	// busy machine does not stretch the way it stretches elapsed time. The
	// costliest document the YAML loader's default budgets accept costs
	// about 1.2 s of processor time on a two-core CI machine (parse, tree
	// and typed decode, with the collector running beside them); 3 s leaves
	// room for a slower processor, and an expansion the budgets no longer
	// stop costs far more than that (or is killed at Kill).
	MaxCPU = 3 * time.Second
	// Kill is when the parent kills a child that has not finished.
	Kill = 30 * time.Second
	// childEnv names the test a child runs the entry point for.
	childEnv = "REGISTRUM_BOMBTEST_CHILD"
	// addressSpace is the child's hard memory limit (RLIMIT_AS); the Go
	// runtime reserves address space well past what it uses.
	addressSpace = 2 << 30
	// marker starts the child's answer line.
	marker = "BOMBTEST ANSWER: "
)

// Answer is what the entry point answered in the child.
type Answer struct {
	// Err is the refusal's text; empty when the input was accepted.
	Err string `json:"err"`
	// Elapsed is how long the entry point took by the wall clock (reported,
	// not judged).
	Elapsed time.Duration `json:"elapsed"`
	// CPU is the processor time the child spent while the entry point ran.
	CPU time.Duration `json:"cpu"`
	// PeakBytes is the child's peak resident memory (the whole process).
	PeakBytes int64 `json:"-"`
	// Child is set in the child process, where nothing was judged.
	Child bool `json:"-"`
}

// Refuses runs entry as Bounded does and also fails t unless entry returned
// an error containing every one of want (name the file there).
func Refuses(t *testing.T, entry func() error, want ...string) Answer {
	t.Helper()
	a := Bounded(t, entry)
	if a.Child {
		return a
	}
	if a.Err == "" {
		t.Fatal("the entry point accepted the input")
	}
	for _, w := range want {
		if !strings.Contains(a.Err, w) {
			t.Errorf("the refusal %q does not contain %q", a.Err, w)
		}
	}
	return a
}

// Bounded runs entry in a child process limited to 2 GiB of address space
// (RLIMIT_AS; not under the race detector, which reserves more) and 256 MiB
// of Go heap (GOMEMLIMIT), killed after Kill, and fails t unless entry
// answered within MaxCPU of processor time with the child's peak resident memory under
// MaxPeakBytes (the time and memory checks are skipped under the race
// detector). It returns the answer. In the child it runs entry, prints the
// answer and returns an Answer with Child set: the calling test must do
// nothing after Bounded that the child should not do.
func Bounded(t *testing.T, entry func() error) Answer {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		if !raceEnabled {
			lim := syscall.Rlimit{Cur: addressSpace, Max: addressSpace}
			if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
				t.Fatalf("setrlimit: %v", err)
			}
		}
		cpu0, start := cpuTime(t), time.Now()
		err := entry()
		a := Answer{Elapsed: time.Since(start), CPU: cpuTime(t) - cpu0}
		if err != nil {
			a.Err = err.Error()
		}
		b, _ := json.Marshal(a)
		fmt.Printf("\n%s%s\n", marker, b)
		return Answer{Child: true}
	}
	ctx, cancel := context.WithTimeout(context.Background(), Kill)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+runPattern(t.Name()), "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name(), "GOMEMLIMIT=256MiB")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the child did not answer within %v and was killed:\n%s", Kill, out)
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, line, ok := strings.Cut(string(out), marker)
	if !ok {
		t.Fatalf("the child printed no answer:\n%s", out)
	}
	line, _, _ = strings.Cut(line, "\n")
	var a Answer
	if err := json.Unmarshal([]byte(line), &a); err != nil {
		t.Fatalf("the child's answer %q: %v", line, err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		a.PeakBytes = ru.Maxrss << 10 // kilobytes on Linux
	}
	t.Logf("answered in %v (%v of processor time), child peak %.1f MiB: %s", a.Elapsed, a.CPU, float64(a.PeakBytes)/(1<<20), a.Err)
	if raceEnabled {
		return a
	}
	if a.CPU > MaxCPU {
		t.Errorf("the entry point took %v of processor time, more than %v", a.CPU, MaxCPU)
	}
	if a.PeakBytes == 0 {
		t.Error("the child's peak memory is unknown")
	} else if a.PeakBytes > MaxPeakBytes {
		t.Errorf("the child's peak memory was %d bytes, more than %d", a.PeakBytes, MaxPeakBytes)
	}
	return a
}

// cpuTime is the processor time this process has used so far.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runPattern is the -test.run pattern matching exactly the test named name
// (subtests included).
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// SquareBomb is a YAML document of about 5n bytes that expands to about n²
// nodes: one anchored sequence of n items and a sequence of n aliases to
// it. Sized just under a node budget, it is the costliest document the
// budget lets through.
func SquareBomb(n int) string {
	var b strings.Builder
	b.WriteString("x: &a [")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("l")
	}
	b.WriteString("]\ny: [")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("*a")
	}
	b.WriteString("]\n")
	return b.String()
}
