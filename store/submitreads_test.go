package store_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/store"
)

// TestExpectRequestWritesOnlyWhatWasDecidedOnTheRowsAsRead holds
// Writer.ExpectRequest: a write that locks a request as it was read before
// its transaction commits in one round trip when the request is still as
// read, and writes nothing (its key included) when the record's revision,
// the request's state or its proposal version moved, or the record is
// gone.
func TestExpectRequestWritesOnlyWhatWasDecidedOnTheRowsAsRead(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	hh := s.Package().EntityByID("household")
	id := newDraft(t, s)
	expect := func(key string, revision int64, state string, version int64) error {
		return submitAsRead(s, id, key, revision, state, version)
	}
	keys := func() int { return count(t, pool, "select count(*) from registrum.idempotency") }
	for _, c := range []struct {
		what     string
		revision int64
		state    string
		version  int64
	}{
		{"an older revision", 0, store.RequestDraft, 1},
		{"a newer revision", 2, store.RequestDraft, 1},
		{"another state", 1, store.RequestSubmitted, 1},
		{"another proposal version", 1, store.RequestDraft, 2},
	} {
		if err := expect("k-"+c.what, c.revision, c.state, c.version); !errors.Is(err, store.ErrMoved) {
			t.Fatalf("expecting %s: err = %v, want ErrMoved", c.what, err)
		}
		if n := keys(); n != 0 {
			t.Fatalf("expecting %s left %d keys", c.what, n)
		}
	}
	rec, err := s.Get(ctx, hh, id)
	if err != nil || rec.Revision != 1 {
		t.Fatalf("after the moved writes: %+v, %v; want revision 1", rec, err)
	}

	// As read: the write commits, and the request moved with it.
	if err := expect("k-as-read", 1, store.RequestDraft, 1); err != nil {
		t.Fatalf("expecting the request as it is: %v", err)
	}
	if rec, err = s.Get(ctx, hh, id); err != nil || rec.Revision != 2 {
		t.Fatalf("after the write: %+v, %v; want revision 2", rec, err)
	}
	if n := count(t, pool, "select count(*) from registrum.requests where record_id = '"+id+"' and state = 'submitted'"); n != 1 {
		t.Fatal("the write expecting the request as read did not move it")
	}
	// The same expectation again finds it moved: the write above changed it.
	if err := expect("k-again", 1, store.RequestDraft, 1); !errors.Is(err, store.ErrMoved) {
		t.Fatalf("expecting the request as it was: err = %v, want ErrMoved", err)
	}
	// A record that does not exist is moved too.
	other := uuid.NewString()
	_, _, err = s.Write(ctx, &store.Idempotency{KeyReference: "k-none", RequestDigest: "d"}, func(w *store.Writer) (*store.Outcome, error) {
		w.ExpectRequest(hh, other, 1, store.RequestDraft, 1)
		return &store.Outcome{Status: 200}, nil
	})
	if !errors.Is(err, store.ErrMoved) {
		t.Fatalf("expecting a request that does not exist: err = %v, want ErrMoved", err)
	}
	if n := keys(); n != 1 {
		t.Fatalf("%d keys, want the one write that committed", n)
	}
}

// TestExpectRequestWaitsForAConcurrentWriterAndJudgesItsResult holds the
// lock: a write that expects a request while another transaction holds
// its row waits for it, and is refused when that transaction moved the
// request, or commits when it rolled back.
func TestExpectRequestWaitsForAConcurrentWriterAndJudgesItsResult(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	hh := s.Package().EntityByID("household")
	id := newDraft(t, s)
	for _, commit := range []bool{false, true} {
		err := whileHeld(t, pool, `UPDATE registrum_data.e_household SET revision = revision + 1 WHERE record_id = $1`, id, commit, func() error {
			_, _, err := s.Write(ctx, &store.Idempotency{KeyReference: uuid.NewString(), RequestDigest: "d"}, func(w *store.Writer) (*store.Outcome, error) {
				w.ExpectRequest(hh, id, 1, store.RequestDraft, 1)
				return &store.Outcome{Status: 200}, nil
			})
			return err
		})
		switch {
		case commit && !errors.Is(err, store.ErrMoved):
			t.Fatalf("after the concurrent writer committed: err = %v, want ErrMoved", err)
		case !commit && err != nil:
			t.Fatalf("after the concurrent writer rolled back: err = %v, want the write committed", err)
		}
	}
}

