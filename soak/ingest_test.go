package soak

import (
	"bytes"
	"context"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrum/registrum/issuer/issuertest"
)

// The ingestion the harness drives: one run per fault cycle, each of
// ingestRows rows of the import_row entity (testdata/registry.yaml), sent
// by the real `registrum ingest` through the balancer.
const (
	ingestEntity = "import_row"
	ingestRoute  = "import-rows"
	// ingestProfile names its caller (principalClaim): a run belongs to it.
	ingestProfile = "importer"
	ingestRows    = 2000
	// ingestChunkItems is import_row's batch.maximumItems: the rows are
	// small, so every chunk but the last holds that many.
	ingestChunkItems = 20
	// ingestSpread is the share of its fault cycle a run's chunks are
	// spread over, so that the run goes on across the cycle's faults.
	ingestSpread = 0.8
	// ingestKillAt is when, as a share of its spread, the importer of a
	// run is killed with SIGKILL once, and resumed with --run.
	ingestKillAt = 0.4
	// ingestDropAt is when, as a share of its spread, the balancer cuts
	// the answer of the next chunk that commits: a lost answer the
	// importer must resubmit, and the host answer with its stored receipt.
	ingestDropAt = 0.2
	// ingestFinishWithin bounds how long the harness waits for a run
	// after the traffic stopped (chunks are no longer paced then).
	ingestFinishWithin = 3 * time.Minute
)

// runOpened is the line `registrum ingest` prints when it opens a run.
var runOpened = regexp.MustCompile(`(?m)^run ([0-9a-f-]{36}) opened$`)

