package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one versioned change of the engine's own tables.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the embedded migrations in version order.
func Migrations() []Migration {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		panic(fmt.Sprintf("store: embedded migrations: %v", err))
	}
	var out []Migration
	for _, e := range entries {
		base := strings.TrimSuffix(e.Name(), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic(fmt.Sprintf("store: migration file %s is not named NNNN_name.sql", e.Name()))
		}
		b, err := migrationFS.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			panic(err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}

// LatestVersion is the newest schema version this binary knows.
func LatestVersion() int {
	m := Migrations()
	return m[len(m)-1].Version
}

// ErrNotMigrated means the database has no Registrum schema or pending migrations.
var ErrNotMigrated = errors.New("the database schema is not migrated: run `registrum migrate --config FILE`")

// ErrSchemaTooNew means the database was migrated by a newer Registrum.
var ErrSchemaTooNew = errors.New("the database schema is newer than this binary knows: upgrade registrum")

// migrateLockKey serialises concurrent migrators across hosts.
const migrateLockKey = int64(0x7265676d69677231) // "regmigr1"

// Migrate applies every pending migration, each in its own transaction,
// under an advisory lock so that concurrent hosts migrate once. It returns
// the versions it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLockKey); err != nil {
		return nil, fmt.Errorf("store: migrate: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrateLockKey)

	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS registrum;
CREATE TABLE IF NOT EXISTS registrum.schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
		return nil, fmt.Errorf("store: migrate: create version table: %w", err)
	}
	current, err := currentVersion(ctx, conn.Conn())
	if err != nil {
		return nil, err
	}
	if current > LatestVersion() {
		return nil, fmt.Errorf("store: database at version %d, binary knows %d: %w", current, LatestVersion(), ErrSchemaTooNew)
	}
	var applied []int
	for _, m := range Migrations() {
		if m.Version <= current {
			continue
		}
		err := pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO registrum.schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("store: migration %04d_%s: %w", m.Version, m.Name, err)
		}
		applied = append(applied, m.Version)
	}
	if err := migrateJobs(ctx, pool); err != nil {
		return applied, err
	}
	return applied, nil
}

// CheckSchema returns nil when the database is at exactly the schema version
// this binary knows, ErrNotMigrated when it is behind, and ErrSchemaTooNew
// when it is ahead.
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("store: check schema: %w", err)
	}
	defer conn.Release()
	v, err := currentVersion(ctx, conn.Conn())
	if err != nil {
		return err
	}
	switch latest := LatestVersion(); {
	case v < latest:
		return fmt.Errorf("store: database at version %d, binary needs %d: %w", v, latest, ErrNotMigrated)
	case v > latest:
		return fmt.Errorf("store: database at version %d, binary knows %d: %w", v, latest, ErrSchemaTooNew)
	}
	return nil
}

func currentVersion(ctx context.Context, conn *pgx.Conn) (int, error) {
	var v int
	err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM registrum.schema_migrations").Scan(&v)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") {
		return 0, nil // no version table yet
	}
	if err != nil {
		return 0, fmt.Errorf("store: read schema version: %w", err)
	}
	return v, nil
}