// whileHeld runs write while another transaction holds the rows stmt
// (with $1 = id) changes, checks that write waits for their lock, then ends
// that transaction (committing it when commit) and returns write's error.
func whileHeld(t *testing.T, pool *pgxpool.Pool, stmt, id string, commit bool, write func() error) error {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A failed check below must not leave the row locked and the pool
	// waiting for this connection.
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, stmt, id); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- write() }()
	waitFor(t, pool, "select count(*) from pg_locks where not granted and locktype = 'transactionid'")
	if commit {
		err = tx.Commit(ctx)
	} else {
		err = tx.Rollback(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	return <-done
}

// waitFor polls the count q until it is above zero, for up to 10 s.
func waitFor(t *testing.T, pool *pgxpool.Pool, q string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for count(t, pool, q) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still none after 10 s: %s", q)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// submitAsRead writes, under idempotency key key, what a submit writes on
// the household draft id after expecting it at revision, state and proposal
// version: the touch of its record, its state move and the stored outcome
// with the write's snapshot token.
func submitAsRead(s *store.Store, id, key string, revision int64, state string, version int64) error {
	ctx := context.Background()
	hh := s.Package().EntityByID("household")
	_, _, err := s.Write(ctx, &store.Idempotency{KeyReference: key, RequestDigest: "d"}, func(w *store.Writer) (*store.Outcome, error) {
		w.ExpectRequest(hh, id, revision, state, version)
		rec := &store.Record{Entity: hh, ID: id, Revision: revision, Lifecycle: "active", Values: map[string]any{"name": "one"}}
		if _, err := w.Touch(ctx, hh, rec, revision, "submit", journal()); err != nil {
			return nil, err
		}
		if err := w.SetRequestState(ctx, hh, id, store.RequestSubmitted, version); err != nil {
			return nil, err
		}
		out := &store.Outcome{Status: 200}
		return out, w.TokenAtCommit(ctx, func(tok string) error {
			out.Body = []byte(`{"snapshot":"` + tok + `"}`)
			return nil
		})
	})
	return err
}

// emptyProposal is a proposal of version, planned on the draft's first
// revision, that writes nothing.
func emptyProposal(version int64) *store.Proposal {
	return &store.Proposal{Version: version, RecordRevision: 1, Planner: "declarative",
		EffectDigest: "sha256:" + strings.Repeat("ab", 32), Plan: []byte(`{"writes":[]}`), SubmitterReference: "owner", SubmitterActor: "a"}
}

// newDraft writes a household at revision 1 with the workflow state of a
// draft request at proposal version 1, and returns its id.
func newDraft(t *testing.T, s *store.Store) string {
	t.Helper()
	ctx := context.Background()
	hh := s.Package().EntityByID("household")
	id := uuid.NewString()
	if _, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		if _, err := w.Create(ctx, hh, id, map[string]any{"name": "one"}, journal()); err != nil {
			return nil, err
		}
		return &store.Outcome{}, w.CreateRequest(ctx, hh, id, "owner")
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestActionInputsOfADraftReadAsTheFullWorkflowRead holds draftColumns: for
// a draft, at its first proposal version and after a revision moved it to
// the next, the submit's read of the workflow state (ActionInputs with
// draftOnly) is the full read (Store.Request); a submitted request reads
// its state without its proposal.
func TestActionInputsOfADraftReadAsTheFullWorkflowRead(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	hh := s.Package().EntityByID("household")
	id := newDraft(t, s)
	key := &store.Idempotency{KeyReference: "unused", RequestDigest: "d"}
	same := func(when string) *store.Request {
		t.Helper()
		full, err := s.Request(ctx, hh, id)
		if err != nil {
			t.Fatal(err)
		}
		stored, rec, light, err := s.ActionInputs(ctx, key, hh, id, true)
		if err != nil || stored != nil || rec == nil || rec.ID != id {
			t.Fatalf("%s: ActionInputs: %v, %v, %v", when, stored, rec, err)
		}
		if full.State == store.RequestDraft {
			full.DBNow, light.DBNow = time.Time{}, time.Time{}
			if !reflect.DeepEqual(full, light) {
				t.Fatalf("%s: the draft's read\n%+v\nis not the full read\n%+v", when, light, full)
			}
		}
		return light
	}
	write := func(fn func(w *store.Writer) error) {
		t.Helper()
		if _, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) { return &store.Outcome{}, fn(w) }); err != nil {
			t.Fatal(err)
		}
	}
	same("a new draft")
	submit := func(version int64) {
		write(func(w *store.Writer) error { return w.SubmitRequest(ctx, hh, id, emptyProposal(version)) })
	}
	submit(1)
	if got := same("submitted"); got.State != store.RequestSubmitted || got.Proposal != nil {
		t.Fatalf("a submitted request's draft read: %+v", got)
	}
	write(func(w *store.Writer) error {
		if err := w.MarkRevised(ctx, hh, id, 1, store.RevisedAsRevision); err != nil {
			return err
		}
		return w.SetRequestState(ctx, hh, id, store.RequestDraft, 2)
	})
	if got := same("a revised draft"); got.ProposalVersion != 2 {
		t.Fatalf("the revised draft reads proposal version %d", got.ProposalVersion)
	}
}

// TestAWriteExpectingTheRequestIsOneRoundTrip holds what ExpectRequest is
// for: a keyed write that expects the request as read, touches its record,
// moves its state and stores its outcome sends it all with BEGIN and
// COMMIT in one round trip.
func TestAWriteExpectingTheRequestIsOneRoundTrip(t *testing.T) {
	s, pool, trips := openCountingStore(t)
	submit := func(id string) error { return submitAsRead(s, id, uuid.NewString(), 1, store.RequestDraft, 1) }
	// Every connection of the pool has the statements prepared (pgx
	// prepares a statement new to a connection in a round trip of its own).
	for range pool.Config().MaxConns {
		if err := submit(newDraft(t, s)); err != nil {
			t.Fatal(err)
		}
	}
	id := newDraft(t, s)
	before := trips.n.Load()
	if err := submit(id); err != nil {
		t.Fatal(err)
	}
	if n := trips.n.Load() - before; n != 1 {
		t.Fatalf("a write expecting the request took %d round trips, want 1", n)
	}
}

// TestLockWithRequestReadsAndLocksBothRows holds LockWithRequest's one
// statement: it reads the record as Store.Get does and the workflow state
// as Store.Request does (a submitted request with its proposal included);
// a missing record or request is ErrNotFound; and it waits for a
// concurrent writer of either row.
func TestLockWithRequestReadsAndLocksBothRows(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	hh := s.Package().EntityByID("household")
	id := newDraft(t, s)
	if _, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		return &store.Outcome{}, w.SubmitRequest(ctx, hh, id, emptyProposal(1))
	}); err != nil {
		t.Fatal(err)
	}
	lock := func(id string) (rec *store.Record, req *store.Request, err error) {
		_, _, werr := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
			rec, req, err = w.LockWithRequest(ctx, hh, id)
			return &store.Outcome{}, nil
		})
		if err == nil {
			err = werr
		}
		return rec, req, err
	}
	rec, req, err := lock(id)
	if err != nil {
		t.Fatal(err)
	}
	wantRec, err := s.Get(ctx, hh, id)
	if err != nil {
		t.Fatal(err)
	}
	wantReq, err := s.Request(ctx, hh, id)
	if err != nil {
		t.Fatal(err)
	}
	req.DBNow, wantReq.DBNow = time.Time{}, time.Time{}
	if !reflect.DeepEqual(rec, wantRec) || !reflect.DeepEqual(req, wantReq) || req.Proposal == nil {
		t.Fatalf("locked read\n%+v\n%+v\nwant\n%+v\n%+v", rec, req, wantRec, wantReq)
	}
	// A record without a request, and no record at all.
	plain := uuid.NewString()
	if _, err := s.Create(ctx, hh, plain, map[string]any{"name": "two"}, journal()); err != nil {
		t.Fatal(err)
	}
	for _, missing := range []string{plain, uuid.NewString()} {
		if rec, req, err := lock(missing); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("lock of %s: %+v, %+v, %v; want ErrNotFound", missing, rec, req, err)
		}
	}
	// Either row held by another transaction: the lock waits for it.
	for _, held := range []string{
		`UPDATE registrum_data.e_household SET revision = revision WHERE record_id = $1`,
		`UPDATE registrum.requests SET state = state WHERE record_id = $1`,
	} {
		if err := whileHeld(t, pool, held, id, false, func() error { _, _, err := lock(id); return err }); err != nil {
			t.Fatalf("after %q rolled back: %v", held, err)
		}
	}
}
