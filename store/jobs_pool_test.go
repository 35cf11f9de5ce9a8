package store_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/registrum/registrum/internal/testslack"
	"github.com/registrum/registrum/model"
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
	release, free := gate()
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
	if n := settledCount(&inFlight, 8); n != 8 {
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

// Each destination's deliveries have a queue of their own (EventQueue): a
// destination whose receiver holds every delivery of its queue in flight
// leaves another destination's deliveries, and the local handlers', to
// start at once.
func TestASlowDestinationLeavesWorkersForAnother(t *testing.T) {
	ctx := context.Background()
	s, _, _ := openOnPool(t, maxConns(4))
	release, free := gate()
	slow := store.EventQueue("slow-partner")
	var held atomic.Int32
	others := make(chan string, 2)
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, j *river.Job[store.DeliverEventArgs]) error {
		if j.Queue != slow {
			others <- j.Queue
			return nil
		}
		held.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}))
	for range 12 {
		if err := s.Enqueue(ctx, store.DeliverEventArgs{DeliveryID: uuid.NewString()}, &river.InsertOpts{Queue: slow}); err != nil {
			t.Fatal(err)
		}
	}
	startRunnerWith(t, s, workers, store.JobRunnerOptions{EventDestinations: []string{"slow-partner", "quick-partner"}})
	defer free() // before the runner stops (startRunnerWith)
	// A pool of 4: 8 workers in each delivery queue.
	if n := settledCount(&held, 8); n != 8 {
		t.Fatalf("%d deliveries held by the slow destination on a pool of 4, want 8", n)
	}
	for _, q := range []string{store.EventQueue("quick-partner"), store.QueueEvents} {
		if err := s.Enqueue(ctx, store.DeliverEventArgs{DeliveryID: uuid.NewString()}, &river.InsertOpts{Queue: q}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	for range 2 {
		select {
		case q := <-others:
			got[q] = true
		case <-time.After(testslack.Scheduling):
			t.Fatalf("deliveries of queues %v started while the slow destination held %d; want %s and %s", got, held.Load(), store.EventQueue("quick-partner"), store.QueueEvents)
		}
	}
	if !got[store.EventQueue("quick-partner")] || !got[store.QueueEvents] {
		t.Fatalf("started %v", got)
	}
}

// A destination's queue is named after it where River takes the name,
// after a digest of its id otherwise; the local handlers' deliveries stay
// in QueueEvents. River itself accepts every name.
func TestEventQueueNamesAreRiverQueueNames(t *testing.T) {
	long := strings.Repeat("a", 58)
	for _, c := range []struct{ destination, want string }{
		{"", store.QueueEvents},
		{"receiver", "events-receiver"},
		{"crm-2", "events-crm-2"},
		{strings.Repeat("a", 57), "events-" + strings.Repeat("a", 57)},
	} {
		if got := store.EventQueue(c.destination); got != c.want {
			t.Errorf("EventQueue(%q) = %q, want %q", c.destination, got, c.want)
		}
	}
	queues := map[string]river.QueueConfig{}
	seen := map[string]string{}
	for _, id := range []string{"receiver", "a--b", "a-", "a-b", long, long + "b", "x", strings.Repeat("z", 64)} {
		q := store.EventQueue(id)
		if other, ok := seen[q]; ok {
			t.Errorf("destinations %q and %q share queue %q", other, id, q)
		}
		seen[q] = id
		queues[q] = river.QueueConfig{MaxWorkers: 1}
	}
	for _, id := range []string{"a--b", "a-", long} {
		if q := store.EventQueue(id); len(q) != len("events-")+16 {
			t.Errorf("EventQueue(%q) = %q, want events- and 16 hex digits", id, q)
		}
	}
	_, pool := openStore(t)
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[store.DeliverEventArgs]) error { return nil }))
	if _, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Queues: queues, Workers: workers}); err != nil {
		t.Fatalf("River refuses the queues %v: %v", slices.Collect(maps.Keys(queues)), err)
	}
}

// settledCount waits until n reaches want (at most testslack.Scheduling)
// and returns it: more than want when more ran than should.
func settledCount(n *atomic.Int32, want int32) int32 {
	deadline := time.Now().Add(testslack.Scheduling)
	for n.Load() < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return n.Load()
}

// gate returns a channel that stays open until free, which may run any
// number of times, closes it.
func gate() (<-chan struct{}, func()) {
	release := make(chan struct{})
	var once sync.Once
	return release, func() { once.Do(func() { close(release) }) }
}

// A runner opened without options still works the deliveries to every
// destination its package's hooks name, in their queues.
func TestARunnerWorksTheDestinationsItsPackageNames(t *testing.T) {
	ctx := context.Background()
	p := storetest.SamplePackage(t)
	p.Entities[0].Hooks = append(p.Entities[0].Hooks, &model.Hook{ID: "named", Handler: &model.Handler{Kind: model.HandlerURL, DestinationID: "named-partner"}})
	dsn := storetest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := store.Open(ctx, pool, p, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan string, 1)
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, j *river.Job[store.DeliverEventArgs]) error {
		ran <- j.Queue
		return nil
	}))
	startRunner(t, s, workers)
	if err := s.Enqueue(ctx, store.DeliverEventArgs{DeliveryID: uuid.NewString()}, &river.InsertOpts{Queue: store.EventQueue("named-partner")}); err != nil {
		t.Fatal(err)
	}
	select {
	case q := <-ran:
		if q != store.EventQueue("named-partner") {
			t.Fatalf("ran in queue %q", q)
		}
	case <-time.After(testslack.Scheduling):
		t.Fatal("the delivery to a destination the package names was not worked")
	}
}
