// Package store is Registrum's PostgreSQL store: the engine's migrations, the
// activation of a package's layout, and the record operations of the host.
// All SQL of the record host lives here; nothing here knows about HTTP.
package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/layout"
)

// Store is a connection pool to a Registrum database bound to one active package.
type Store struct {
	pool   *pgxpool.Pool
	pkg    *model.Package
	owners map[string]layout.Owner
	// reads caches the single-record SELECT of each entity (readSQL).
	reads sync.Map // *model.Entity → [2]string: plain, FOR UPDATE
	// expects caches each entity's lock of a request as read
	// (expectRequestSQL).
	expects sync.Map // *model.Entity → string
	// locks caches each entity's lock of a request record with its
	// workflow state (lockWithRequestSQL).
	locks sync.Map // *model.Entity → string
	// snapshotReads caches each entity's snapshot page (snapshotSQL).
	snapshotReads sync.Map // snapshotKey → string
	// jobs inserts post-commit jobs (Writer.Enqueue).
	jobs *river.Client[pgx.Tx]
	// tag binds snapshot tokens to this database's history (HistoryTag),
	// the eight bytes big-endian: read at start and again by every token
	// check and every write's snapshot, so that hosts sharing the
	// database agree on it (docs/decisions/snapshot-reads.md); origin is
	// where its transaction ids came from when the store opened.
	tag    atomic.Uint64
	origin string
	// fp is the schema fingerprint of the package's layout.
	fp string
	// capture captures events in writes (Options.Capture), nil for none.
	capture Capturer
	// session is the pool on the direct URL when pool is a pooler in
	// transaction mode (Options.Session), nil when pool is direct.
	session *pgxpool.Pool
	// maxInProgress is MaxWriteInProgress (lowered by the store's tests).
	maxInProgress int
	// share is how this process's jobs use the pool (jobShareOf).
	share jobShare
	// deliveryStatements holds a token for each delivery attempt's
	// statement in progress (ClaimDelivery, FinishAttempt): its capacity
	// is share.deliveryStatements.
	deliveryStatements chan struct{}
}

// Options configure a Store at Open. The zero value is a store whose
// writes capture no events, over a direct pool.
type Options struct {
	// Capture captures the events of a change inside the write's own
	// transaction (package hooks builds one). Default nil: writes capture
	// no events.
	Capture Capturer
	// Session is the pool on the direct URL of a store whose own pool goes
	// through a pooler in transaction mode (ConnectPooled): the job runners
	// of NewJobRunner listen for River's notifications on a connection of
	// Session instead of the store's pool. Default nil: the store's pool is
	// direct and serves them itself (a Session that is the store's own
	// pool is the same as nil).
	Session *pgxpool.Pool
}

// check refuses options Open cannot use: a Capture that holds a nil
// pointer would fail the first write that captures an event, far from
// the wiring that caused it.
func (o *Options) check() error {
	if o.Capture != nil {
		if v := reflect.ValueOf(o.Capture); v.Kind() == reflect.Pointer && v.IsNil() {
			return fmt.Errorf("store: Options.Capture is a nil %T; leave it unset for no capture", o.Capture)
		}
	}
	return nil
}

// SchemaFingerprint returns the schema fingerprint of the package's layout.
func (s *Store) SchemaFingerprint() string { return s.fp }

// DefaultMaxConns is the pool size of a connection string that sets no
// pool_max_conns: 32 concurrent clients of the host, each holding at most
// one connection at a time, keep every connection busy while the
// post-commit jobs (River's fetches, completions and the jobs themselves)
// take one for a statement or a transaction. pgx's own default (four, or
// one per CPU core) is a library's, not a server's.
const DefaultMaxConns = 32

// MinMaxConns is the smallest pool_max_conns Connect accepts, the smallest
// pool the tests hold the host to: no code path holds a connection while
// it asks the pool for another, so two connections serve any number of
// concurrent requests and jobs, one at a time each, and a request never
// waits behind all of River's loops at once. (River's listener and the
// activation watch hold a connection each outside the pool.)
const MinMaxConns = 2

// Connect opens a connection pool to the database named by dsn (a URL or
// key/value connection string) and checks that it answers. The pool holds
// at most DefaultMaxConns connections unless dsn sets pool_max_conns (at
// least MinMaxConns).
func Connect(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	return connect(ctx, dsn, false)
}

// ConnectPooled is Connect for a connection string that names a pooler in
// transaction mode (PgBouncer's pool_mode = transaction), whose server
// connections change between transactions: unless dsn sets pgx's
// default_query_exec_mode itself, statements run in the cache_describe
// mode, which sends each statement with the unnamed prepared statement in
// the same round trip as its execution and keeps no named prepared
// statement on a server connection (the default cache_statement mode
// does, and PgBouncer before 1.21 does not track them). What needs a
// session (the migration lock, LISTEN) goes over the direct URL instead:
// see host.Open and docs/record-host.md, "Connection poolers".
func ConnectPooled(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	return connect(ctx, dsn, true)
}

