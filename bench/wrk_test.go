package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// wrkLoad drives a phase of the performance report from wrk, a load
// generator written in C that runs as its own process: the HTTP client's
// work then costs little of the two cores the host and PostgreSQL share,
// as it would with clients on other machines.
//
// script is a wrk Lua script; it is written to a file with the common
// headers prepended. With REGISTRUM_HOST_BENCH_PROFILE set to a folder, the
// host's CPU profile of the phase is written there as name.pprof.
func wrkLoad(t *testing.T, name, url string, connections int, d time.Duration, token, script string) measured {
	t.Helper()
	bin, err := exec.LookPath("wrk")
	if err != nil {
		t.Fatal("the record host performance report needs wrk as its load generator: apt-get install wrk")
	}
	path := filepath.Join(t.TempDir(), "load.lua")
	head := fmt.Sprintf("wrk.headers[%q] = %q\nwrk.headers[\"Content-Type\"] = \"application/json\"\n", "Authorization", token)
	if err := os.WriteFile(path, []byte(head+script), 0o600); err != nil {
		t.Fatal(err)
	}
	secs := int(d / time.Second)
	if dir := os.Getenv("REGISTRUM_HOST_BENCH_PROFILE"); dir != "" {
		defer startCPUProfile(t, filepath.Join(dir, name+".pprof"))()
	}
	before, dbBefore := processCPU(), databaseCPU()
	// A response slower than wrk's default timeout of 2 s would count as
	// a failure and leave the latency distribution; on a loaded machine it
	// belongs in the p99.
	cmd := exec.Command(bin, "-t1", "-c"+strconv.Itoa(connections), "-d"+strconv.Itoa(secs)+"s", "--timeout", "10s", "--latency", "-s", path, url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("wrk: %v\n%s", err, out)
	}
	m, err := parseWrk(string(out))
	if err != nil {
		t.Fatalf("wrk output: %v\n%s", err, out)
	}
	if m.failures > 0 {
		t.Logf("%s: %d failed requests: %s", name, m.failures, strings.Join(append(wrkNon2xx.FindAllString(string(out), -1), wrkSockErrs.FindAllString(string(out), -1)...), "; "))
	}
	served, db := processCPU()-before, databaseCPU()-dbBefore
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(max(m.ops, 1)) }
	t.Logf("%s: CPU per request: server %.1f µs, PostgreSQL %.1f µs, wrk %.1f µs", name, per(served), per(db), per(cpu))
	return m
}

// startCPUProfile writes this process's CPU profile to path until the
// function it returns is called.
func startCPUProfile(t *testing.T, path string) (stop func()) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("CPU profile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		t.Fatalf("CPU profile %s: %v", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// processCPU is the CPU time this process has used: during a wrk phase,
// that of the server under test.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// databaseCPU is the CPU time (user + system) the PostgreSQL processes of
// the test cluster have used, read from /proc: the postmaster that this
// process started (store/pglocal starts it as a child) and its children,
// or, when there is none (REGISTRUM_TEST_DATABASE_URL names another
// cluster), every postgres process of the machine, other clusters
// included. A backend that ended before the call is counted in its
// postmaster's time of ended children (cutime and cstime, which the
// kernel adds when the postmaster reaps it), so the figure does not fall
// when a backend ends between two readings.
func databaseCPU() time.Duration {
	type proc struct {
		ppid int
		// ticks is the process's own time, children the time of its
		// ended children.
		ticks, children int64
	}
	procs := map[int]proc{}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		open, end := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
		if open < 0 || end < open || string(b[open+1:end]) != "postgres" {
			continue
		}
		f := strings.Fields(string(b[end+2:]))
		if len(f) < 15 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		cut, _ := strconv.ParseInt(f[13], 10, 64)
		cst, _ := strconv.ParseInt(f[14], 10, 64)
		procs[pid] = proc{ppid: ppid, ticks: ut + st, children: cut + cst}
	}
	postmasters := map[int]bool{}
	for pid, pr := range procs {
		if pr.ppid == os.Getpid() {
			postmasters[pid] = true
		}
	}
	var ticks int64
	for pid, pr := range procs {
		if len(postmasters) == 0 || postmasters[pid] || postmasters[pr.ppid] {
			ticks += pr.ticks
		}
		// A postmaster's ended children: the one this process started,
		// or, without it, every postgres process whose parent is none.
		if _, child := procs[pr.ppid]; postmasters[pid] || (len(postmasters) == 0 && !child) {
			ticks += pr.children
		}
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}

var (
	wrkTotal    = regexp.MustCompile(`(\d+) requests in ([0-9.]+)(us|ms|s|m),`)
	wrkPercent  = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	wrkNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkSockErrs = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

// parseWrk reads the totals and latency percentiles of wrk --latency.
func parseWrk(out string) (measured, error) {
	var m measured
	tot := wrkTotal.FindStringSubmatch(out)
	if tot == nil {
		return m, fmt.Errorf("no request total")
	}
	m.ops, _ = strconv.ParseInt(tot[1], 10, 64)
	m.seconds = wrkDuration(tot[2], tot[3]).Seconds()
	for _, p := range wrkPercent.FindAllStringSubmatch(out, -1) {
		d := wrkDuration(p[2], p[3])
		if p[1] == "50" {
			m.p50 = d
		} else {
			m.p99 = d
		}
	}
	if m.p50 == 0 || m.p99 == 0 {
		return m, fmt.Errorf("no latency distribution")
	}
	if n := wrkNon2xx.FindStringSubmatch(out); n != nil {
		m.failures, _ = strconv.ParseInt(n[1], 10, 64)
	}
	if s := wrkSockErrs.FindStringSubmatch(out); s != nil {
		for _, v := range s[1:] {
			n, _ := strconv.ParseInt(v, 10, 64)
			m.failures += n
		}
	}
	m.ops -= m.failures
	return m, nil
}

func wrkDuration(v, unit string) time.Duration {
	f, _ := strconv.ParseFloat(v, 64)
	switch unit {
	case "us":
		return time.Duration(f * float64(time.Microsecond))
	case "ms":
		return time.Duration(f * float64(time.Millisecond))
	case "m":
		return time.Duration(f * float64(time.Minute))
	default:
		return time.Duration(f * float64(time.Second))
	}
}

// wrkPaths is a wrk script that requests GET of paths in turn.
func wrkPaths(paths []string) string {
	var b strings.Builder
	b.WriteString("local paths = {\n")
	for _, p := range paths {
		fmt.Fprintf(&b, "%q,\n", p)
	}
	b.WriteString("}\nlocal i = 0\nrequest = function()\n  i = i % #paths + 1\n  return wrk.format(\"GET\", paths[i])\nend\n")
	return b.String()
}

// wrkCreates is a wrk script that creates items with distinct codes.
func wrkCreates(prefix string) string {
	return fmt.Sprintf(`local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", "/v1/records/items", nil, string.format('{"data":{"code":"%s-%%d","category":"c","amount":%%d}}', n, n))
end
`, prefix)
}

func TestParseWrk(t *testing.T) {
	out := `Running 2s test @ http://127.0.0.1:1/
  1 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.20ms  300.00us   9.00ms   80.00%
  Latency Distribution
     50%    1.10ms
     75%    1.30ms
     90%    1.60ms
     99%    2.50ms
  24000 requests in 2.00s, 10.00MB read
  Non-2xx or 3xx responses: 12
Requests/sec:  12000.00
`
	m, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.ops != 23988 || m.failures != 12 || m.seconds != 2 || m.p50 != 1100*time.Microsecond || m.p99 != 2500*time.Microsecond {
		t.Fatalf("%+v", m)
	}
}
