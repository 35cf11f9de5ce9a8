package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/store"
)

// roundTrips counts what a connection sends: each batch and each statement
// sent on its own is one round trip.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// openCountingStore opens a store over a pool whose round trips are counted.
func openCountingStore(t *testing.T) (*store.Store, *pgxpool.Pool, *roundTrips) {
	t.Helper()
	trips := &roundTrips{}
	s, pool, _ := openOnPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = trips })
	return s, pool, trips
}

// A write without an idempotency key reads its snapshot in the round trip
// that carries COMMIT: the whole create is one round trip, the snapshot is
// delivered once the write is committed, and it is the state Snapshot
// names (the write's own record, the records committed before, not a
// transaction still in progress).
func TestASnapshotReadWithCommitNamesTheCommittedWrite(t *testing.T) {
	ctx := context.Background()
	s, pool, trips := openCountingStore(t)
	hh := s.Package().EntityByID("household")
	first := uuid.NewString()
	if _, err := s.Create(ctx, hh, first, map[string]any{"name": "a"}, journal()); err != nil {
		t.Fatal(err)
	}
	// A transaction in progress throughout, with a record of its own.
	open, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Rollback(ctx)
	hidden := uuid.NewString()
	if _, err := open.Exec(ctx, "INSERT INTO registrum_data.e_household (record_id, revision, lifecycle, created_at, updated_at, package_revision, f_name) VALUES ($1, 1, 'active', now(), now(), $2, 'hidden')", hidden, s.Package().Revision); err != nil {
		t.Fatal(err)
	}
	// Every connection of the pool has the write's statements prepared
	// (pgx prepares a statement new to a connection in a round trip of its
	// own).
	for range pool.Config().MaxConns {
		if _, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
			if _, err := w.Create(ctx, hh, uuid.NewString(), map[string]any{"name": "warm"}, journal()); err != nil {
				return nil, err
			}
			return &store.Outcome{}, w.TokenAtCommit(ctx, func(string) error { return nil })
		}); err != nil {
			t.Fatal(err)
		}
	}
	id := uuid.NewString()
	var snap store.Snapshot
	delivered, returned := false, false
	before := trips.n.Load()
	if _, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		if _, err := w.Create(ctx, hh, id, map[string]any{"name": "b"}, journal()); err != nil {
			return nil, err
		}
		err := w.TokenAtCommit(ctx, func(tok string) error {
			if n := trips.n.Load() - before; n != 1 {
				t.Errorf("a create with its snapshot took %d round trips, want 1", n)
			}
			if !returned {
				t.Error("the snapshot was delivered before the write's function returned")
			}
			// Committed: another connection sees the record.
			if !stored(t, pool, id) {
				t.Error("the snapshot was delivered before the commit")
			}
			snap, delivered = snapshotOfToken(t, tok), true
			return nil
		})
		returned = true
		return &store.Outcome{}, err
	}); err != nil {
		t.Fatal(err)
	}
	if !delivered {
		t.Fatal("the snapshot was not delivered")
	}
	if got := snapshotIDs(t, s, snap); !slices.Contains(got, first) || !slices.Contains(got, id) || slices.Contains(got, hidden) {
		t.Fatalf("the write's state: %v, want %s and %s, not %s of the transaction in progress", got, first, id, hidden)
	}
	// A revision after the snapshot was asked for is refused, as after Snapshot.
	if _, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		if err := w.TokenAtCommit(ctx, func(string) error { return nil }); err != nil {
			return nil, err
		}
		_, err := w.Create(ctx, hh, uuid.NewString(), map[string]any{"name": "x"}, journal())
		return &store.Outcome{}, err
	}); err == nil {
		t.Fatal("a revision after the snapshot was accepted")
	}
}

