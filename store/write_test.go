package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/registrum/registrum/store"
)

func TestUpdateAndTombstoneAppendRevisionsWithOptimisticChecks(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	hh := s.Package().EntityByID("household")
	id := uuid.NewString()
	if _, err := s.Create(ctx, hh, id, map[string]any{"name": "one"}, journal()); err != nil {
		t.Fatal(err)
	}
	write := func(fn func(w *store.Writer) error) error {
		_, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) { return &store.Outcome{}, fn(w) })
		return err
	}
	if err := write(func(w *store.Writer) error {
		rec, err := w.Update(ctx, hh, id, 1, map[string]any{"name": "two"}, journal())
		if err == nil && rec.Revision != 2 {
			t.Errorf("revision after update = %d", rec.Revision)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := write(func(w *store.Writer) error {
		_, err := w.Update(ctx, hh, id, 1, map[string]any{"name": "stale"}, journal())
		return err
	}); !errors.Is(err, store.ErrStale) {
		t.Fatalf("stale update: err = %v", err)
	}
	if err := write(func(w *store.Writer) error {
		_, err := w.Tombstone(ctx, hh, id, 2, journal())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, hh, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != 3 || got.Lifecycle != "tombstoned" || got.Values["name"] != "two" {
		t.Fatalf("after tombstone: %+v", got)
	}
	if err := write(func(w *store.Writer) error {
		_, err := w.Update(ctx, hh, id, 3, map[string]any{"name": "ghost"}, journal())
		return err
	}); !errors.Is(err, store.ErrStale) {
		t.Fatalf("update of a tombstoned record: err = %v", err)
	}
	if n := count(t, pool, "select count(*) from registrum.revisions where record_id = '"+id+"'"); n != 3 {
		t.Fatalf("revisions = %d, want 3", n)
	}
	// A tombstoned record leaves the unique constraint: its value can be reused.
	// (household has no unique constraint; child does)
	child := s.Package().EntityByID("child")
	cid := uuid.NewString()
	s.Create(ctx, child, cid, map[string]any{"national-id": "REUSE"}, journal())
	if err := write(func(w *store.Writer) error { _, err := w.Tombstone(ctx, child, cid, 1, journal()); return err }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, child, uuid.NewString(), map[string]any{"national-id": "REUSE"}, journal()); err != nil {
		t.Fatalf("value of a tombstoned record not reusable: %v", err)
	}
}

func TestIdempotentWritesReplayConflictAndResolveConcurrency(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	hh := s.Package().EntityByID("household")
	idem := &store.Idempotency{KeyReference: "k1", RequestDigest: "d1"}
	calls := 0
	create := func(idem *store.Idempotency) (*store.Outcome, bool, error) {
		return s.Write(ctx, idem, func(w *store.Writer) (*store.Outcome, error) {
			id := uuid.NewString()
			if _, err := w.Create(ctx, hh, id, map[string]any{"name": "x"}, journal()); err != nil {
				return nil, err
			}
			// The key travels with the first round trip: under a taken
			// key this read fails, and nothing fn queued is written.
			if _, err := w.Lock(ctx, hh, id); err != nil {
				return nil, err
			}
			calls++
			return &store.Outcome{Status: 201, ETag: `"e"`, Location: "/x/" + id, Body: []byte(`{"id":"` + id + `"}`)}, nil
		})
	}
	first, replayed, err := create(idem)
	if err != nil || replayed {
		t.Fatalf("first write: replayed=%v err=%v", replayed, err)
	}
	again, replayed, err := create(idem)
	if err != nil || !replayed {
		t.Fatalf("replay: replayed=%v err=%v", replayed, err)
	}
	if string(again.Body) != string(first.Body) || again.Location != first.Location || again.Status != 201 {
		t.Fatalf("replay %+v differs from %+v", again, first)
	}
	if _, _, err := create(&store.Idempotency{KeyReference: "k1", RequestDigest: "other"}); !errors.Is(err, store.ErrIdempotencyConflict) {
		t.Fatalf("conflict: err = %v", err)
	}
	if calls != 1 {
		t.Fatalf("write ran %d times", calls)
	}
	if n := count(t, pool, "select count(*) from registrum_data.e_household"); n != 1 {
		t.Fatalf("a write and its two replays left %d records", n)
	}
	// A refused write stores nothing: the key can be used again.
	_, _, err = s.Write(ctx, &store.Idempotency{KeyReference: "k2", RequestDigest: "d"}, func(w *store.Writer) (*store.Outcome, error) {
		_, err := w.Create(ctx, hh, uuid.NewString(), map[string]any{"name": "elevenchars"}, journal())
		return nil, err
	})
	var ce *store.ConstraintError
	if !errors.As(err, &ce) {
		t.Fatalf("refused write: err = %v", err)
	}
	if n := count(t, pool, "select count(*) from registrum.idempotency where key_reference = 'k2'"); n != 0 {
		t.Fatalf("a refused write left its key")
	}
	// Concurrent first uses of one key resolve to one write.
	before := count(t, pool, "select count(*) from registrum_data.e_household")
	var wg sync.WaitGroup
	bodies := make(chan string, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, _, err := create(&store.Idempotency{KeyReference: "k3", RequestDigest: "d3"})
			if err != nil {
				t.Error(err)
				return
			}
			bodies <- string(out.Body)
		}()
	}
	wg.Wait()
	close(bodies)
	seen := map[string]bool{}
	for b := range bodies {
		seen[b] = true
	}
	if len(seen) != 1 {
		t.Fatalf("concurrent duplicates answered %d different bodies", len(seen))
	}
	if after := count(t, pool, "select count(*) from registrum_data.e_household"); after != before+1 {
		t.Fatalf("concurrent duplicates wrote %d records", after-before)
	}
}

// TestPipelinedStatementsKeepTheirOrder checks the Writer's pipeline: a
// statement queued for a later round trip is visible to the next read of
// the transaction, and a queued statement that fails fails the write and
// leaves nothing behind.
func TestPipelinedStatementsKeepTheirOrder(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	hh := s.Package().EntityByID("household")
	id := uuid.NewString()
	_, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		if _, err := w.Create(ctx, hh, id, map[string]any{"name": "a"}, journal()); err != nil {
			return nil, err
		}
		// The create is still queued; the lock travels with it and sees it.
		rec, err := w.Lock(ctx, hh, id)
		if err != nil {
			return nil, fmt.Errorf("read after a queued create: %w", err)
		}
		if rec.Revision != 1 || rec.Values["name"] != "a" {
			return nil, fmt.Errorf("read after a queued create: %+v", rec)
		}
		if _, err := w.Update(ctx, hh, id, 1, map[string]any{"name": "b"}, journal()); err != nil {
			return nil, err
		}
		return &store.Outcome{Status: 200}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, "select count(*) from registrum.revisions where record_id = '"+id+"'"); n != 2 {
		t.Fatalf("revisions = %d, want 2", n)
	}

	// A queued statement that fails (a check constraint on the value) is
	// reported by the round trip that carries it, and rolls everything back.
	other := uuid.NewString()
	_, _, err = s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		if _, err := w.Create(ctx, hh, other, map[string]any{"name": "ok"}, journal()); err != nil {
			return nil, err
		}
		if _, err := w.Create(ctx, hh, uuid.NewString(), map[string]any{"name": "elevenchars"}, journal()); err != nil {
			return nil, err
		}
		_, err := w.Lock(ctx, hh, other)
		return nil, err
	})
	var ce *store.ConstraintError
	if !errors.As(err, &ce) {
		t.Fatalf("queued refused create: err = %v, want a ConstraintError", err)
	}
	if n := count(t, pool, "select count(*) from registrum.revisions where record_id = '"+other+"'"); n != 0 {
		t.Fatalf("a failed write left %d revisions", n)
	}
}

