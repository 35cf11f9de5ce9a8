package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/pglocal"
	"github.com/registrum/registrum/store/storetest"
)

// EnvRequirePgBouncer makes a missing pgbouncer binary a failure instead
// of a skip (CI sets it: .ci/run installs Debian's pgbouncer).
const EnvRequirePgBouncer = "REGISTRUM_REQUIRE_PGBOUNCER"

type pgbouncerProbe struct{ N int }

func (pgbouncerProbe) Kind() string { return "registrum.test.pgbouncer" }

// TestPgBouncerTransactionMode runs the store's traffic through PgBouncer
// in transaction mode (docs/record-host.md, "Connection poolers"): the
// request path over the pooler with ConnectPooled's statement mode, what
// needs a session (the migration lock, River's LISTEN, the activation
// watch) over the direct connection string.
func TestPgBouncerTransactionMode(t *testing.T) {
	if _, err := pglocal.FindPgBouncer(); err != nil {
		if os.Getenv(EnvRequirePgBouncer) != "" {
			t.Fatalf("%v (%s is set)", err, EnvRequirePgBouncer)
		}
		t.Skipf("%v; set %s=1 to make this a failure", err, EnvRequirePgBouncer)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := storetest.NewDatabase(t)
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cfg.Host, "/") {
		t.Skipf("the test database is not a private cluster on a Unix socket (%s)", storetest.EnvDatabaseURL)
	}
	b, err := pglocal.StartPgBouncer(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pgbouncer's log:\n%s", b.Log())
		}
		b.Stop()
	})

	direct, err := store.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := store.Migrate(ctx, direct); err != nil {
		t.Fatalf("migrate over the direct connection: %v", err)
	}
	pooled, err := store.ConnectPooled(ctx, b.DSN(cfg.Database)+" pool_max_conns=6")
	if err != nil {
		t.Fatal(err)
	}
	defer pooled.Close()
	s, err := store.Open(ctx, pooled, testPackage(t), store.Options{Session: direct})
	if err != nil {
		t.Fatalf("open through pgbouncer: %v", err)
	}

	// Writes and reads, concurrently, on more client connections than
	// PgBouncer hands out one server connection to at a time.
	hh := s.Package().EntityByID("household")
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for c := range 8 {
		wg.Go(func() {
			for i := range 15 {
				id := uuid.NewString()
				name := fmt.Sprintf("h%d-%d", c, i)
				if _, err := s.Create(ctx, hh, id, map[string]any{"name": name}, journal()); err != nil {
					errs <- fmt.Errorf("create: %w", err)
					return
				}
				got, err := s.Get(ctx, hh, id)
				if err != nil {
					errs <- fmt.Errorf("get: %w", err)
					return
				}
				if got.Values["name"] != name {
					errs <- fmt.Errorf("get %s: name %v, want %s", id, got.Values["name"], name)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := count(t, direct, "SELECT count(*) FROM "+layout.Table(hh)); n != 8*15 {
		t.Errorf("%d households on the server, want %d", n, 8*15)
	}

	// A snapshot page through the pooler: its check and first read in one
	// round trip, then the next page.
	snap, err := s.CurrentSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.CheckedSnapshotRecords(ctx, nil, hh, snap, "", 100)
	if err != nil || len(first) != 100 {
		t.Fatalf("checked snapshot page: %d records, %v", len(first), err)
	}
	rest, err := s.SnapshotRecords(ctx, hh, snap, first[99].RecordID, 100)
	if err != nil || len(rest) != 8*15-100 {
		t.Fatalf("next snapshot page: %d records, %v", len(rest), err)
	}
	tag := s.HistoryTag()
	if _, err := s.CheckedSnapshotRecords(ctx, &tag, hh, snap, "", 10); err != nil {
		t.Fatalf("checked snapshot page of a token: %v", err)
	}

	// Jobs: inserted through the pooler, worked by a runner whose River
	// queries go through the pooler and whose LISTEN is on the direct pool.
	worked := make(chan int, 10)
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, j *river.Job[pgbouncerProbe]) error {
		worked <- j.Args.N
		return nil
	}))
	runner, err := s.NewJobRunner(workers, store.JobRunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer runner.Stop(context.Background())
	for n := range 3 {
		start := time.Now()
		if err := s.Enqueue(ctx, pgbouncerProbe{N: n}, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-worked:
			if got != n {
				t.Errorf("worked job %d, want %d", got, n)
			}
			t.Logf("job %d worked %v after its insert", n, time.Since(start).Round(time.Millisecond))
		case <-time.After(15 * time.Second):
			t.Fatalf("job %d not worked within 15 s", n)
		}
	}

	// The activation watch listens on the direct pool and hears an
	// activation announced through the pooler.
	watch := make(chan error, 1)
	go func() { watch <- store.WatchActivations(ctx, direct, s.SchemaFingerprint()) }()
	time.Sleep(300 * time.Millisecond) // the watch listens
	if _, err := pooled.Exec(ctx, "SELECT pg_notify($1, 'another-fingerprint')", store.ActivationChannel); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-watch:
		if !errors.Is(err, store.ErrPackageChanged) {
			t.Errorf("watch: %v, want ErrPackageChanged", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the activation watch did not hear the notification within 10 s")
	}
}