// A write that stores its outcome under an idempotency key reads its
// snapshot in the statement that stores the outcome: a keyed create is one
// round trip too. Its caller renders the outcome before COMMIT with a
// stand-in the answer carries the token in place of, and a replay answers
// the same bytes, the token made again from the stored snapshot. An
// outcome without the stand-in is refused, nothing written.
func TestAKeyedWriteReadsItsSnapshotWithItsOutcome(t *testing.T) {
	ctx := context.Background()
	s, pool, trips := openCountingStore(t)
	hh := s.Package().EntityByID("household")
	keyed := func(idem *store.Idempotency, id string, render func(stand string) string) (*store.Outcome, bool, error) {
		return s.Write(ctx, idem, func(w *store.Writer) (*store.Outcome, error) {
			if _, err := w.Create(ctx, hh, id, map[string]any{"name": "a"}, journal()); err != nil {
				return nil, err
			}
			out := &store.Outcome{Status: 201, ETag: `"e"`}
			return out, w.TokenAtCommit(ctx, func(stand string) error {
				out.Body = []byte(render(stand))
				return nil
			})
		})
	}
	body := func(stand string) string { return `{"id":"x","snapshot":"` + stand + `","after":"é"}` }
	for range pool.Config().MaxConns {
		if _, _, err := keyed(&store.Idempotency{KeyReference: "k-" + uuid.NewString(), RequestDigest: "d"}, uuid.NewString(), body); err != nil {
			t.Fatal(err)
		}
	}
	idem := &store.Idempotency{KeyReference: "k-" + uuid.NewString(), RequestDigest: "d"}
	id := uuid.NewString()
	before := trips.n.Load()
	out, replayed, err := keyed(idem, id, body)
	if err != nil || replayed {
		t.Fatalf("first use: %v, replayed %v", err, replayed)
	}
	if n := trips.n.Load() - before; n != 1 {
		t.Errorf("a keyed create with its snapshot took %d round trips, want 1", n)
	}
	var got struct{ Snapshot string }
	if err := json.Unmarshal(out.Body, &got); err != nil {
		t.Fatalf("answer %q: %v", out.Body, err)
	}
	if ids := snapshotIDs(t, s, snapshotOfToken(t, got.Snapshot)); !slices.Contains(ids, id) {
		t.Fatalf("the token's state lacks the write's record: %v", ids)
	}
	if want := body(got.Snapshot); string(out.Body) != want {
		t.Fatalf("answer %q, want %q", out.Body, want)
	}
	again, replayed, err := keyed(idem, uuid.NewString(), body)
	if err != nil || !replayed {
		t.Fatalf("replay: %v, replayed %v", err, replayed)
	}
	var made struct{ Snapshot string }
	json.Unmarshal(again.Body, &made)
	if string(again.Body) != body(made.Snapshot) || again.Status != 201 || again.ETag != `"e"` {
		t.Fatalf("replayed %d %s %q", again.Status, again.ETag, again.Body)
	}
	if !slices.Equal(snapshotIDs(t, s, snapshotOfToken(t, made.Snapshot)), snapshotIDs(t, s, snapshotOfToken(t, got.Snapshot))) {
		t.Fatal("the replayed token names another state")
	}
	// No stand-in, or two: refused, nothing written.
	for name, render := range map[string]func(string) string{
		"none": func(string) string { return `{}` },
		"two":  func(stand string) string { return `["` + stand + `","` + stand + `"]` },
	} {
		id := uuid.NewString()
		if _, _, err := keyed(&store.Idempotency{KeyReference: "k-" + uuid.NewString(), RequestDigest: "d"}, id, render); err == nil {
			t.Errorf("%s: an outcome without its token exactly once was stored", name)
		}
		if stored(t, pool, id) {
			t.Errorf("%s: the refused write was committed", name)
		}
	}
}

// snapshotModes are the ways a write reads its snapshot, each through
// another statement: on its own (Snapshot), with COMMIT (TokenAtCommit),
// with its stored outcome (under a key) and with a chunk's receipt.
var snapshotModes = []string{"Snapshot", "TokenAtCommit", "TokenAtCommit under a key", "chunk receipt"}

// writeInMode creates a household of id in a write that reads its
// snapshot in mode (snapshotModes). A token delivered to a write without
// a stored answer is reported to delivered.
func writeInMode(ctx context.Context, t *testing.T, s *store.Store, mode, id string, delivered func()) error {
	t.Helper()
	if mode == "chunk receipt" {
		_, err := commitChunk(ctx, s, openRun(t, s, "p-"+id), 0, id)
		return err
	}
	var idem *store.Idempotency
	if mode == "TokenAtCommit under a key" {
		idem = &store.Idempotency{KeyReference: "k-" + uuid.NewString(), RequestDigest: "d"}
	}
	_, _, err := s.Write(ctx, idem, func(w *store.Writer) (*store.Outcome, error) {
		if _, err := w.Create(ctx, s.Package().EntityByID("household"), id, map[string]any{"name": "a"}, journal()); err != nil {
			return nil, err
		}
		if mode == "Snapshot" {
			_, err := w.Snapshot(ctx)
			return &store.Outcome{}, err
		}
		out := &store.Outcome{}
		return out, w.TokenAtCommit(ctx, func(tok string) error {
			if idem == nil {
				delivered()
			}
			out.Body = []byte(`"` + tok + `"`)
			return nil
		})
	})
	return err
}