// TestCreateManyWritesWhatCreatesWrite: CreateMany's records, revisions and
// audit entries are the rows Create writes one by one (ids and times
// aside), a missing value stays NULL, and a violated constraint rolls the
// whole batch back.
func TestCreateManyWritesWhatCreatesWrite(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	child := s.Package().EntityByID("child")
	one, many := []string{uuid.NewString(), uuid.NewString()}, []string{uuid.NewString(), uuid.NewString()}
	values := []map[string]any{{"national-id": "A"}, {"national-id": "Z"}}
	for i, id := range one {
		v := map[string]any{}
		for k, x := range values[i] {
			v[k] = x.(string) + "1"
		}
		if _, err := s.Create(ctx, child, id, v, journal()); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		var news []store.NewRecord
		for i, id := range many {
			v := map[string]any{}
			for k, x := range values[i] {
				v[k] = x.(string) + "2"
			}
			news = append(news, store.NewRecord{ID: id, Values: v, Journal: journal()})
		}
		recs, err := w.CreateMany(ctx, child, news)
		if err == nil && (len(recs) != 2 || recs[1].ID != many[1] || recs[0].Revision != 1) {
			t.Errorf("records %+v", recs)
		}
		return &store.Outcome{}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	shape := func(ids []string) string {
		var out string
		for _, id := range ids {
			var rec, rev, audit string
			pool.QueryRow(ctx, `SELECT revision || lifecycle || package_revision || left(f_national_id, 1) || coalesce(f_age::text, '<null>') || (created_at = updated_at)::text FROM registrum_data.e_child WHERE record_id = $1`, id).Scan(&rec)
			pool.QueryRow(ctx, `SELECT entity_id || revision || lifecycle || package_revision || coalesce(change_context::text, '<null>') FROM registrum.revisions WHERE record_id = $1`, id).Scan(&rev)
			pool.QueryRow(ctx, `SELECT count(*) || operation || outcome || entity_id || revision || coalesce(principal_reference, '<null>') FROM registrum.audit WHERE revision = 1 AND operation = 'create' AND entity_id = 'child' GROUP BY operation, outcome, entity_id, revision, principal_reference`).Scan(&audit)
			out += rec + "|" + rev + "|" + audit + "\n"
		}
		return out
	}
	if a, b := shape(one), shape(many); a != b || a == "" {
		t.Fatalf("Create wrote\n%s, CreateMany\n%s", a, b)
	}
	// A duplicate national id (unique per child) in the batch: nothing stays.
	before := count(t, pool, "select count(*) from registrum.revisions")
	_, _, err = s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		_, err := w.CreateMany(ctx, child, []store.NewRecord{{ID: uuid.NewString(), Values: map[string]any{"national-id": "B"}, Journal: journal()},
			{ID: uuid.NewString(), Values: map[string]any{"national-id": "A1"}, Journal: journal()}})
		return &store.Outcome{}, err
	})
	var ce *store.ConstraintError
	if !errors.As(err, &ce) {
		t.Fatalf("duplicate in CreateMany: %v", err)
	}
	if after := count(t, pool, "select count(*) from registrum.revisions"); after != before {
		t.Fatalf("a refused CreateMany left %d revisions", after-before)
	}
}

