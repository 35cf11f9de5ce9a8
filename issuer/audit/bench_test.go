package audit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAppend measures durable appends per second with 1, 16 and 64
// concurrent callers: group commit against a one-fsync-per-append baseline
// (the same writer limited to one entry per batch), in the same run. The two
// modes alternate in four rounds so that disk noise from other processes
// falls on both. It reports both rates, their ratio, and the records per
// fsync that group commit reached.
func BenchmarkAppend(b *testing.B) {
	for _, goroutines := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", goroutines), func(b *testing.B) {
			group := mustOpen(b, testConfig(b, 1<<30))
			baseline := mustOpen(b, testConfig(b, 1<<30))
			baseline.maxBatch = 1
			const rounds = 4
			var tGroup, tBaseline time.Duration
			n := b.N / rounds
			if n == 0 {
				n = 1
			}
			for range rounds {
				tGroup += appendMany(b, group, goroutines, n)
				tBaseline += appendMany(b, baseline, goroutines, n)
			}
			total := float64(n * rounds)
			g, base := total/tGroup.Seconds(), total/tBaseline.Seconds()
			b.ReportMetric(g, "group-appends/s")
			b.ReportMetric(base, "baseline-appends/s")
			b.ReportMetric(g/base, "speedup")
			b.ReportMetric(total/float64(group.fileSyncs.Load()), "records/fsync")
		})
	}
}

// appendMany appends n issued entries to w from the given number of
// goroutines and returns the time taken.
func appendMany(b *testing.B, w *Writer, goroutines, n int) time.Duration {
	e := issued(w, 1)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := w.Append(context.Background(), e); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}
