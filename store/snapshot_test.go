package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

// snapshotIDs reads every live record of household in snap.
func snapshotIDs(t *testing.T, s *store.Store, snap store.Snapshot) []string {
	t.Helper()
	revs, err := s.SnapshotRecords(context.Background(), s.Package().EntityByID("household"), snap, "", 100000)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(revs))
	for i, r := range revs {
		ids[i] = r.RecordID
	}
	return ids
}

// A state captured while writers run, and the state each write's own
// snapshot names, read again after every writer finished, are the same as
// when they were first read: no transaction a snapshot did not see becomes
// visible in it later. Each write's snapshot shows its own record. No lock
// orders the writers.
func TestSnapshotsReproduceUnderConcurrentWrites(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	hh := s.Package().EntityByID("household")
	type capture struct {
		snap store.Snapshot
		own  string
		seen []string
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		captures []capture
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				id := uuid.NewString()
				var snap store.Snapshot
				_, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
					if _, err := w.Create(ctx, hh, id, map[string]any{"name": "n"}, journal()); err != nil {
						return nil, err
					}
					var err error
					snap, err = w.Snapshot(ctx)
					return &store.Outcome{}, err
				})
				if err != nil {
					t.Error(err)
					return
				}
				seen := snapshotIDs(t, s, snap)
				mu.Lock()
				captures = append(captures, capture{snap, id, seen})
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 40 {
			snap, err := s.CurrentSnapshot(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			seen := snapshotIDs(t, s, snap)
			mu.Lock()
			captures = append(captures, capture{snap: snap, seen: seen})
			mu.Unlock()
		}
	}()
	wg.Wait()
	<-done
	if len(captures) != 120 {
		t.Fatalf("%d captures", len(captures))
	}
	for _, c := range captures {
		now := snapshotIDs(t, s, c.snap)
		if !slices.Equal(now, c.seen) {
			t.Errorf("snapshot %s: %d records when captured, %d now", c.snap, len(c.seen), len(now))
		}
		if c.own != "" && !slices.Contains(now, c.own) {
			t.Errorf("the snapshot of a write %s lacks its own record", c.snap)
		}
		if err := s.CheckSnapshot(ctx, c.snap); err != nil {
			t.Errorf("snapshot %s: %v", c.snap, err)
		}
	}
}

// A transaction in progress when a state is captured stays out of it after
// it commits; a tombstone leaves the record out of the states after it and
// not of those before.
func TestSnapshotLeavesOutTransactionsInProgressAndLaterTombstones(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	hh := s.Package().EntityByID("household")
	first := uuid.NewString()
	if _, err := s.Create(ctx, hh, first, map[string]any{"name": "a"}, journal()); err != nil {
		t.Fatal(err)
	}
	written, release := make(chan struct{}), make(chan struct{})
	late := uuid.NewString()
	var lateSnap store.Snapshot
	errc := make(chan error, 1)
	go func() {
		_, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
			if _, err := w.Create(ctx, hh, late, map[string]any{"name": "late"}, journal()); err != nil {
				return nil, err
			}
			var err error
			if lateSnap, err = w.Snapshot(ctx); err != nil {
				return nil, err
			}
			close(written)
			<-release
			return &store.Outcome{}, nil
		})
		errc <- err
	}()
	<-written
	during, err := s.CurrentSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got := snapshotIDs(t, s, during); !slices.Equal(got, []string{first}) {
		t.Fatalf("state captured during a write: %v, want only %s", got, first)
	}
	if got := snapshotIDs(t, s, lateSnap); len(got) != 2 || !slices.Contains(got, late) {
		t.Fatalf("the write's own state: %v", got)
	}
	// A revision appended after the snapshot was taken is refused.
	if _, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		if _, err := w.Snapshot(ctx); err != nil {
			return nil, err
		}
		_, err := w.Create(ctx, hh, uuid.NewString(), map[string]any{"name": "x"}, journal())
		return &store.Outcome{}, err
	}); err == nil {
		t.Fatal("a revision after the snapshot was accepted")
	}
	var tomb store.Snapshot
	if _, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		if _, err := w.Tombstone(ctx, hh, first, 1, journal()); err != nil {
			return nil, err
		}
		var err error
		tomb, err = w.Snapshot(ctx)
		return &store.Outcome{}, err
	}); err != nil {
		t.Fatal(err)
	}
	if got := snapshotIDs(t, s, tomb); !slices.Equal(got, []string{late}) {
		t.Fatalf("after the tombstone: %v", got)
	}
	if got := snapshotIDs(t, s, lateSnap); len(got) != 2 {
		t.Fatalf("before the tombstone, read after it: %v", got)
	}
	// A snapshot that sees transactions not yet started is not of this history.
	future := store.Snapshot{Xmin: tomb.Xmax + 1000, Xmax: tomb.Xmax + 1000}
	if err := s.CheckSnapshot(ctx, future); err != store.ErrNoSnapshot {
		t.Fatalf("future snapshot: %v", err)
	}
}