// TestATakenKeyCommitsNothingFromTheRoundTripThatCarriesCommit: a write
// whose statements are all queued sends BEGIN, the key, its statements and
// COMMIT in one round trip. Under a key taken before, the key's insert
// fails first, so PostgreSQL runs neither the statements nor COMMIT: the
// replay answers the stored outcome and nothing more is written. A write
// refused before any round trip under a taken key is answered as a replay
// too, and one under a free key leaves no key behind.
func TestATakenKeyCommitsNothingFromTheRoundTripThatCarriesCommit(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	hh := s.Package().EntityByID("household")
	idem := &store.Idempotency{KeyReference: "one-trip", RequestDigest: "d"}
	queuedOnly := func() (*store.Outcome, bool, error) {
		return s.Write(ctx, idem, func(w *store.Writer) (*store.Outcome, error) {
			id := uuid.NewString()
			if _, err := w.Create(ctx, hh, id, map[string]any{"name": "q"}, journal()); err != nil {
				return nil, err
			}
			return &store.Outcome{Status: 201, Body: []byte(`{"id":"` + id + `"}`)}, nil
		})
	}
	first, replayed, err := queuedOnly()
	if err != nil || replayed {
		t.Fatalf("first write: replayed=%v err=%v", replayed, err)
	}
	for range 3 {
		again, replayed, err := queuedOnly()
		if err != nil || !replayed || string(again.Body) != string(first.Body) {
			t.Fatalf("replay: replayed=%v err=%v body %s, want %s", replayed, err, again.Body, first.Body)
		}
	}
	if n := count(t, pool, "select count(*) from registrum_data.e_household"); n != 1 {
		t.Fatalf("a write and three replays in one round trip each left %d records", n)
	}
	if n := count(t, pool, "select count(*) from registrum.revisions"); n != 1 {
		t.Fatalf("a write and three replays in one round trip each left %d revisions", n)
	}

	refusal := errors.New("refused before any round trip")
	out, replayed, err := s.Write(ctx, idem, func(w *store.Writer) (*store.Outcome, error) { return nil, refusal })
	if err != nil || !replayed || string(out.Body) != string(first.Body) {
		t.Fatalf("refusal under a taken key: replayed=%v err=%v", replayed, err)
	}
	free := &store.Idempotency{KeyReference: "free", RequestDigest: "d"}
	if _, _, err := s.Write(ctx, free, func(w *store.Writer) (*store.Outcome, error) { return nil, refusal }); !errors.Is(err, refusal) {
		t.Fatalf("refusal under a free key: err = %v, want the refusal", err)
	}
	if n := count(t, pool, "select count(*) from registrum.idempotency where key_reference = 'free'"); n != 0 {
		t.Fatalf("a refused write left its key")
	}
	// Every connection went back to the pool outside a transaction.
	if n := count(t, pool, "select count(*) from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'"); n != 0 {
		t.Fatalf("%d connections were left in a transaction", n)
	}
}
