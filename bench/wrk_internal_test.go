package bench

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/store/storetest"
)

// TestDatabaseCPUCountsEndedBackends: the CPU a backend used stays in
// databaseCPU after its connection ends (the reports' phases open and
// close connections; a reading that fell with them read negative).
func TestDatabaseCPUCountsEndedBackends(t *testing.T) {
	dsn := storetest.NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	before := databaseCPU()
	if _, err := conn.Exec(ctx, `SELECT count(*) FROM generate_series(1, 5000000)`); err != nil {
		t.Fatal(err)
	}
	during := databaseCPU()
	if during-before < 100*time.Millisecond {
		t.Skipf("the query used %v of the database's CPU; too little to judge", during-before)
	}
	conn.Close(ctx)
	// The postmaster reaps the ended backend, whose time then moves to
	// the postmaster's time of ended children.
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := databaseCPU()
		if after >= during-20*time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("database CPU %v after the backend ended, %v while it lived: its time was lost", after, during)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