// History restored under another transaction counter (stored ids ahead of
// it) is rebased when a store opens: those revisions move to the current
// transaction, so the latest state sees them, and the history tag changes,
// so tokens of before are refused.
func TestOpenRebasesHistoryWrittenUnderAnotherCounter(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	hh := s.Package().EntityByID("household")
	id := uuid.NewString()
	if _, err := s.Create(ctx, hh, id, map[string]any{"name": "r"}, journal()); err != nil {
		t.Fatal(err)
	}
	before := s.HistoryTag()
	if _, err := pool.Exec(ctx, `UPDATE registrum.revisions SET xid = ((pg_current_xact_id()::text)::bigint + 1000000)::text::xid8`); err != nil {
		t.Fatal(err)
	}
	// The record's row is written again after each snapshot below, so
	// that the snapshot reads the record from its revisions.
	touch := func() {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE registrum_data.e_household SET revision = revision`); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := s.CurrentSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	touch()
	if got := snapshotIDs(t, s, snap); len(got) != 0 {
		t.Fatalf("ids ahead of the counter are visible: %v", got)
	}
	reopened, err := store.Open(ctx, pool, s.Package(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if reopened.HistoryTag() == before {
		t.Fatal("the history tag did not change")
	}
	snap, err = reopened.CurrentSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	touch()
	if got := snapshotIDs(t, reopened, snap); !slices.Equal(got, []string{id}) {
		t.Fatalf("after the rebase: %v", got)
	}
	again, err := store.Open(ctx, pool, s.Package(), store.Options{})
	if err != nil || again.HistoryTag() != reopened.HistoryTag() {
		t.Fatalf("a second open changed the tag again: %v", err)
	}
}

// A dump restored into another database keeps the stored transaction ids,
// and the new database's counter may already be past them (here the copy
// shares the cluster's counter): the origin of the ids changed, so opening
// the copy draws a new history tag and tokens of the original are refused
// there; the original keeps its tag, and a database opened for the first
// time since the origin was recorded keeps its tag too.
func TestOpenDrawsANewTagForHistoryRestoredElsewhere(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, pool, testPackage(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hh := s.Package().EntityByID("household")
	id := uuid.NewString()
	if _, err := s.Create(ctx, hh, id, map[string]any{"name": "r"}, journal()); err != nil {
		t.Fatal(err)
	}
	tag := s.HistoryTag()
	if _, err := pool.Exec(ctx, `UPDATE registrum.history_state SET origin = NULL`); err != nil {
		t.Fatal(err)
	}
	if first, err := store.Open(ctx, pool, s.Package(), store.Options{}); err != nil || first.HistoryTag() != tag {
		t.Fatalf("recording the origin for the first time changed the tag: %v", err)
	}
	if n := count(t, pool, `SELECT count(*) FROM registrum.history_state WHERE origin IS NOT NULL`); n != 1 {
		t.Fatal("the origin was not recorded")
	}
	pool.Close()

	copyDSN := storetest.CopyDatabase(t, dsn)
	copyPool, err := pgxpool.New(ctx, copyDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer copyPool.Close()
	restored, err := store.Open(ctx, copyPool, s.Package(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if restored.HistoryTag() == tag {
		t.Fatal("the copy kept the original's history tag: its tokens would be read against another counter")
	}
	snap, err := restored.CurrentSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := snapshotIDs(t, restored, snap); !slices.Equal(got, []string{id}) {
		t.Fatalf("the copy's latest state: %v", got)
	}
	if again, err := store.Open(ctx, copyPool, s.Package(), store.Options{}); err != nil || again.HistoryTag() != restored.HistoryTag() {
		t.Fatalf("a second open of the copy changed the tag again: %v", err)
	}
	original, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer original.Close()
	back, err := store.Open(ctx, original, s.Package(), store.Options{})
	if err != nil || back.HistoryTag() != tag {
		t.Fatalf("the original's tag changed: %v", err)
	}
	snap, err = back.CurrentSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.CheckSnapshot(ctx, snap); err != nil {
		t.Fatalf("a snapshot of the original: %v", err)
	}

	// A host that outlives the restore of its database under the same name
	// (it reconnects to the copy without starting again) holds the old tag:
	// its snapshot reads are refused until it starts again.
	storetest.ReplaceDatabase(t, dsn, copyDSN)
	original.Reset() // its connections were ended: the next ones reach the copy
	snap, err = back.CurrentSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.CheckSnapshot(ctx, snap); err != store.ErrNoSnapshot {
		t.Fatalf("a snapshot read by a host that outlived the restore: %v, want ErrNoSnapshot", err)
	}
	if restarted, err := store.Open(ctx, original, s.Package(), store.Options{}); err != nil || restarted.HistoryTag() == tag {
		t.Fatalf("the restored database opened under the old tag: %v", err)
	}
}

// A snapshot read takes a record from its row when the snapshot sees the
// row's writer, and from its latest revision the snapshot sees otherwise:
// a record patched, tombstoned or created after the snapshot reads as it
// was, also after VACUUM froze the rows. The journal data of these writes
// differs from the records' values, so each answer tells which one it read.
func TestSnapshotRecordsTakeRowsTheSnapshotSeesAndRevisionsOfTheRest(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	hh := s.Package().EntityByID("household")
	withData := func(data string) store.Journal {
		j := journal()
		j.Data = []byte(data)
		return j
	}
	a, b, d := uuid.NewString(), uuid.NewString(), uuid.NewString()
	for id, name := range map[string]string{a: "a1", b: "b1", d: "d1"} {
		if _, err := s.Create(ctx, hh, id, map[string]any{"name": name}, withData(`{"name":"`+name+` (revision)"}`)); err != nil {
			t.Fatal(err)
		}
	}
	before, err := s.CurrentSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := uuid.NewString()
	if _, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		if _, err := w.Update(ctx, hh, a, 1, map[string]any{"name": "a2"}, withData(`{"name":"a2 (revision)"}`)); err != nil {
			return nil, err
		}
		if _, err := w.Tombstone(ctx, hh, b, 1, withData(`{"name":"b1 (revision)"}`)); err != nil {
			return nil, err
		}
		_, err := w.Create(ctx, hh, c, map[string]any{"name": "c1"}, withData(`{"name":"c1 (revision)"}`))
		return &store.Outcome{}, err
	}); err != nil {
		t.Fatal(err)
	}
	after, err := s.CurrentSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "VACUUM (FREEZE) registrum_data.e_household"); err != nil {
		t.Fatal(err)
	}
	// state renders each record as id:revision:where it was read from.
	state := func(snap store.Snapshot) map[string]string {
		t.Helper()
		recs, err := s.SnapshotRecords(ctx, hh, snap, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for i, r := range recs {
			if i > 0 && recs[i-1].RecordID >= r.RecordID {
				t.Fatalf("records out of id order: %s after %s", r.RecordID, recs[i-1].RecordID)
			}
			switch {
			case r.Values != nil && r.Data == nil:
				got[r.RecordID] = fmt.Sprintf("%d:row %v", r.Revision, r.Values["name"])
			case r.Values == nil && r.Data != nil:
				got[r.RecordID] = fmt.Sprintf("%d:revision %s", r.Revision, r.Data)
			default:
				t.Fatalf("record %s: values %v and data %s", r.RecordID, r.Values, r.Data)
			}
			if r.PackageRevision != s.Package().Revision {
				t.Errorf("record %s: package revision %q", r.RecordID, r.PackageRevision)
			}
		}
		return got
	}
	for name, tc := range map[string]struct {
		snap store.Snapshot
		want map[string]string
	}{
		"before": {before, map[string]string{
			a: `1:revision {"name": "a1 (revision)"}`,
			b: `1:revision {"name": "b1 (revision)"}`,
			d: "1:row d1",
		}},
		"after": {after, map[string]string{a: "2:row a2", c: "1:row c1", d: "1:row d1"}},
	} {
		if got := state(tc.snap); !maps.Equal(got, tc.want) {
			t.Errorf("%s the writes: %v, want %v", name, got, tc.want)
		}
	}
	// The same records with the snapshot's check in the round trip, which
	// refuses a token of another history and a snapshot of the future.
	tag := s.HistoryTag()
	if recs, err := s.CheckedSnapshotRecords(ctx, &tag, hh, before, "", 100); err != nil || len(recs) != 3 {
		t.Errorf("checked read of a token: %d records, %v", len(recs), err)
	}
	other := tag
	other[0] ^= 1
	if recs, err := s.CheckedSnapshotRecords(ctx, &other, hh, before, "", 100); !errors.Is(err, store.ErrOtherHistory) || recs != nil {
		t.Errorf("a token of another history: %d records, %v", len(recs), err)
	}
	future := store.Snapshot{Xmin: after.Xmax + 1000, Xmax: after.Xmax + 1000}
	if recs, err := s.CheckedSnapshotRecords(ctx, nil, hh, future, "", 100); !errors.Is(err, store.ErrNoSnapshot) || recs != nil {
		t.Errorf("a snapshot of the future: %d records, %v", len(recs), err)
	}
}

// States captured while writers patch records, some holding their
// transaction open across captures, read the same when read again after
// every writer finished: a record read from its row when first captured
// reads from its revisions later, and the two agree. The journal data of
// every write holds the values written, as the host's does.
func TestSnapshotsReproduceUnderConcurrentUpdates(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	hh := s.Package().EntityByID("household")
	named := func(name string) store.Journal {
		j := journal()
		j.Data = []byte(`{"name":"` + name + `"}`)
		return j
	}
	ids := make([]string, 8)
	for i := range ids {
		ids[i] = uuid.NewString()
		if _, err := s.Create(ctx, hh, ids[i], map[string]any{"name": "v0"}, named("v0")); err != nil {
			t.Fatal(err)
		}
	}
	// state renders every live record as id → revision:name.
	state := func(snap store.Snapshot) (map[string]string, error) {
		recs, err := s.SnapshotRecords(ctx, hh, snap, "", 100)
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, r := range recs {
			name := r.Values["name"]
			if r.Values == nil {
				var d map[string]any
				if err := json.Unmarshal(r.Data, &d); err != nil {
					return nil, err
				}
				name = d["name"]
			}
			out[r.RecordID] = fmt.Sprintf("%d:%v", r.Revision, name)
		}
		return out, nil
	}
	type capture struct {
		snap store.Snapshot
		seen map[string]string
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		captures []capture
		writes   atomic.Int64
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 40 {
				id := ids[(w*7+n)%len(ids)]
				cur, err := s.Get(ctx, hh, id)
				if err != nil {
					t.Error(err)
					return
				}
				name := fmt.Sprintf("v%d-%d", w, n)
				_, _, err = s.Write(ctx, nil, func(wr *store.Writer) (*store.Outcome, error) {
					if _, err := wr.Update(ctx, hh, id, cur.Revision, map[string]any{"name": name}, named(name)); err != nil {
						return nil, err
					}
					if n%3 == 0 {
						time.Sleep(3 * time.Millisecond) // in progress across captures
					}
					return &store.Outcome{}, nil
				})
				if err == nil {
					writes.Add(1)
				} else if !errors.Is(err, store.ErrStale) {
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 60 {
			snap, err := s.CurrentSnapshot(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			st, err := state(snap)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			captures = append(captures, capture{snap, st})
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	<-done
	if writes.Load() < 40 {
		t.Fatalf("only %d writes committed", writes.Load())
	}
	for _, c := range captures {
		again, err := state(c.snap)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(again, c.seen) {
			t.Errorf("snapshot %v: %v when captured, %v now", c.snap, c.seen, again)
		}
	}
}

// The store widens a 32-bit transaction id to the 64-bit id at most 2³²
// below the next id of the statement's snapshot with the same low 32 bits,
// for ids on both sides of that next id's low bits (the distances 0, 1 and
// 2³² − 1 and the ids that wrap past 2³² among them), as the widening by
// epoch that it replaced does.
func TestRowWriterWidensIdsBelowTheNextId(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, storetest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var next uint64
	if err := pool.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&next); err != nil {
		t.Fatal(err)
	}
	low := next & 0xFFFFFFFF
	var ids []string
	for _, d := range []uint64{0, 1, 2, 3, 1000, 1 << 31, 1<<31 + 1, 1<<32 - 3, 1<<32 - 2, 1<<32 - 1} {
		x := (low - d) & 0xFFFFFFFF
		if x >= 3 { // age() counts normal ids only (0, 1 and 2 are reserved)
			ids = append(ids, strconv.FormatUint(x, 10))
		}
	}
	for _, x := range []uint64{3, 4, 0xFFFFFFFF, 0xFFFFFFFE} {
		ids = append(ids, strconv.FormatUint(x, 10))
	}
	// One statement, so that the next id read beside the widened ones is the one they were widened against.
	rows, err := pool.Query(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint, x.id::text, `+store.RowWriterOf("x.id")+`
FROM (SELECT unnest($1::text[])::xid AS id) x`, ids)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var m, got int64
		var id string
		if err := rows.Scan(&m, &id, &got); err != nil {
			t.Fatal(err)
		}
		x, _ := strconv.ParseInt(id, 10, 64)
		// The value in [m − 2³², m) whose low 32 bits are x's.
		want := (m>>32)<<32 + x
		if want >= m {
			want -= 1 << 32
		}
		if got != want {
			t.Errorf("id %s below next id %d: widened to %d, want %d", id, m, got, want)
		}
		n++
	}
	if err := rows.Err(); err != nil || n != len(ids) {
		t.Fatalf("%d rows of %d: %v", n, len(ids), err)
	}
}