// stored reports whether the household id was committed.
func stored(t *testing.T, pool *pgxpool.Pool, id string) bool {
	return count(t, pool, "select count(*) from registrum_data.e_household where record_id = '"+id+"'") == 1
}

// refusedInEveryMode writes in each of snapshotModes and wants each
// write refused with want (not as the database's error), nothing
// committed.
func refusedInEveryMode(t *testing.T, s *store.Store, pool *pgxpool.Pool, want error) {
	t.Helper()
	ctx := context.Background()
	for _, mode := range snapshotModes {
		id := uuid.NewString()
		err := writeInMode(ctx, t, s, mode, id, func() { t.Errorf("%s: a refused write's token was delivered", mode) })
		if !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", mode, err, want)
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			t.Errorf("%s: the refusal carries the database's error: %v", mode, pgErr)
		}
		if stored(t, pool, id) {
			t.Fatalf("%s: the refused write was committed", mode)
		}
	}
}

// A write to a database moved to another package (its schema fingerprint
// no longer the writing host's) is refused with ErrPackageChanged and
// nothing committed, whichever statement reads its snapshot; once the
// database serves the host's package again, each commits.
func TestAWriteToADatabaseOfAnotherPackageIsRefused(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	own := schemaFingerprint(t, pool)
	move := func(fp string) {
		if _, err := pool.Exec(ctx, `UPDATE registrum.package_state SET schema_fingerprint = $1`, fp); err != nil {
			t.Fatal(err)
		}
	}
	move("another package")
	refusedInEveryMode(t, s, pool, store.ErrPackageChanged)
	move(own)
	for _, mode := range snapshotModes {
		id := uuid.NewString()
		if err := writeInMode(ctx, t, s, mode, id, func() {}); err != nil {
			t.Fatalf("%s, the host's package again: %v", mode, err)
		}
		if !stored(t, pool, id) {
			t.Fatalf("%s: the write was not committed", mode)
		}
	}
}

