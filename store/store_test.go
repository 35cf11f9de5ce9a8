package store_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Run(m)) }

func intp(v int) *int { return &v }

// testPackage is the package of the store's tests (storetest.SamplePackage).
func testPackage(t testing.TB) *model.Package { return storetest.SamplePackage(t) }

// openOnPool opens the sample package's store on a fresh database over a
// pool that configure sets up (pgx's defaults when nil), closed when t
// ends; it returns the store, its pool and the database's connection
// string.
func openOnPool(t testing.TB, configure func(*pgxpool.Config)) (*store.Store, *pgxpool.Pool, string) {
	t.Helper()
	dsn := storetest.NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := store.Open(context.Background(), pool, testPackage(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, pool, dsn
}

// startRunner starts a job runner of s with the default options over
// workers; it stops when t ends, after the test's deferred calls.
func startRunner(t testing.TB, s *store.Store, workers *river.Workers) {
	t.Helper()
	startRunnerWith(t, s, workers, store.JobRunnerOptions{})
}

// startRunnerWith starts a job runner of workers on s with options o until
// t ends.
func startRunnerWith(t testing.TB, s *store.Store, workers *river.Workers, o store.JobRunnerOptions) {
	t.Helper()
	runner, err := s.NewJobRunner(workers, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runner.Stop(context.Background()) })
}

// maxConns sets a pool's size to n (openOnPool).
func maxConns(n int32) func(*pgxpool.Config) {
	return func(c *pgxpool.Config) { c.MaxConns = n }
}

func journal() store.Journal {
	return store.Journal{OperationID: uuid.NewString(), CommitID: uuid.NewString(), TraceID: "0123456789abcdef0123456789abcdef", RecordReference: "hmac-sha256:x", Data: []byte(`{}`)}
}

func openStore(t testing.TB) (*store.Store, *pgxpool.Pool) {
	s, pool, _ := openOnPool(t, nil)
	return s, pool
}

// schemaFingerprint reads the schema fingerprint of the package the
// database serves.
func schemaFingerprint(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	var fp string
	if err := pool.QueryRow(context.Background(), `SELECT schema_fingerprint FROM registrum.package_state`).Scan(&fp); err != nil {
		t.Fatal(err)
	}
	return fp
}

func count(t *testing.T, pool *pgxpool.Pool, q string) int {
	var n int
	if err := pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCreateAndGetRoundTripEveryStorageForm(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	p := s.Package()
	hh := uuid.NewString()
	if _, err := s.Create(ctx, p.EntityByID("household"), hh, map[string]any{"name": "Ada"}, journal()); err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	seen := time.Date(2026, 11, 1, 12, 30, 0, 123000, time.UTC)
	values := map[string]any{
		"national-id": "N-1", "household": hh, "age": int64(7), "amount": "12.50",
		"born": "2019-04-01", "seen": seen, "active": true,
		"where": json.RawMessage(`{"type":"Point","coordinates":[24.9,60.2]}`),
	}
	if _, err := s.Create(ctx, p.EntityByID("child"), id, values, journal()); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, p.EntityByID("child"), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != 1 || got.Lifecycle != "active" {
		t.Errorf("revision %d lifecycle %s", got.Revision, got.Lifecycle)
	}
	for k, want := range values {
		g := got.Values[k]
		switch w := want.(type) {
		case json.RawMessage:
			var a, b any
			json.Unmarshal(w, &a)
			json.Unmarshal(g.(json.RawMessage), &b)
			if ja, _ := json.Marshal(a); string(ja) != func() string { jb, _ := json.Marshal(b); return string(jb) }() {
				t.Errorf("%s = %s, want %s", k, g, w)
			}
		case time.Time:
			if !w.Equal(g.(time.Time)) {
				t.Errorf("%s = %v, want %v", k, g, w)
			}
		default:
			if g != want {
				t.Errorf("%s = %#v, want %#v", k, g, want)
			}
		}
	}
	if n := count(t, pool, "select count(*) from registrum.revisions"); n != 2 {
		t.Errorf("revisions = %d, want 2", n)
	}
	if n := count(t, pool, "select count(*) from registrum.audit where operation = 'create' and trace_id = '0123456789abcdef0123456789abcdef'"); n != 2 {
		t.Errorf("audit rows = %d, want 2", n)
	}
	if _, err := s.Get(ctx, p.EntityByID("child"), uuid.NewString()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown id: err = %v", err)
	}
}

func constraintOwner(t *testing.T, err error) layout.Owner {
	t.Helper()
	var ce *store.ConstraintError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a ConstraintError", err)
	}
	return ce.Owner
}

func TestConstraintsAreEnforcedByPostgreSQLAndNothingIsWritten(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	p := s.Package()
	child := p.EntityByID("child")
	if _, err := s.Create(ctx, child, uuid.NewString(), map[string]any{"national-id": "N-1"}, journal()); err != nil {
		t.Fatal(err)
	}
	before := count(t, pool, "select count(*) from registrum.revisions")

	o := constraintOwner(t, func() error {
		_, err := s.Create(ctx, child, uuid.NewString(), map[string]any{"national-id": "N-1"}, journal())
		return err
	}())
	if o.Kind != model.ConstraintUnique || o.ConstraintID != "unique-nid" || o.FieldID != "national-id" {
		t.Errorf("unique violation owner = %+v", o)
	}
	o = constraintOwner(t, func() error {
		_, err := s.Create(ctx, child, uuid.NewString(), map[string]any{"national-id": "N-2", "household": uuid.NewString()}, journal())
		return err
	}())
	if o.Kind != model.ConstraintReference || o.FieldID != "household" {
		t.Errorf("reference violation owner = %+v", o)
	}
	o = constraintOwner(t, func() error {
		_, err := s.Create(ctx, p.EntityByID("household"), uuid.NewString(), map[string]any{"name": "elevenchars"}, journal())
		return err
	}())
	if o.Kind != layout.KindFieldBounds || o.FieldID != "name" {
		t.Errorf("bound violation owner = %+v", o)
	}
	placement := p.EntityByID("placement")
	if _, err := s.Create(ctx, placement, uuid.NewString(), map[string]any{"child": "c1", "from": "2026-01-01", "to": "2026-02-01"}, journal()); err != nil {
		t.Fatal(err)
	}
	// The end is exclusive: a placement starting on the previous end is fine.
	if _, err := s.Create(ctx, placement, uuid.NewString(), map[string]any{"child": "c1", "from": "2026-02-01"}, journal()); err != nil {
		t.Fatalf("adjacent interval refused: %v", err)
	}
	o = constraintOwner(t, func() error {
		_, err := s.Create(ctx, placement, uuid.NewString(), map[string]any{"child": "c1", "from": "2026-01-15", "to": "2026-01-20"}, journal())
		return err
	}())
	if o.Kind != model.ConstraintTemporalNonOverlap || o.ConstraintID != "no-overlap" {
		t.Errorf("overlap owner = %+v", o)
	}
	if after := count(t, pool, "select count(*) from registrum.revisions"); after != before+2 {
		t.Errorf("revisions went from %d to %d; refused writes left rows", before, after)
	}
}

func TestConcurrentDuplicateCreatesResolveToOne(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	child := s.Package().EntityByID("child")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Create(ctx, child, uuid.NewString(), map[string]any{"national-id": "SAME"}, journal())
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		if err == nil {
			ok++
		}
	}
	if ok != 1 {
		t.Fatalf("%d concurrent creates with the same unique value succeeded, want 1", ok)
	}
	if n := count(t, pool, `select count(*) from registrum_data.e_child`); n != 1 {
		t.Fatalf("rows = %d", n)
	}
}

