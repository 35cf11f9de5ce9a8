package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/registrum/registrum/model"
)

// JobSchema is the schema that holds River's tables: the post-commit jobs.
const JobSchema = "registrum_jobs"

// migrateJobs applies River's own migrations into JobSchema. It runs while
// the caller holds the migration lock on a connection of pool, so it uses a
// one-connection pool of its own: concurrent migrators, waiting for the lock
// on pool's other connections, cannot starve it. (River's migrations cannot
// share one outer transaction: one adds an enum value another then uses.)
func migrateJobs(ctx context.Context, pool *pgxpool.Pool) error {
	cfg := pool.Config()
	cfg.MaxConns, cfg.MinConns = 1, 0
	own, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("store: migrate jobs: %w", err)
	}
	defer own.Close()
	if _, err := own.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+JobSchema); err != nil {
		return fmt.Errorf("store: migrate jobs: %w", err)
	}
	m, err := rivermigrate.New(riverpgxv5.New(own), &rivermigrate.Config{Schema: JobSchema, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("store: migrate jobs: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("store: migrate jobs: %w", err)
	}
	return nil
}

// newInserter returns an insert-only River client: writes enqueue jobs in
// their own transaction with it; workers run elsewhere (NewJobRunner).
func newInserter(pool *pgxpool.Pool) (*river.Client[pgx.Tx], error) {
	// FetchCooldown also spaces the notifications an inserting client sends:
	// River's 100 ms default would delay every job's start by 50 ms on average.
	c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: JobSchema, Logger: slog.New(slog.DiscardHandler), FetchCooldown: 10 * time.Millisecond,
		Middleware: []rivertype.Middleware{river.JobInsertMiddlewareFunc(carryTrace)}})
	if err != nil {
		return nil, fmt.Errorf("store: job client: %w", err)
	}
	return c, nil
}

// Enqueue inserts a post-commit job in the write's transaction: it exists
// exactly when the write commits. Jobs carry identifiers only. The insert
// runs at once, after the statements queued before it.
func (w *Writer) Enqueue(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) error {
	tx, err := w.direct(ctx)
	if err != nil {
		return err
	}
	if _, err := w.s.jobs.InsertTx(ctx, tx, args, opts); err != nil {
		return fmt.Errorf("store: enqueue %s: %w", args.Kind(), err)
	}
	return nil
}

// Enqueue inserts a job in a transaction of its own, for work that follows
// other work done outside a write (a job that schedules the next one).
func (s *Store) Enqueue(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := s.jobs.InsertTx(ctx, tx, args, opts); err != nil {
			return fmt.Errorf("store: enqueue %s: %w", args.Kind(), err)
		}
		return nil
	})
}

// QueueEvents is the River queue of the deliveries to local handlers
// (DeliverEventArgs); the deliveries to each destination have a queue of
// their own (EventQueue), and every other job runs in River's default
// queue. A delivery spends most of its run waiting for the receiver, not
// on a connection, so deliveries have workers of their own: a receiver
// that answers slowly holds its own queue's delivery workers only, never
// another destination's, nor the request jobs' (review submissions,
// automatic application, verifications).
const QueueEvents = "events"

// jobShare is how a process's jobs use its pool: the default queue's
// workers are half its connections, the event deliveries' statements a
// quarter (at least one each), so that a quarter is always left to
// requests, which otherwise wait behind a burst of jobs until their
// budgets run out.
type jobShare struct {
	// requestJobs is the default queue's workers: jobs that hold a
	// connection for most of their run.
	requestJobs int
	// deliveryStatements is how many delivery statements (a claim, a
	// settlement) run at once (Store.ClaimDelivery, Store.FinishAttempt).
	deliveryStatements int
	// deliveryWorkers is the workers of each delivery queue (QueueEvents
	// and each destination's): the deliveries in flight, each holding a
	// connection only for its two statements.
	deliveryWorkers int
}

// jobShareOf returns the job share of pool: with n the half of its
// connections (at least one), n workers for the default queue, half of n
// (at least one) for delivery statements, and four delivery workers per
// connection of n.
func jobShareOf(pool *pgxpool.Pool) jobShare {
	n := max(1, int(pool.Config().MaxConns)/2)
	return jobShare{requestJobs: n, deliveryStatements: max(1, n/2), deliveryWorkers: 4 * n}
}

