package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/registrum/registrum/store"
)

// openRun stores an open run of households of two chunks for principal.
func openRun(t *testing.T, s *store.Store, principal string) *store.Run {
	t.Helper()
	pkg := s.Package()
	r, err := s.CreateRun(context.Background(), &store.Run{RunID: uuid.Must(uuid.NewV7()).String(), PrincipalReference: principal,
		EntityID: "household", Operation: "create", ProfileID: "clerk", PackageRevision: pkg.Revision, SchemaFingerprint: pkg.SchemaFingerprint,
		InputDigest: strings.Repeat("a", 64), InputLength: 100, ItemCount: 2, ChunkCount: 2, ChunkAlgorithmVersion: "v1",
		MaximumItems: 10, MaximumBytes: 1 << 20, CommittedPrefixDigest: strings.Repeat("0", 64)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// chunkReceipt is the receipt commitChunk stores, with the token tok.
func chunkReceipt(tok string) []byte { return []byte(`{"snapshot":"` + tok + `","results":[]}`) }

// commitChunk commits chunk index of run r, one household of id, its
// receipt stored with the snapshot of its commit; a chunk committed before
// answers its stored receipt.
func commitChunk(ctx context.Context, s *store.Store, r *store.Run, index int64, id string) (*store.Outcome, error) {
	hh := s.Package().EntityByID("household")
	out, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		run, done, err := w.LockRunWithChunk(ctx, "household", r.RunID, r.PrincipalReference, r.ProfileID, index)
		if err != nil {
			return nil, err
		}
		if done != nil {
			return &store.Outcome{Body: done.Receipt}, nil
		}
		if _, err := w.Create(ctx, hh, id, map[string]any{"name": "c"}, journal()); err != nil {
			return nil, err
		}
		w.StoresAnswer()
		out := &store.Outcome{Status: 200}
		if err := w.TokenAtCommit(ctx, func(stand string) error {
			out.Body = chunkReceipt(stand)
			return nil
		}); err != nil {
			return nil, err
		}
		return out, w.CommitChunk(ctx, run, store.Chunk{Index: index, Digest: strings.Repeat("b", 64), PrefixDigest: strings.Repeat("c", 64),
			ItemCount: 1, EndItem: index + 1, Receipt: out.Body}, index == 1, r.PrincipalReference, strings.Repeat("f", 32))
	})
	return out, err
}

// A chunk takes two round trips: one locks the caller's run and reads the
// chunk's index, the other carries the records, the receipt stored with
// the snapshot read in the same statement, the checkpoint and COMMIT. The
// answer carries the token of a state with the chunk's record; every read
// of the stored receipt makes the same bytes again.
func TestAChunkStoresItsReceiptWithTheSnapshotOfItsCommit(t *testing.T) {
	ctx := context.Background()
	s, pool, trips := openCountingStore(t)
	hh := s.Package().EntityByID("household")
	receipt := chunkReceipt
	chunk := func(r *store.Run, index int64, id string) (*store.Outcome, error) {
		return commitChunk(ctx, s, r, index, id)
	}
	// Every connection of the pool has the statements prepared.
	for range pool.Config().MaxConns {
		if _, err := chunk(openRun(t, s, "warm"), 0, uuid.NewString()); err != nil {
			t.Fatal(err)
		}
	}
	r := openRun(t, s, "owner")
	id := uuid.NewString()
	before := trips.n.Load()
	out, err := chunk(r, 0, id)
	if err != nil {
		t.Fatal(err)
	}
	if n := trips.n.Load() - before; n != 2 {
		t.Errorf("a chunk took %d round trips, want 2", n)
	}
	var got struct{ Snapshot string }
	if err := json.Unmarshal(out.Body, &got); err != nil || !bytes.Equal(out.Body, receipt(got.Snapshot)) {
		t.Fatalf("answer %s (%v)", out.Body, err)
	}
	if ids := snapshotIDs(t, s, snapshotOfToken(t, got.Snapshot)); !slices.Contains(ids, id) {
		t.Fatalf("the receipt's state lacks the chunk's record: %v", ids)
	}
	// Stored without the token, made again on every read.
	if n := count(t, pool, "select count(*) from registrum.ingestion_run_chunks where run_id = '"+r.RunID+"' and receipt_token is not null and position('"+got.Snapshot+"' in convert_from(receipt, 'UTF8')) = 0"); n != 1 {
		t.Errorf("%d receipts stored without their token and with what it is made of, want 1", n)
	}
	stored, err := s.Chunk(ctx, r.RunID, 0)
	if err != nil || !bytes.Equal(stored.Receipt, out.Body) {
		t.Fatalf("stored receipt %s (%v), want %s", stored.Receipt, err, out.Body)
	}
	replay, err := chunk(r, 0, uuid.NewString())
	if err != nil || !bytes.Equal(replay.Body, out.Body) {
		t.Fatalf("replayed receipt %s (%v), want %s", replay.Body, err, out.Body)
	}
	// A chunk's receipt is stored only with its snapshot: without
	// StoresAnswer the chunk is refused, nothing written.
	runsBefore := count(t, pool, "select count(*) from registrum.ingestion_run_chunks")
	_, _, err = s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		run, _, err := w.LockRunWithChunk(ctx, "household", r.RunID, r.PrincipalReference, r.ProfileID, 1)
		if err != nil {
			return nil, err
		}
		out := &store.Outcome{Status: 200}
		if err := w.TokenAtCommit(ctx, func(tok string) error { out.Body = receipt(tok); return nil }); err != nil {
			return nil, err
		}
		return out, w.CommitChunk(ctx, run, store.Chunk{Index: 1, Digest: strings.Repeat("b", 64), PrefixDigest: strings.Repeat("a", 64),
			ItemCount: 1, EndItem: 2, Receipt: out.Body}, true, r.PrincipalReference, strings.Repeat("f", 32))
	})
	if err == nil || count(t, pool, "select count(*) from registrum.ingestion_run_chunks") != runsBefore {
		t.Fatalf("a chunk stored without its snapshot: %v", err)
	}
	// A receipt rendered for storing but never stored: refused, nothing written.
	_, _, err = s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		if _, err := w.Create(ctx, hh, uuid.NewString(), map[string]any{"name": "lost"}, journal()); err != nil {
			return nil, err
		}
		w.StoresAnswer()
		out := &store.Outcome{Status: 200}
		return out, w.TokenAtCommit(ctx, func(stand string) error { out.Body = receipt(stand); return nil })
	})
	if err == nil || count(t, pool, "select count(*) from registrum_data.e_household where f_name = 'lost'") != 0 {
		t.Fatalf("an answer rendered for storing and not stored committed: %v", err)
	}
}