func connect(ctx context.Context, dsn string, pooled bool) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The parse error may quote the connection string with its password.
		return nil, errors.New("store: the database connection string is not valid")
	}
	if explicit, err := setsParam(dsn, "pool_max_conns"); err != nil {
		return nil, err
	} else if !explicit {
		cfg.MaxConns = DefaultMaxConns
	} else if cfg.MaxConns < MinMaxConns {
		return nil, fmt.Errorf("store: pool_max_conns=%d in the database connection string: the host needs at least %d connections", cfg.MaxConns, MinMaxConns)
	}
	if pooled {
		if explicit, err := setsParam(dsn, "default_query_exec_mode"); err != nil {
			return nil, err
		} else if !explicit {
			cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: connect to %s: %w", describe(cfg), err)
	}
	return pool, nil
}

// setsParam reports whether dsn sets the pgx or pgxpool setting name
// itself (pgx removes its settings from the configuration it returns, so
// they are read from a plain parse of the connection string).
func setsParam(dsn, name string) (bool, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return false, errors.New("store: the database connection string is not valid")
	}
	_, ok := cfg.RuntimeParams[name]
	return ok, nil
}

// describe names a database for messages without its password.
func describe(cfg *pgxpool.Config) string {
	return fmt.Sprintf("database %q on %s:%d", cfg.ConnConfig.Database, cfg.ConnConfig.Host, cfg.ConnConfig.Port)
}

// ErrLayoutMismatch means the database holds the layout of another package.
var ErrLayoutMismatch = errors.New("the database holds the tables of a package with another schema fingerprint")

// Open checks the schema version and activates p: on an empty database it
// creates p's entity tables; on a database that already holds p's layout it
// records p as the active package. A database holding another layout is
// refused. o configures the store (see Options); it is checked first.
func Open(ctx context.Context, pool *pgxpool.Pool, p *model.Package, o Options) (*Store, error) {
	if pool == nil || p == nil {
		return nil, errors.New("store: Open needs a pool and a package")
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	if o.Session == pool {
		o.Session = nil
	}
	if err := CheckSchema(ctx, pool); err != nil {
		return nil, err
	}
	fp, err := layout.Fingerprint(p)
	if err != nil {
		return nil, err
	}
	if p.SchemaFingerprint != "" && p.SchemaFingerprint != fp {
		return nil, fmt.Errorf("store: the package records schema fingerprint %s but its layout is %s: recompile it with this release", p.SchemaFingerprint, fp)
	}
	stmts, err := layout.DDL(p)
	if err != nil {
		return nil, err
	}
	var tag [8]byte
	var origin string
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockKey); err != nil {
			return err
		}
		if tag, origin, err = loadHistoryTag(ctx, tx); err != nil {
			return err
		}
		var held string
		err := tx.QueryRow(ctx, "SELECT schema_fingerprint FROM registrum.package_state").Scan(&held)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			for _, s := range stmts {
				if strings.HasPrefix(s, "--") {
					continue
				}
				if _, err := tx.Exec(ctx, s); err != nil {
					return fmt.Errorf("create layout: %w", err)
				}
			}
			if _, err = tx.Exec(ctx, "INSERT INTO registrum.package_state (schema_fingerprint, package_revision, layout_ddl) VALUES ($1, $2, $3)",
				fp, p.Revision, strings.Join(stmts, ";\n")+";\n"); err != nil {
				return err
			}
			return recordSchema(ctx, tx, p, fp)
		case err != nil:
			return err
		case held != fp:
			return fmt.Errorf("database layout %s, package layout %s: %w (move the database to this package with `registrum activate`)", held, fp, ErrLayoutMismatch)
		}
		if _, err = tx.Exec(ctx, "UPDATE registrum.package_state SET package_revision = $1, activated_at = now()", p.Revision); err != nil {
			return err
		}
		return recordSchema(ctx, tx, p, fp)
	})
	if err != nil {
		return nil, fmt.Errorf("store: activate package %s: %w", p.Revision, err)
	}
	jobs, err := newInserter(pool)
	if err != nil {
		return nil, err
	}
	share := jobShareOf(pool)
	s := &Store{pool: pool, pkg: p, owners: layout.Owners(p), jobs: jobs, origin: origin, fp: fp, capture: o.Capture, session: o.Session, maxInProgress: MaxWriteInProgress,
		share: share, deliveryStatements: make(chan struct{}, share.deliveryStatements)}
	s.setTag(tag)
	return s, nil
}

// Package returns the active package.
func (s *Store) Package() *model.Package { return s.pkg }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }
