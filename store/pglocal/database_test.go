package pglocal

import (
	"context"
	"testing"
)

func TestEnsureDatabaseCreatesOnceAndQuotesTheName(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	const name = `Odd "name"; drop`
	for i := range 2 { // the second call finds it and changes nothing
		if err := c.EnsureDatabase(ctx, name); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	if got := query(t, c.DSN("postgres"), "select count(*) from pg_database where datname = 'Odd \"name\"; drop'"); got != "1" {
		t.Errorf("databases named %q: %s, want 1", name, got)
	}
}