// The lock finds only the caller's run under its profile: another
// principal's run, or the run under another profile, is not found and is
// not waited for while its owner holds it.
func TestAChunkLocksOnlyTheCallersRun(t *testing.T) {
	ctx := context.Background()
	s, _, _ := openCountingStore(t)
	r := openRun(t, s, "owner")
	held := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
			if _, _, err := w.LockRunWithChunk(ctx, "household", r.RunID, "owner", "clerk", 0); err != nil {
				close(held)
				return nil, err
			}
			close(held)
			<-release
			return nil, errors.New("released")
		})
		done <- err
	}()
	<-held
	defer func() { close(release); <-done }()
	for _, who := range [][2]string{{"intruder", "clerk"}, {"owner", "auditor"}, {"", "clerk"}} {
		// Waiting for the owner's lock would end in the deadline instead.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, _, err := s.Write(wctx, nil, func(w *store.Writer) (*store.Outcome, error) {
			_, _, err := w.LockRunWithChunk(wctx, "household", r.RunID, who[0], who[1], 0)
			return nil, err
		})
		cancel()
		if !errors.Is(err, store.ErrRunNotFound) {
			t.Errorf("%s under %s: %v, want ErrRunNotFound", who[0], who[1], err)
		}
	}
}

// Writes queued after QueueRunLock travel in the lock's round trip and run
// once the lock is granted: a chunk of creates is two round trips with its
// records written in the first, so nothing of the host's work stands
// between the lock and the inserts. The lock's result is known after that
// round trip; a caller that is refused there rolls the writes back.
func TestWritesQueuedAfterTheRunLockTravelWithIt(t *testing.T) {
	ctx := context.Background()
	s, pool, trips := openCountingStore(t)
	hh := s.Package().EntityByID("household")
	chunk := func(r *store.Run, principal string, index int64, name string) error {
		_, _, err := s.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
			lock := w.QueueRunLock("household", r.RunID, principal, r.ProfileID, index)
			if _, err := w.CreateMany(ctx, hh, []store.NewRecord{{ID: uuid.NewString(), Values: map[string]any{"name": name}, Journal: journal()}}); err != nil {
				return nil, err
			}
			if err := w.Flush(ctx); err != nil {
				return nil, err
			}
			run, done, err := lock.Result()
			if err != nil {
				return nil, err
			}
			if done != nil {
				return nil, errors.New("committed already")
			}
			w.StoresAnswer()
			out := &store.Outcome{Status: 200}
			if err := w.TokenAtCommit(ctx, func(stand string) error { out.Body = []byte(`{"snapshot":"` + stand + `"}`); return nil }); err != nil {
				return nil, err
			}
			return out, w.CommitChunk(ctx, run, store.Chunk{Index: index, Digest: strings.Repeat("b", 64), PrefixDigest: strings.Repeat("c", 64),
				ItemCount: 1, EndItem: index + 1, Receipt: out.Body}, index == 1, r.PrincipalReference, strings.Repeat("f", 32))
		})
		return err
	}
	for range pool.Config().MaxConns {
		if err := chunk(openRun(t, s, "warm"), "warm", 0, "warm"); err != nil {
			t.Fatal(err)
		}
	}
	r := openRun(t, s, "owner")
	before := trips.n.Load()
	if err := chunk(r, "owner", 0, "first"); err != nil {
		t.Fatal(err)
	}
	if n := trips.n.Load() - before; n != 2 {
		t.Errorf("a chunk with its writes queued after the lock took %d round trips, want 2", n)
	}
	if n := count(t, pool, "select count(*) from registrum_data.e_household where f_name = 'first'"); n != 1 {
		t.Fatalf("%d records of the chunk, want 1", n)
	}
	// Another principal: the lock finds no run; the writes that ran in its
	// round trip are rolled back. A chunk committed already: the same.
	if err := chunk(r, "intruder", 1, "intruder"); !errors.Is(err, store.ErrRunNotFound) {
		t.Errorf("another principal's chunk: %v, want ErrRunNotFound", err)
	}
	if err := chunk(r, "owner", 0, "again"); err == nil || !strings.Contains(err.Error(), "committed already") {
		t.Errorf("a committed chunk again: %v", err)
	}
	if n := count(t, pool, "select count(*) from registrum_data.e_household where f_name in ('intruder', 'again')"); n != 0 {
		t.Errorf("%d records written by chunks their lock refused", n)
	}
}
