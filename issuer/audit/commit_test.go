package audit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAppendWaitsForItsWrite holds the commit goroutine before its write and
// checks that Append has not returned; once released, the record is in the file.
func TestAppendWaitsForItsWrite(t *testing.T) {
	cfg := testConfig(t, 1<<20)
	w := mustOpen(t, cfg)
	entered, release := make(chan struct{}), make(chan struct{})
	w.beforeWrite = func(*os.File) { close(entered); <-release }
	e := denied()
	done := make(chan error, 1)
	go func() { done <- w.Append(context.Background(), e) }()
	<-entered
	select {
	case err := <-done:
		t.Fatalf("Append returned (%v) before its record was written", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	must(t, <-done)
	if !bytes.Contains(readFile(t, cfg.Path), []byte(e.OperationID)) {
		t.Fatal("record not in the file after Append returned")
	}
	if w.fileSyncs.Load() != 1 || w.dirSyncs.Load() != 1 {
		t.Fatalf("file fsyncs %d, folder fsyncs %d; want 1 each", w.fileSyncs.Load(), w.dirSyncs.Load())
	}
}

// TestGroupCommit blocks the first batch until 63 more appends are queued and
// checks that they are committed together: two fsyncs for 64 records, every
// caller released only after its own record is in the file.
func TestGroupCommit(t *testing.T) {
	cfg := testConfig(t, 1<<20)
	w := mustOpen(t, cfg)
	const n = 64
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w.beforeWrite = func(*os.File) { once.Do(func() { close(entered); <-release }) }

	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := func(i int) {
		ids[i] = NewOperationID()
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.Append(context.Background(), Entry{OperationID: ids[i], Outcome: OutcomeDenied, Category: "invalid_request"})
			if errs[i] == nil && !bytes.Contains(readFile(t, cfg.Path), []byte(ids[i])) {
				errs[i] = errors.New("returned before its record was in the file")
			}
		}()
	}
	start(0)
	<-entered
	for i := 1; i < n; i++ {
		start(i)
	}
	waitFor(t, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return len(w.pending) == n-1 })
	close(release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if got := w.fileSyncs.Load(); got != 2 {
		t.Fatalf("%d file fsyncs for %d appends in two batches, want 2", got, n)
	}
	if got := w.dirSyncs.Load(); got != 2 {
		t.Fatalf("%d folder fsyncs, want 2", got)
	}
	w.Close()
	if rep := verifyOK(t, cfg); rep.Records != n {
		t.Fatalf("records %d, want %d", rep.Records, n)
	}
}

func TestConcurrentAppendsVerify(t *testing.T) {
	cfg := testConfig(t, 8<<10) // rotates several times
	w := mustOpen(t, cfg)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if err := w.Append(context.Background(), issued(w, g*100+i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	w.Close()
	rep := verifyOK(t, cfg)
	if rep.Records != 320 || len(rep.Sealed) < 3 {
		t.Fatalf("records %d sealed %v", rep.Records, rep.Sealed)
	}
}

// TestCancelWhileQueuedWritesNothing cancels an append still waiting behind a
// blocked batch: it returns the context error and its record never appears.
func TestCancelWhileQueuedWritesNothing(t *testing.T) {
	cfg := testConfig(t, 1<<20)
	w := mustOpen(t, cfg)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w.beforeWrite = func(*os.File) { once.Do(func() { close(entered); <-release }) }
	first := make(chan error, 1)
	go func() { first <- w.Append(context.Background(), denied()) }()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	e := denied()
	second := make(chan error, 1)
	go func() { second <- w.Append(ctx, e) }()
	waitFor(t, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return len(w.pending) == 1 })
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Append = %v", err)
	}
	close(release)
	must(t, <-first)
	w.Close()
	if bytes.Contains(readFile(t, cfg.Path), []byte(e.OperationID)) {
		t.Fatal("cancelled record was written")
	}
	verifyOK(t, cfg)
}

func TestPoisoning(t *testing.T) {
	cases := map[string]func(t *testing.T, w *Writer, cfg Config){
		"file made unwritable": func(t *testing.T, w *Writer, cfg Config) { must(t, os.Chmod(cfg.Path, 0o400)) },
		"descriptor closed under the writer": func(t *testing.T, w *Writer, cfg Config) {
			w.beforeWrite = func(f *os.File) { f.Close() }
		},
		"appended to outside the writer": func(t *testing.T, w *Writer, cfg Config) {
			f, err := os.OpenFile(cfg.Path, os.O_WRONLY|os.O_APPEND, 0)
			must(t, err)
			f.WriteString("{}\n")
			f.Close()
		},
		"replaced": func(t *testing.T, w *Writer, cfg Config) {
			must(t, os.Rename(cfg.Path, cfg.Path+".moved"))
			must(t, os.WriteFile(cfg.Path, nil, 0o600))
		},
		"removed": func(t *testing.T, w *Writer, cfg Config) { must(t, os.Remove(cfg.Path)) },
		"lock file removed": func(t *testing.T, w *Writer, cfg Config) {
			must(t, os.Remove(cfg.Path+".lock"))
		},
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t, 1<<20)
			w := mustOpen(t, cfg)
			appendN(t, w, 2)
			breakIt(t, w, cfg)
			err := w.Append(context.Background(), denied())
			if !errors.Is(err, ErrPoisoned) {
				t.Fatalf("Append after %s = %v, want ErrPoisoned", name, err)
			}
			if w.Err() == nil || !errors.Is(w.Err(), ErrPoisoned) {
				t.Fatalf("Err() = %v", w.Err())
			}
			// Even after the cause is gone, later appends keep failing.
			w.beforeWrite = nil
			_ = os.Chmod(cfg.Path, 0o600)
			if err := w.Append(context.Background(), denied()); !errors.Is(err, ErrPoisoned) {
				t.Fatalf("later Append = %v, want ErrPoisoned", err)
			}
			if strings.Contains(w.Err().Error(), string(testKey)) {
				t.Fatal("poison error holds the key")
			}
			w.Close()
		})
	}
}

func TestRecordTooLargeDoesNotPoison(t *testing.T) {
	cfg := testConfig(t, 200)
	w := mustOpen(t, cfg)
	if err := w.Append(context.Background(), issued(w, 0)); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("Append = %v, want ErrRecordTooLarge", err)
	}
	if w.Err() != nil {
		t.Fatalf("writer poisoned: %v", w.Err())
	}
	if fi, _ := os.Stat(cfg.Path); fi.Size() != 0 {
		t.Fatal("oversized record was written")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
