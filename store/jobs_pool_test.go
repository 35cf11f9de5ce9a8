package store_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/registrum/registrum/internal/testslack"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

// poolHog is a job that holds one pooled connection for a while, as a
// burst of deliveries or verifications does.
type poolHog struct{}

func (poolHog) Kind() string { return "test.pool_hog" }

// A burst of jobs never takes every connection of the pool: a host's
// requests share it, and a request that waited behind the jobs answered
// 503 once its 2-second read budget ran out (the soak saw it when River's
// scheduler made 109 retried deliveries available at once). By default the
// runner works at most half the pool's connections' worth of jobs at once.
func TestAJobBurstLeavesConnectionsForRequests(t *testing.T) {
	ctx := context.Background()
	const poolMax, hold = 4, 3 * time.Second
	cfg, err := pgxpool.ParseConfig(storetest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = poolMax
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := store.Open(ctx, pool, testPackage(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var running, most atomic.Int32
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, j *river.Job[poolHog]) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		_, err := pool.Exec(ctx, "SELECT pg_sleep($1)", hold.Seconds())
		return err
	}))
	runner, err := s.NewJobRunner(workers, store.JobRunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 12 {
		if err := s.Enqueue(ctx, poolHog{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := runner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer runner.Stop(context.Background())
	deadline := time.Now().Add(hold + testslack.Scheduling)
	for running.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the runner takes what it will take
	// A request's read while the burst runs: it must find a connection, not
	// wait for a job to finish.
	readCtx, cancel := context.WithTimeout(ctx, hold/2)
	defer cancel()
	if _, err := s.CurrentSnapshot(readCtx); err != nil {
		t.Fatalf("a read while %d jobs hold connections of a pool of %d: %v", running.Load(), poolMax, err)
	}
	if m := most.Load(); m > poolMax/2 {
		t.Fatalf("%d jobs held connections at once, more than half the pool of %d", m, poolMax)
	}
}