// balancer stands in front of the two hosts for the importer, as a load
// balancer would: each request goes to the next host in turn, an upstream
// that does not answer cuts the importer's connection (a lost answer), and
// every exchange is recorded as an operation of the run. It also paces
// chunk submissions (gap apart) so that a run spreads over its fault
// cycle, and, when drop is set, cuts the answer of the next chunk that
// committed. It finishes an upstream exchange even when the importer has
// gone (killed), as a proxy does.
type balancer struct {
	h       *harness
	next    atomic.Int64
	gap     atomic.Int64 // time.Duration between chunk submissions; 0 after the traffic
	drop    atomic.Bool  // cut the answer of the next committed chunk
	dropped atomic.Int64 // answers of committed chunks cut
	mu      sync.Mutex
	at      time.Time // when the next chunk may go
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	kind := "ingest-read"
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chunks"):
		kind = "ingest-chunk"
		b.pace()
	case r.Method == http.MethodPost:
		kind = "ingest-open"
	}
	host := int(b.next.Add(1)) % len(b.h.hosts)
	op := &Op{Kind: kind}
	b.h.record(op)
	a := Attempt{Host: host, At: time.Now()}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), writeRetryFor)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, b.h.hosts[host].base+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	for _, k := range []string{"Authorization", "Content-Type", "Accept", "Traceparent"} {
		if v := r.Header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := b.h.http.Do(req)
	var rb []byte
	if err == nil {
		rb, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	a.Latency = time.Since(a.At)
	if err != nil {
		a.Err = err.Error()
	} else {
		a.Status = resp.StatusCode
		a.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	}
	b.h.mu.Lock()
	op.Attempts = append(op.Attempts, a)
	b.h.mu.Unlock()
	if err != nil {
		panic(http.ErrAbortHandler) // the importer sees no answer
	}
	if kind == "ingest-chunk" && resp.StatusCode == http.StatusOK && !a.Replayed && b.drop.CompareAndSwap(true, false) {
		b.dropped.Add(1)
		panic(http.ErrAbortHandler) // committed, and the answer lost
	}
	for _, k := range []string{"Content-Type", "Idempotent-Replayed", "ETag", "Location"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(rb)
}

// pace holds a chunk submission until gap after the previous one.
func (b *balancer) pace() {
	b.mu.Lock()
	wait := time.Until(b.at)
	b.at = maxTime(b.at, time.Now()).Add(time.Duration(b.gap.Load()))
	b.mu.Unlock()
	for end := time.Now().Add(wait); time.Now().Before(end) && b.gap.Load() > 0; {
		time.Sleep(min(time.Until(end), 100*time.Millisecond))
	}
}

// unpace lets every chunk go at once (the traffic stopped).
func (b *balancer) unpace() {
	b.gap.Store(0)
	b.mu.Lock()
	b.at = time.Time{}
	b.mu.Unlock()
}

// importer is how the harness runs `registrum ingest`: the flags an
// operator gives, the token obtained with the client's key.
type importer struct {
	binary, url, keyFile, tokenURL string
}

// ingestReport is what one driven ingestion did, for the summary.
type ingestReport struct {
	rows, launches int
	killed         bool
	took           time.Duration
	err            string
}

// ingestAll drives one ingestion run per fault cycle, each started at its
// cycle's beginning and paced over ingestSpread of it.
func (h *harness) ingestAll(imp importer, start time.Time, d time.Duration) {
	cycles := faultCycles(d)
	span := d / time.Duration(cycles)
	for k := range cycles {
		time.Sleep(time.Until(start.Add(span * time.Duration(k))))
		if h.stopping() {
			return
		}
		h.ingestOne(imp, k, span)
	}
}

// ingestOne writes the input file of run k and imports it with `registrum
// ingest`; the importer is killed once (SIGKILL) part-way and started
// again with --run, and started again likewise whenever it exits with an
// error (a lost answer while opening or reading the run, a host down for
// longer than its --retry-for), as an operator would.
func (h *harness) ingestOne(imp importer, k int, span time.Duration) {
	began := time.Now()
	rng := mrand.New(mrand.NewPCG(uint64(k), uint64(began.UnixNano())))
	in := Ingestion{Entity: ingestEntity}
	var src bytes.Buffer
	for line := 1; line <= ingestRows; line++ {
		code := fmt.Sprintf("ing%d-%d", k, line)
		in.Codes = append(in.Codes, code)
		fmt.Fprintf(&src, `{"operation":"create","data":{"code":%q,"line":%d,"area":%d}}`+"\n", code, line, rng.IntN(1000))
	}
	file := filepath.Join(h.dir, fmt.Sprintf("ingest-%d.jsonl", k))
	rep := &ingestReport{rows: ingestRows}
	h.mu.Lock()
	idx := len(h.ingestions)
	h.ingestions = append(h.ingestions, in)
	h.ingestReports = append(h.ingestReports, rep)
	h.mu.Unlock()
	defer func() { rep.took = time.Since(began) }()
	if err := os.WriteFile(file, src.Bytes(), 0o600); err != nil {
		rep.err = err.Error()
		return
	}
	chunks := (ingestRows + ingestChunkItems - 1) / ingestChunkItems
	if !h.stopping() {
		h.ingest.gap.Store(int64(time.Duration(float64(span) * ingestSpread / float64(chunks))))
	}
	logPath := filepath.Join(h.dir, fmt.Sprintf("ingest-%d.log", k))
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		rep.err = err.Error()
		return
	}
	defer log.Close()
	killAt := began.Add(time.Duration(float64(span) * ingestSpread * ingestKillAt))
	arm := time.AfterFunc(time.Duration(float64(span)*ingestSpread*ingestDropAt), func() { h.ingest.drop.Store(true) })
	defer arm.Stop()
	var runID string
	for {
		args := []string{"ingest", "--url", imp.url, "--route", ingestRoute, "--profile", ingestProfile,
			"--client-id", issuertest.StandardClientID, "--key", imp.keyFile, "--token-url", imp.tokenURL, "--retry-for", "2m"}
		if runID != "" {
			args = append(args, "--run", runID)
		}
		var out bytes.Buffer
		cmd := exec.Command(imp.binary, append(args, file)...)
		w := io.MultiWriter(&out, log) // one writer: exec then writes from one goroutine at a time
		cmd.Stdout, cmd.Stderr = w, w
		fmt.Fprintf(log, "\n=== soak: %s\n", strings.Join(cmd.Args, " "))
		rep.launches++
		if err := cmd.Start(); err != nil {
			rep.err = err.Error()
			return
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var waitErr error
		select {
		case waitErr = <-done:
		case <-time.After(time.Until(killAt)):
			if rep.killed {
				waitErr = <-done
				break
			}
			rep.killed = true
			cmd.Process.Kill()
			waitErr = <-done
			fmt.Fprintf(log, "=== soak: killed the importer (SIGKILL)\n")
		}
		if m := runOpened.FindSubmatch(out.Bytes()); m != nil && runID == "" {
			runID = string(m[1])
			h.mu.Lock()
			h.ingestions[idx].RunID = runID
			h.mu.Unlock()
		}
		if waitErr == nil {
			rep.err = ""
			return
		}
		rep.err = fmt.Sprintf("%v (log %s)", waitErr, logPath)
		if rep.launches >= 20 || (h.stopping() && time.Since(h.trafficEnd()) > ingestFinishWithin) {
			return
		}
		time.Sleep(time.Second)
	}
}

// chunkAnswers counts the chunk submissions the hosts answered 2xx through
// the balancer, and those of them that replayed a committed chunk's
// stored receipt.
func chunkAnswers(ops []*Op) (answered, replayed int) {
	for _, o := range ops {
		if o.Kind == "ingest-chunk" && o.Acked() {
			answered++
			if o.last().Replayed {
				replayed++
			}
		}
	}
	return answered, replayed
}