func TestOpenRefusesAnotherLayoutAndAcceptsTheSame(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	p := testPackage(t)
	if _, err := store.Open(ctx, pool, p, store.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(ctx, pool, testPackage(t), store.Options{}); err != nil {
		t.Fatalf("reopening with the same layout: %v", err)
	}
	q := testPackage(t)
	q.Entities[0].Fields[0].MaxLength = intp(11)
	q.SchemaFingerprint, _ = layout.Fingerprint(q)
	if _, err := store.Open(ctx, pool, q, store.Options{}); !errors.Is(err, store.ErrLayoutMismatch) {
		t.Fatalf("err = %v, want ErrLayoutMismatch", err)
	}
	r := testPackage(t)
	r.SchemaFingerprint = "sha256:" + string(make([]byte, 0)) + "00"
	if _, err := store.Open(ctx, pool, r, store.Options{}); err == nil {
		t.Fatal("a package whose recorded fingerprint differs from its layout was accepted")
	}
}

// refusingCapturer is a Capturer whose nil pointer Open must refuse.
type refusingCapturer struct{}

func (*refusingCapturer) Capture(context.Context, *store.Writer, store.Change) error {
	return errors.New("refusingCapturer captures nothing")
}

// Open checks its options before it touches the database: a capturer that
// is a nil pointer (which would fail the first write capturing an event)
// and a missing pool or package are refused, and nothing is activated.
func TestOpenRefusesOptionsItCannotUseBeforeActivating(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	var nilCapturer *refusingCapturer
	if _, err := store.Open(ctx, pool, testPackage(t), store.Options{Capture: nilCapturer}); err == nil || !strings.Contains(err.Error(), "Options.Capture is a nil *store_test.refusingCapturer") {
		t.Fatalf("a nil capturer: err = %v", err)
	}
	if n := count(t, pool, `select count(*) from registrum.package_state`); n != 0 {
		t.Fatalf("a refused Open activated the package (%d rows)", n)
	}
	if _, err := store.Open(ctx, nil, testPackage(t), store.Options{}); err == nil {
		t.Fatal("Open without a pool returned a store")
	}
	if _, err := store.Open(ctx, pool, nil, store.Options{}); err == nil {
		t.Fatal("Open without a package returned a store")
	}
	// A capturer that is set is the store's: the writes call it.
	s, err := store.Open(ctx, pool, testPackage(t), store.Options{Capture: &refusingCapturer{}, Session: pool})
	if err != nil {
		t.Fatal(err)
	}
	hooked := s.Package().EntityByID("household")
	hooked.Hooks = []*model.Hook{{ID: "household-created", Trigger: model.TriggerCreated}}
	if _, err := s.Create(ctx, hooked, uuid.NewString(), map[string]any{"name": "Ada"}, journal()); err == nil || !strings.Contains(err.Error(), "refusingCapturer captures nothing") {
		t.Fatalf("a write of an entity with a hook did not go through the capturer: %v", err)
	}
}

func TestSchemaVersionChecks(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	if err := store.CheckSchema(ctx, pool); err != nil {
		t.Fatalf("migrated database: %v", err)
	}
	if applied, err := store.Migrate(ctx, pool); err != nil || len(applied) != 0 {
		t.Fatalf("second migrate applied %v, err %v", applied, err)
	}
	if _, err := pool.Exec(ctx, "insert into registrum.schema_migrations (version, name) values (9999, 'future')"); err != nil {
		t.Fatal(err)
	}
	if err := store.CheckSchema(ctx, pool); !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("err = %v, want ErrSchemaTooNew", err)
	}
	if _, err := store.Migrate(ctx, pool); !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("migrate on a newer schema: err = %v", err)
	}
	if _, err := store.Open(ctx, pool, testPackage(t), store.Options{}); !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("open on a newer schema: err = %v", err)
	}
	if _, err := pool.Exec(ctx, "drop schema registrum cascade"); err != nil {
		t.Fatal(err)
	}
	if err := store.CheckSchema(ctx, pool); !errors.Is(err, store.ErrNotMigrated) {
		t.Fatalf("err = %v, want ErrNotMigrated", err)
	}
}

