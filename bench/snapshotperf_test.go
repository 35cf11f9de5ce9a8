package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/registrum/registrum/store/storetest"
)

// TestSnapshotReadReport times pages of a snapshot read over many records
// (REGISTRUM_SNAPSHOT_BENCH=1; REGISTRUM_SNAPSHOT_BENCH_ROWS, default
// 1,000,000 records with two revisions each): a page must stay far inside
// the 2-second snapshot budget whatever the history's size. See
// docs/performance.md.
func TestSnapshotReadReport(t *testing.T) {
	if os.Getenv("REGISTRUM_SNAPSHOT_BENCH") != "1" {
		t.Skip("set REGISTRUM_SNAPSHOT_BENCH=1 to run the snapshot read report")
	}
	rows := 1_000_000
	if v := os.Getenv("REGISTRUM_SNAPSHOT_BENCH_ROWS"); v != "" {
		fmt.Sscan(v, &rows)
	}
	ctx := context.Background()
	pool := storetest.NewPool(t)
	s := storetest.Open(t, pool, storetest.SamplePackage(t))
	hh := s.Package().EntityByID("household")
	rev := s.Package().Revision
	t0 := time.Now()
	for _, q := range []string{
		`INSERT INTO registrum_data.e_household (record_id, revision, lifecycle, created_at, updated_at, package_revision, f_name)
SELECT md5(g::text)::uuid, 2, 'active', now(), now(), $1, 'n' || (g % 1000) FROM generate_series(1, $2) g`,
		`INSERT INTO registrum.revisions (entity_id, record_id, revision, lifecycle, data, package_revision, operation_id, commit_id, created_at)
SELECT 'household', md5(g::text)::uuid, r, 'active', jsonb_build_object('name', 'n' || (g % 1000)), $1, gen_random_uuid(), gen_random_uuid(), now()
FROM generate_series(1, $2) g, generate_series(1, 2) r`,
	} {
		if _, err := pool.Exec(ctx, q, rev, rows); err != nil {
			t.Fatal(err)
		}
	}
	pool.Exec(ctx, "ANALYZE")
	load := time.Since(t0)
	snap, err := s.CurrentSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const pages = 20
	after := ""
	start := time.Now()
	for range pages {
		revs, err := s.SnapshotRecords(ctx, hh, snap, after, 50)
		if err != nil || len(revs) != 50 {
			t.Fatalf("%d %v", len(revs), err)
		}
		after = revs[len(revs)-1].RecordID
	}
	snapPage := time.Since(start) / pages
	t.Logf("\n%d records, %d revisions, loaded in %v; a snapshot page of 50 (store.SnapshotRecords, %d pages): %v",
		rows, 2*rows, load.Round(time.Millisecond), pages, snapPage.Round(time.Microsecond))
}