// JobRunnerOptions tune the workers of NewJobRunner.
type JobRunnerOptions struct {
	// MaxWorkers is the number of jobs of River's default queue worked at
	// once: every job but event deliveries (default: half the pool's
	// maximum connections, 16 of 32, at least 1; with the delivery
	// statements' quarter, jobs hold at most three quarters of the pool,
	// or both connections of the smallest pool of 2). A job may hold a
	// connection while it works, and jobs and the host's requests share
	// the pool: a burst of jobs must not take every connection, or
	// requests wait behind them until their budgets run out.
	MaxWorkers int
	// EventWorkers is the number of event deliveries of each delivery
	// queue (QueueEvents, and each destination's: EventQueue) in flight at
	// once (default: about twice the pool's maximum connections, 64 of 32,
	// at least 4). A delivery holds a connection only for its claim and
	// its settlement, of which at most about a quarter of the pool's
	// connections run at once across every delivery queue (8 of 32, at
	// least 1), and waits for the receiver in between.
	EventWorkers int
	// EventDestinations are the destinations whose deliveries the runner
	// works, besides those the package's hooks name: each has a queue of its
	// own (EventQueue) with EventWorkers workers, so that a destination
	// that answers slowly holds only its own workers. The host passes the
	// destinations its configuration binds, which keep the deliveries of
	// hooks an earlier package revision named until they end.
	EventDestinations []string
	// FetchCooldown is the shortest pause between two fetches (default
	// 10 ms: River's default of 100 ms caps a host near 1,000 jobs a second
	// and adds up to 100 ms of latency after a commit).
	FetchCooldown time.Duration
	// Logger receives River's warnings (default: discarded).
	Logger *slog.Logger
	// JobTimeout bounds one run of a job (default 60 s).
	JobTimeout time.Duration
	// RescueAfter is how long a job may stay running before it is worked
	// again: a host that died mid-job leaves it running (default 120 s;
	// more than JobTimeout).
	RescueAfter time.Duration
	// PeriodicJobs are inserted on their schedule by the elected leader
	// among the hosts (the event reaper).
	PeriodicJobs []*river.PeriodicJob
	// Tracer, when set, gives each run of a job a span that continues the
	// trace of the work that enqueued it (carried in the job's metadata).
	Tracer trace.TracerProvider
}

// NewJobRunner returns a River client that works the jobs of workers. Any
// number of hosts may run one on the same database: River hands each job
// to one of them at a time.
func (s *Store) NewJobRunner(workers *river.Workers, o JobRunnerOptions) (*river.Client[pgx.Tx], error) {
	if o.MaxWorkers == 0 {
		o.MaxWorkers = s.share.requestJobs
	}
	if o.EventWorkers == 0 {
		o.EventWorkers = s.share.deliveryWorkers
	}
	if o.FetchCooldown == 0 {
		o.FetchCooldown = 10 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.JobTimeout == 0 {
		o.JobTimeout = time.Minute
	}
	if o.RescueAfter == 0 {
		o.RescueAfter = 2 * time.Minute
	}
	var driver riverdriver.Driver[pgx.Tx] = riverpgxv5.New(s.pool)
	if s.session != nil {
		driver = sessionListener{riverpgxv5.New(s.pool), riverpgxv5.New(s.session)}
	}
	c, err := river.NewClient(driver, &river.Config{
		Schema:               JobSchema,
		Queues:               s.jobQueues(o),
		Workers:              workers,
		FetchCooldown:        o.FetchCooldown,
		Logger:               o.Logger,
		JobTimeout:           o.JobTimeout,
		RescueStuckJobsAfter: o.RescueAfter,
		PeriodicJobs:         o.PeriodicJobs,
		Middleware:           jobMiddleware(o.Tracer),
	})
	if err != nil {
		return nil, fmt.Errorf("store: job runner: %w", err)
	}
	return c, nil
}

// jobQueues returns the queues a runner works: River's default queue, the
// local handlers' deliveries (QueueEvents), and the queue of each
// destination the package's hooks name or o.EventDestinations lists.
func (s *Store) jobQueues(o JobRunnerOptions) map[string]river.QueueConfig {
	queues := map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.MaxWorkers}, QueueEvents: {MaxWorkers: o.EventWorkers}}
	destinations := slices.Clone(o.EventDestinations)
	for _, e := range s.pkg.Entities {
		for _, h := range e.Hooks {
			if h.Handler != nil && h.Handler.Kind == model.HandlerURL {
				destinations = append(destinations, h.Handler.DestinationID)
			}
		}
	}
	for _, id := range destinations {
		queues[EventQueue(id)] = river.QueueConfig{MaxWorkers: o.EventWorkers}
	}
	return queues
}