func TestConcurrentMigratorsApplyOnce(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	if _, err := pool.Exec(ctx, "drop schema registrum cascade"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	total := make(chan int, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			applied, err := store.Migrate(ctx, pool)
			if err != nil {
				t.Error(err)
			}
			total <- len(applied)
		}()
	}
	wg.Wait()
	close(total)
	sum := 0
	for n := range total {
		sum += n
	}
	if sum != len(store.Migrations()) {
		t.Fatalf("migrations applied %d times in all, want %d", sum, len(store.Migrations()))
	}
}

// snapshotOfToken decodes a write's snapshot token (store.SnapshotToken).
func snapshotOfToken(t *testing.T, tok string) store.Snapshot {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, store.SnapshotTokenPrefix))
	if err != nil || len(raw) < 8 || !strings.HasPrefix(tok, store.SnapshotTokenPrefix) {
		t.Fatalf("%q is not a snapshot token", tok)
	}
	r := bytes.NewReader(raw[8:])
	next := func() uint64 {
		v, err := binary.ReadUvarint(r)
		if err != nil {
			t.Fatalf("%q: %v", tok, err)
		}
		return v
	}
	var s store.Snapshot
	s.Xmin = next()
	s.Xmax = s.Xmin + next()
	prev := s.Xmin
	for i, n := 0, next(); uint64(i) < n; i++ {
		x := prev + next()
		if i > 0 {
			x++
		}
		s.Xip = append(s.Xip, x)
		prev = x
	}
	return s
}

// holdTransactionID begins a transaction on pool that holds an id, in
// progress until the test ends.
func holdTransactionID(t *testing.T, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
		t.Fatal(err)
	}
	return tx
}
