// Package storetest gives each test its own fresh, migrated PostgreSQL
// database, on one throwaway cluster per test binary (store/pglocal), or on
// the server named by $REGISTRUM_TEST_DATABASE_URL when it is set.
//
// Tests that need PostgreSQL fail, never skip, when none can be had. Use it
// from a package's TestMain so the cluster is stopped when the tests end:
//
//	func TestMain(m *testing.M) { os.Exit(storetest.Run(m)) }
//
// and in a test:
//
//	pool := storetest.NewPool(t)
package storetest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/pglocal"
)

// EnvDatabaseURL names an existing server to use instead of a private cluster.
// Its role needs CREATEDB.
const EnvDatabaseURL = "REGISTRUM_TEST_DATABASE_URL"

const templateName = "registrum_template"

var (
	once      sync.Once
	cluster   *pglocal.Cluster
	adminDSN  string
	dsnFor    func(db string) string
	setupErr  error
	dbCounter atomic.Int64
)

// Run runs the tests and stops the cluster afterwards.
func Run(m *testing.M) int {
	code := m.Run()
	if cluster != nil {
		cluster.Stop()
	}
	return code
}

func setup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if url := os.Getenv(EnvDatabaseURL); url != "" {
		cfg, err := pgx.ParseConfig(url)
		if err != nil {
			setupErr = fmt.Errorf("storetest: %s is not a valid connection string", EnvDatabaseURL)
			return
		}
		_ = cfg
		adminDSN = url
		dsnFor = func(db string) string { return replaceDatabase(url, db) }
	} else {
		c, err := pglocal.Start(ctx, pglocal.Options{})
		if err != nil {
			setupErr = err
			return
		}
		cluster = c
		adminDSN = c.DSN("postgres")
		dsnFor = c.DSN
	}
	setupErr = createTemplate(ctx)
}

// createTemplate makes a migrated template database that per-test databases copy.
func createTemplate(ctx context.Context) error {
	admin, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return fmt.Errorf("storetest: connect: %w", err)
	}
	defer admin.Close(ctx)
	name := fmt.Sprintf("%s_%d", templateName, os.Getpid())
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
		return fmt.Errorf("storetest: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return fmt.Errorf("storetest: create template: %w", err)
	}
	pool, err := pgxpool.New(ctx, dsnFor(name))
	if err != nil {
		return fmt.Errorf("storetest: %w", err)
	}
	defer pool.Close()
	if _, err := store.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("storetest: migrate template: %w", err)
	}
	return nil
}

// NewDatabase creates a fresh, migrated database for t and returns its
// connection string. The database is dropped when t ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	once.Do(setup)
	if setupErr != nil {
		t.Fatalf("storetest: no PostgreSQL for the tests: %v", setupErr)
	}
	ctx := context.Background()
	admin := adminConn(t)
	defer admin.Close(ctx)
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), dbCounter.Add(1))
	tmpl := fmt.Sprintf("%s_%d", templateName, os.Getpid())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+tmpl); err != nil {
		t.Fatalf("storetest: create database: %v", err)
	}
	dropWhenDone(t, name)
	return dsnFor(name)
}

// adminConn connects to the maintenance database of the test server.
func adminConn(t testing.TB) *pgx.Conn {
	t.Helper()
	admin, err := pgx.Connect(context.Background(), adminDSN)
	if err != nil {
		t.Fatalf("storetest: connect: %v", err)
	}
	return admin
}

// dropWhenDone drops the database name when t ends.
func dropWhenDone(t testing.TB, name string) {
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), adminDSN)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
}

// databaseOf returns the name of the database dsn connects to.
func databaseOf(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return cfg.Database
}

// endConnections ends every other session connected to the databases.
func endConnections(t testing.TB, admin *pgx.Conn, databases ...string) {
	t.Helper()
	if _, err := admin.Exec(context.Background(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ANY($1) AND pid <> pg_backend_pid()", databases); err != nil {
		t.Fatalf("storetest: end the connections to %v: %v", databases, err)
	}
}

// CopyDatabase copies the database of dsn into a new database, as a dump
// restored into another database would, and returns the copy's connection
// string. Connections to the original are ended first (CREATE DATABASE
// copies only a database nobody is connected to). The copy is dropped when
// t ends.
func CopyDatabase(t testing.TB, dsn string) string {
	t.Helper()
	original := databaseOf(t, dsn)
	admin := adminConn(t)
	defer admin.Close(context.Background())
	endConnections(t, admin, original)
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), dbCounter.Add(1))
	if _, err := admin.Exec(context.Background(), "CREATE DATABASE "+name+" TEMPLATE "+pgx.Identifier{original}.Sanitize()); err != nil {
		t.Fatalf("storetest: copy database: %v", err)
	}
	dropWhenDone(t, name)
	return dsnFor(name)
}

// ReplaceDatabase puts the database of withDSN under the name of the
// database of dsn, as an operator's restore under the same name would, so
// that new connections to dsn reach the restored copy. Connections to both
// are ended first; the replaced database is dropped when t ends.
func ReplaceDatabase(t testing.TB, dsn, withDSN string) {
	t.Helper()
	name, with := databaseOf(t, dsn), databaseOf(t, withDSN)
	admin := adminConn(t)
	defer admin.Close(context.Background())
	endConnections(t, admin, name, with)
	old := fmt.Sprintf("t_%d_%d", os.Getpid(), dbCounter.Add(1))
	for _, q := range []string{
		"ALTER DATABASE " + pgx.Identifier{name}.Sanitize() + " RENAME TO " + old,
		"ALTER DATABASE " + pgx.Identifier{with}.Sanitize() + " RENAME TO " + pgx.Identifier{name}.Sanitize(),
	} {
		if _, err := admin.Exec(context.Background(), q); err != nil {
			t.Fatalf("storetest: replace database %s: %v", name, err)
		}
	}
	dropWhenDone(t, old)
}

// NewPool returns a pool on a fresh, migrated database, closed when t ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), NewDatabase(t))
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
