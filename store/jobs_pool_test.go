package store_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/registrum/registrum/internal/testslack"
	"github.com/registrum/registrum/store"
)

// poolHog is a job that holds one pooled connection for a while, as a
// burst of deliveries or verifications does.
type poolHog struct{}

func (poolHog) Kind() string { return "test.pool_hog" }

// A burst of jobs never takes every connection of the pool: a host's
// requests share it, and a request that waited behind the jobs answered
// 503 once its 2-second read budget ran out (the soak saw it when River's
// scheduler made 109 retried deliveries available at once). By default the
// runner works at most half the pool's connections' worth of jobs of its
// default queue at once, and event deliveries run at most a quarter's
// worth of statements (TestDeliveryStatementsLeaveConnectionsForRequests).
func TestAJobBurstLeavesConnectionsForRequests(t *testing.T) {
	ctx := context.Background()
	const poolMax, hold = 4, 3 * time.Second
	s, pool, _ := openOnPool(t, maxConns(poolMax))
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
	for range 12 {
		if err := s.Enqueue(ctx, poolHog{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	startRunner(t, s, workers)
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

// probe is a job of the default queue that reports its start.
type probe struct{}

func (probe) Kind() string { return "test.probe" }

// Deliveries have workers of their own: a receiver that holds every
// delivery in flight (here, a delivery worker that does not return) leaves
// the default queue's workers to the other jobs, which start at once. A
// delivery job a host of the previous release enqueued in the default
// queue is still worked there.
func TestASlowDeliveryLeavesWorkersForOtherJobs(t *testing.T) {
	ctx := context.Background()
	s, _, _ := openOnPool(t, maxConns(4))
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	var inFlight atomic.Int32
	legacy := make(chan struct{}, 1)
	started := make(chan struct{}, 1)
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, j *river.Job[store.DeliverEventArgs]) error {
		if j.Args.DeliveryID == "legacy" {
			if j.Queue != river.QueueDefault {
				t.Errorf("the legacy delivery ran in queue %q", j.Queue)
			}
			legacy <- struct{}{}
			return nil
		}
		if j.Queue != store.QueueEvents {
			t.Errorf("a delivery ran in queue %q, not %q", j.Queue, store.QueueEvents)
		}
		inFlight.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}))
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, j *river.Job[probe]) error {
		started <- struct{}{}
		return nil
	}))
	const deliveries = 12
	for range deliveries {
		if err := s.Enqueue(ctx, store.DeliverEventArgs{DeliveryID: uuid.NewString()}, nil); err != nil {
			t.Fatal(err)
		}
	}
	startRunner(t, s, workers)
	defer free() // before the runner stops (startRunner)
	// A pool of 4: 8 delivery workers, 2 workers for the default queue.
	deadline := time.Now().Add(testslack.Scheduling)
	for inFlight.Load() < 8 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := inFlight.Load(); n != 8 {
		t.Fatalf("%d deliveries in flight on a pool of 4, want 8", n)
	}
	if err := s.Enqueue(ctx, probe{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(ctx, store.DeliverEventArgs{DeliveryID: "legacy"}, &river.InsertOpts{Queue: river.QueueDefault}); err != nil {
		t.Fatal(err)
	}
	for what, ch := range map[string]chan struct{}{"a default-queue job": started, "a delivery of the default queue": legacy} {
		select {
		case <-ch:
		case <-time.After(testslack.Scheduling):
			t.Fatalf("%s did not start while %d deliveries were in flight", what, inFlight.Load())
		}
	}
	if n := inFlight.Load(); n != 8 {
		t.Fatalf("%d deliveries in flight, want 8", n)
	}
	free()
}

// Event deliveries hold at most a quarter of the pool's connections at
// once (at least one) with their statements, however many are in flight:
// with every claim waiting on a lock in PostgreSQL, a request's read still
// finds a connection of a pool of 4.
func TestDeliveryStatementsLeaveConnectionsForRequests(t *testing.T) {
	ctx := context.Background()
	s, _, dsn := openOnPool(t, maxConns(4))
	holder, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE registrum.event_deliveries IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var claims sync.WaitGroup
	claimCtx, cancelClaims := context.WithCancel(ctx)
	defer cancelClaims()
	for range 6 {
		claims.Add(1)
		go func() {
			defer claims.Done()
			if _, err := s.ClaimDelivery(claimCtx, uuid.NewString(), time.Second); err != nil && claimCtx.Err() == nil {
				t.Errorf("claim: %v", err)
			}
		}()
	}
	// Wait until a claim waits on the lock, and give the others the time
	// to take connections if they could.
	waiting := func() (n int) {
		if err := holder.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(testslack.Scheduling)
	for waiting() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if n := waiting(); n != 1 {
		t.Fatalf("%d delivery statements wait on the lock with a pool of 4, want 1", n)
	}
	readCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := s.CurrentSnapshot(readCtx); err != nil {
		t.Fatalf("a read while six claims wait: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	claims.Wait()
}
