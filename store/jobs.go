package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
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
	c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: JobSchema, Logger: slog.New(slog.DiscardHandler), FetchCooldown: 10 * time.Millisecond})
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

// JobRunnerOptions tune the workers of NewJobRunner.
type JobRunnerOptions struct {
	// MaxWorkers is the number of jobs worked at once (default 100).
	MaxWorkers int
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
}

// NewJobRunner returns a River client that works the jobs of workers. Any
// number of hosts may run one on the same database: River hands each job
// to one of them at a time.
func (s *Store) NewJobRunner(workers *river.Workers, o JobRunnerOptions) (*river.Client[pgx.Tx], error) {
	if o.MaxWorkers == 0 {
		o.MaxWorkers = 100
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
	c, err := river.NewClient(riverpgxv5.New(s.pool), &river.Config{
		Schema:               JobSchema,
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.MaxWorkers}},
		Workers:              workers,
		FetchCooldown:        o.FetchCooldown,
		Logger:               o.Logger,
		JobTimeout:           o.JobTimeout,
		RescueStuckJobsAfter: o.RescueAfter,
		PeriodicJobs:         o.PeriodicJobs,
	})
	if err != nil {
		return nil, fmt.Errorf("store: job runner: %w", err)
	}
	return c, nil
}

// Job kinds: the post-commit work of change requests. The kind strings are
// stored with the jobs; never change them.
const (
	KindReviewSubmit   = "registrum.review.submit"
	KindReviewPoll     = "registrum.review.poll"
	KindRequestApply   = "registrum.request.apply"
	KindReviewWithdraw = "registrum.review.withdraw"
)

// RequestJob names one proposal of a request record: all a change-request
// job carries.
type RequestJob struct {
	Entity          string `json:"entity"`
	RecordID        string `json:"recordId"`
	ProposalVersion int64  `json:"proposalVersion"`
}

// ReviewSubmitArgs sends a proposal's submission to its review authority.
type ReviewSubmitArgs struct{ RequestJob }

// Kind implements river.JobArgs.
func (ReviewSubmitArgs) Kind() string { return KindReviewSubmit }

// ReviewPollArgs pulls the authority's result of a proposal.
type ReviewPollArgs struct{ RequestJob }

// Kind implements river.JobArgs.
func (ReviewPollArgs) Kind() string { return KindReviewPoll }

// ReviewWithdrawArgs tells the review authority that a proposal's
// submission is withdrawn (its request was cancelled while under review).
type ReviewWithdrawArgs struct{ RequestJob }

// Kind implements river.JobArgs.
func (ReviewWithdrawArgs) Kind() string { return KindReviewWithdraw }

// RequestApplyArgs applies an approved proposal by its executor.
type RequestApplyArgs struct{ RequestJob }

// Kind implements river.JobArgs.
func (RequestApplyArgs) Kind() string { return KindRequestApply }

// jobAt schedules a job for t.
func jobAt(t time.Time) *river.InsertOpts { return &river.InsertOpts{ScheduledAt: t} }
