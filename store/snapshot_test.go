package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/uuid"
)

// Commit positions are consecutive, one per commit, and a state captured
// while writers run is the same when it is read again after they finished:
// no commit ordered before a captured one becomes visible later.
func TestCommitPositionsOrderConcurrentWrites(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	hh := s.Package().EntityByID("household")
	type capture struct {
		pos  int64
		seen int
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
				if _, err := s.Create(ctx, hh, uuid.NewString(), map[string]any{"name": "n"}, journal()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 40 {
			_, pos, err := s.SnapshotHead(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			revs, err := s.SnapshotRevisions(ctx, hh, pos, "", 1000)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			captures = append(captures, capture{pos, len(revs)})
			mu.Unlock()
		}
	}()
	wg.Wait()
	<-done
	for _, c := range captures {
		revs, err := s.SnapshotRevisions(ctx, hh, c.pos, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(revs) != c.seen || int64(len(revs)) != c.pos {
			t.Errorf("position %d: %d records when captured, %d now", c.pos, c.seen, len(revs))
		}
	}
	if n := count(t, pool, "select count(*) from registrum.commits"); n != 80 {
		t.Fatalf("commits = %d, want 80", n)
	}
	if n := count(t, pool, "select count(*) from registrum.commits where position between 1 and 80"); n != 80 {
		t.Fatalf("positions are not 1..80: %d", n)
	}
	if n := count(t, pool, "select count(distinct commit_id) from registrum.revisions r where not exists (select 1 from registrum.commits c where c.commit_id = r.commit_id)"); n != 0 {
		t.Fatalf("%d commits without a position", n)
	}
}