// A write whose snapshot lists more transactions in progress than
// MaxWriteInProgress is refused with nothing committed, whichever
// statement reads its snapshot; within the bound it commits.
func TestAWriteWhoseSnapshotListsTooManyTransactionsIsRefused(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	hh := s.Package().EntityByID("household")
	// Three transactions in progress, each with an id.
	for range 3 {
		holdTransactionID(t, pool)
	}
	store.LowerMaxWriteInProgress(s, 2)
	refusedInEveryMode(t, s, pool, store.ErrSnapshotTooWide)
	store.LowerMaxWriteInProgress(s, store.MaxWriteInProgress)
	if _, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		if _, err := w.Create(ctx, hh, uuid.NewString(), map[string]any{"name": "a"}, journal()); err != nil {
			return nil, err
		}
		return &store.Outcome{}, w.TokenAtCommit(ctx, func(tok string) error {
			if snap := snapshotOfToken(t, tok); len(snap.Xip) < 3 {
				t.Errorf("the snapshot lists %d transactions in progress, want at least the 3 held open", len(snap.Xip))
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
}

// The bound counts the transactions a snapshot lists, not the span of ids
// it covers: one transaction held open while others commit after it gives
// a snapshot over many ids that lists one, and the write goes through;
// a second held open, past a bound of one, refuses it.
func TestAWriteWhoseSnapshotSpansManyIDsButListsFewCommits(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	hh := s.Package().EntityByID("household")
	holdTransactionID(t, pool)
	for range 5 {
		if _, err := s.Create(ctx, hh, uuid.NewString(), map[string]any{"name": "between"}, journal()); err != nil {
			t.Fatal(err)
		}
	}
	store.LowerMaxWriteInProgress(s, 1)
	defer store.LowerMaxWriteInProgress(s, store.MaxWriteInProgress)
	write := func() (store.Snapshot, error) {
		var snap store.Snapshot
		_, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
			if _, err := w.Create(ctx, hh, uuid.NewString(), map[string]any{"name": "a"}, journal()); err != nil {
				return nil, err
			}
			return &store.Outcome{}, w.TokenAtCommit(ctx, func(tok string) error {
				snap = snapshotOfToken(t, tok)
				return nil
			})
		})
		return snap, err
	}
	snap, err := write()
	if err != nil {
		t.Fatalf("a snapshot listing one transaction in progress, bound 1: %v", err)
	}
	if len(snap.Xip) != 1 || snap.Xmax-snap.Xmin <= 5 {
		t.Fatalf("snapshot %+v: want one transaction listed over a span of more than 5 ids", snap)
	}
	holdTransactionID(t, pool)
	if _, err := write(); !errors.Is(err, store.ErrSnapshotTooWide) {
		t.Fatalf("two transactions in progress, bound 1: %v, want ErrSnapshotTooWide", err)
	}
}

// Concurrent first uses of one key on the smallest pool resolve to one
// write, and every caller gets the same answer, token included: the one
// made after the commit for the writer, the one made again from the stored
// snapshot for those whose use of the key waited for it.
func TestConcurrentUsesOfOneKeyAnswerOneWriteWithOneToken(t *testing.T) {
	ctx := context.Background()
	s, pool, _ := openOnPool(t, maxConns(2))
	hh := s.Package().EntityByID("household")
	idem := &store.Idempotency{KeyReference: "k-" + uuid.NewString(), RequestDigest: "d"}
	name := "k" + uuid.NewString()[:7]
	const callers = 8
	bodies := make([]string, callers)
	written := make([]bool, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := uuid.NewString()
			out, replayed, err := s.Write(ctx, idem, func(w *store.Writer) (*store.Outcome, error) {
				if _, err := w.Create(ctx, hh, id, map[string]any{"name": name}, journal()); err != nil {
					return nil, err
				}
				out := &store.Outcome{Status: 201}
				return out, w.TokenAtCommit(ctx, func(stand string) error {
					out.Body = []byte(`{"id":"` + id + `","snapshot":"` + stand + `"}`)
					return nil
				})
			})
			if err != nil {
				errs[i] = err
				return
			}
			bodies[i], written[i] = string(out.Body), !replayed
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, "select count(*) from registrum_data.e_household where f_name = '"+name+"'"); n != 1 {
		t.Fatalf("%d records written under one key, want 1", n)
	}
	if n := len(slices.DeleteFunc(slices.Clone(written), func(w bool) bool { return !w })); n != 1 {
		t.Fatalf("%d callers wrote, want 1", n)
	}
	var first struct{ ID, Snapshot string }
	if err := json.Unmarshal([]byte(bodies[0]), &first); err != nil {
		t.Fatalf("answer %q: %v", bodies[0], err)
	}
	for i, b := range bodies {
		if b != bodies[0] {
			t.Fatalf("caller %d answered %q, caller 0 %q", i, b, bodies[0])
		}
	}
	if ids := snapshotIDs(t, s, snapshotOfToken(t, first.Snapshot)); !slices.Contains(ids, first.ID) {
		t.Fatalf("the answer's token does not name a state with its record: %v", ids)
	}
}

// registrum.write_snapshot, which writes of the previous release read their
// snapshot through, stays during a rolling upgrade (docs/operations.md):
// in one transaction it answers what the statement of this release
// answers, and refuses with the same SQLSTATE a database of another
// package.
func TestTheWriteSnapshotOfThePreviousReleaseStillAnswers(t *testing.T) {
	ctx := context.Background()
	_, pool := openStore(t)
	fp := schemaFingerprint(t, pool)
	type answer struct {
		own, snapshot string
		tag           []byte
	}
	read := func(tx pgx.Tx, q, fp string) (answer, error) {
		var a answer
		err := tx.QueryRow(ctx, q, fp, store.MaxWriteInProgress).Scan(&a.own, &a.snapshot, &a.tag)
		return a, err
	}
	const previous = `SELECT own, snapshot, tag FROM registrum.write_snapshot($1, $2)`
	// Repeatable read: both statements see the transaction's one snapshot,
	// whatever other transactions of the cluster commit between them.
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	was, err := read(tx, previous, fp)
	if err != nil {
		t.Fatalf("registrum.write_snapshot: %v", err)
	}
	now, err := read(tx, store.SQLWriteSnapshot, fp)
	if err != nil {
		t.Fatalf("this release's statement: %v", err)
	}
	if was.own != now.own || was.snapshot != now.snapshot || !bytes.Equal(was.tag, now.tag) || len(now.tag) == 0 {
		t.Fatalf("registrum.write_snapshot answered %+v, this release's statement %+v", was, now)
	}
	tx.Rollback(ctx)

	for _, q := range []string{previous, store.SQLWriteSnapshot} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = read(tx, q, "another package")
		tx.Rollback(ctx)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "RGPK1" {
			t.Errorf("%s for another package: %v, want RGPK1", q, err)
		}
	}
}