// sessionListener is River's driver for a pool behind a pooler in
// transaction mode: River's queries (fetches, completions, leader
// election, the notifications an insert sends) go through the pooler, its
// LISTEN goes over a connection of the direct pool, which keeps the
// session the pooler would hand to another client after each transaction.
type sessionListener struct {
	*riverpgxv5.Driver
	session *riverpgxv5.Driver
}

// GetListener listens on the direct pool.
func (d sessionListener) GetListener(params *riverdriver.GetListenenerParams) riverdriver.Listener {
	return d.session.GetListener(params)
}

// metadataTraceparent is the key of a job's metadata that holds the W3C
// traceparent of the work that enqueued it.
const metadataTraceparent = "traceparent"

// carryTrace records the trace context of ctx, when it has one, in the
// metadata of the jobs inserted under it: the job's run continues that
// trace (jobMiddleware). Without telemetry there is none and nothing is
// written.
func carryTrace(ctx context.Context, many []*rivertype.JobInsertParams, inner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		tp := formatTraceparent(sc)
		for _, p := range many {
			md := map[string]any{}
			if len(p.Metadata) > 0 {
				if err := json.Unmarshal(p.Metadata, &md); err != nil {
					continue
				}
			}
			md[metadataTraceparent] = tp
			if b, err := json.Marshal(md); err == nil {
				p.Metadata = b
			}
		}
	}
	return inner(ctx)
}

// jobMiddleware returns the workers' middleware: a consumer span per run,
// the child of the traceparent the job carries (a root span otherwise).
func jobMiddleware(tp trace.TracerProvider) []rivertype.Middleware {
	if tp == nil {
		return nil
	}
	tracer := tp.Tracer("github.com/registrum/registrum/store")
	return []rivertype.Middleware{river.WorkerMiddlewareFunc(func(ctx context.Context, job *rivertype.JobRow, inner func(context.Context) error) error {
		var md struct {
			Traceparent string `json:"traceparent"`
		}
		if len(job.Metadata) > 0 && json.Unmarshal(job.Metadata, &md) == nil {
			if sc, ok := parseTraceparent(md.Traceparent); ok {
				ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
			}
		}
		ctx, span := tracer.Start(ctx, "river.work "+job.Kind, trace.WithSpanKind(trace.SpanKindConsumer))
		defer span.End()
		err := inner(ctx)
		if err != nil {
			// Like the logs, traces carry no values: the error's text,
			// which may quote one, stays out of the span.
			span.SetStatus(codes.Error, "job failed")
		}
		return err
	})}
}

// formatTraceparent writes sc as a version 00 traceparent.
func formatTraceparent(sc trace.SpanContext) string {
	t, s := sc.TraceID(), sc.SpanID()
	return "00-" + hex.EncodeToString(t[:]) + "-" + hex.EncodeToString(s[:]) + "-" + hex.EncodeToString([]byte{byte(sc.TraceFlags())})
}

// parseTraceparent reads a traceparent that formatTraceparent wrote.
func parseTraceparent(s string) (trace.SpanContext, bool) {
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false
	}
	tid, err1 := trace.TraceIDFromHex(s[3:35])
	sid, err2 := trace.SpanIDFromHex(s[36:52])
	flags, err3 := hex.DecodeString(s[53:])
	if err1 != nil || err2 != nil || err3 != nil {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]), Remote: true})
	return sc, sc.IsValid()
}
