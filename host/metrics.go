package host

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/registrum/registrum/store"
)

// metricsNamespace starts the names of the record host's own metrics
// (registrum_host_…); the HTTP (registrum_http_…) and event delivery
// (registrum_events_…) metrics keep the names they were published with.
const metricsNamespace = "registrum_host"

// countsTimeout bounds the count query of one scrape: a scrape while the
// database is slow or away answers without the counted gauges (and counts
// the failure) rather than hanging.
const countsTimeout = 5 * time.Second

// poolCollector reports the pgx pool's statistics at scrape time.
type poolCollector struct {
	pool *pgxpool.Pool

	acquired, idle, constructing, total, max           *prometheus.Desc
	acquires, emptyAcquires, canceledAcquires, waitSec *prometheus.Desc
}

func newPoolCollector(pool *pgxpool.Pool) *poolCollector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, "pool", name), help, nil, nil)
	}
	return &poolCollector{
		pool:             pool,
		acquired:         desc("acquired_connections", "Connections of the pool in use (acquired) now."),
		idle:             desc("idle_connections", "Open connections of the pool idle now."),
		constructing:     desc("constructing_connections", "Connections of the pool being opened now."),
		total:            desc("total_connections", "Connections of the pool now: acquired, idle and being opened."),
		max:              desc("max_connections", "The pool's maximum size (pool_max_conns)."),
		acquires:         desc("acquires_total", "Connections acquired from the pool."),
		emptyAcquires:    desc("empty_acquires_total", "Acquires that had to wait: no idle connection, or none could be opened at once."),
		canceledAcquires: desc("canceled_acquires_total", "Acquires abandoned because their context ended while waiting."),
		waitSec:          desc("acquire_wait_seconds_total", "Time acquires spent waiting for a connection when none was idle."),
	}
}

// Describe implements prometheus.Collector.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.acquired, c.idle, c.constructing, c.total, c.max, c.acquires, c.emptyAcquires, c.canceledAcquires, c.waitSec} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(c.acquired, float64(s.AcquiredConns()))
	gauge(c.idle, float64(s.IdleConns()))
	gauge(c.constructing, float64(s.ConstructingConns()))
	gauge(c.total, float64(s.TotalConns()))
	gauge(c.max, float64(s.MaxConns()))
	counter(c.acquires, float64(s.AcquireCount()))
	counter(c.emptyAcquires, float64(s.EmptyAcquireCount()))
	counter(c.canceledAcquires, float64(s.CanceledAcquireCount()))
	counter(c.waitSec, s.EmptyAcquireWaitTime().Seconds())
}

// countsCollector reports row counts of the database at scrape time: the
// job queue by kind and state, verifications, review submissions and
// results, change requests and event deliveries by state. Every state a
// table allows is reported, zero when no row holds it; job kinds appear
// once a job of the kind exists.
type countsCollector struct {
	store    *store.Store
	log      *slog.Logger
	failures prometheus.Counter

	jobs, verifications, submissions, results, requests, deliveries *prometheus.Desc
}

func newCountsCollector(st *store.Store, log *slog.Logger) *countsCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, "", name), help, labels, nil)
	}
	return &countsCollector{
		store: st,
		log:   log,
		failures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "count_query_failures_total",
			Help: "Scrapes whose count query failed (the database away or slower than 5 s): they carry no counted gauge."}),
		jobs:          desc("jobs", "Post-commit jobs (River) by kind and state, as the database holds them now.", "kind", "state"),
		verifications: desc("attachment_verifications", "Attachment verifications by verdict.", "verdict"),
		submissions:   desc("review_submissions", "Submissions to review authorities by state.", "state"),
		results:       desc("review_results", "Results received from review authorities by status.", "status"),
		requests:      desc("change_requests", "Change requests by workflow state.", "state"),
		deliveries:    desc("event_deliveries", "Event deliveries by state.", "state"),
	}
}

// Describe implements prometheus.Collector.
func (c *countsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.jobs, c.verifications, c.submissions, c.results, c.requests, c.deliveries} {
		ch <- d
	}
	c.failures.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *countsCollector) Collect(ch chan<- prometheus.Metric) {
	defer c.failures.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), countsTimeout)
	defer cancel()
	n, err := c.store.Counts(ctx)
	if err != nil {
		c.failures.Inc()
		c.log.Warn("metrics: the count query failed", "error", err)
		return
	}
	for _, j := range n.Jobs {
		ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(j.Count), j.Kind, j.State)
	}
	each := func(d *prometheus.Desc, states []string, counts map[string]int64) {
		for _, s := range states {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(counts[s]), s)
		}
	}
	each(c.verifications, store.VerificationVerdicts, n.Verifications)
	each(c.submissions, store.ReviewSubmissionStates, n.ReviewSubmissions)
	each(c.results, store.ReviewResultStatuses, n.ReviewResults)
	each(c.requests, store.RequestStates, n.Requests)
	each(c.deliveries, store.DeliveryStates, n.Deliveries)
}

// Job outcomes, the outcome label of registrum_host_jobs_finished_total.
const (
	jobCompleted = "completed"
	jobFailed    = "failed"    // the run failed; the job will be tried again
	jobDiscarded = "discarded" // the run failed for the last time
	jobCancelled = "cancelled"
	jobSnoozed   = "snoozed"
)

// jobMetrics are the figures of the jobs this process works, fed by River's
// event subscription.
type jobMetrics struct {
	finished *prometheus.CounterVec
	run      *prometheus.HistogramVec
	wait     *prometheus.HistogramVec
}

// jobBuckets span a local handler's milliseconds to a slow review
// authority's or verifier's minute.
var jobBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

func newJobMetrics(reg prometheus.Registerer) *jobMetrics {
	m := &jobMetrics{
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "jobs_finished_total",
			Help: "Runs of post-commit jobs this process finished, by kind and outcome (completed, failed, discarded, cancelled, snoozed)."}, []string{"kind", "outcome"}),
		run: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: "job_run_duration_seconds",
			Help: "Time one run of a post-commit job took in its worker, by kind.", Buckets: jobBuckets}, []string{"kind"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: "job_queue_wait_seconds",
			Help: "Time a post-commit job waited, available, before a worker started it, by kind.", Buckets: jobBuckets}, []string{"kind"}),
	}
	reg.MustRegister(m.finished, m.run, m.wait)
	return m
}

// watch subscribes to the runner's job events and records them until the
// returned function is called (it waits for the recording to end).
func (m *jobMetrics) watch(runner *river.Client[pgx.Tx]) (stop func()) {
	events, cancel := runner.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled, river.EventKindJobSnoozed)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range events {
			m.record(ev)
		}
	}()
	return func() {
		cancel() // closes events
		<-done
	}
}

func (m *jobMetrics) record(ev *river.Event) {
	if ev.Job == nil {
		return
	}
	kind := ev.Job.Kind
	outcome := jobCompleted
	switch ev.Kind {
	case river.EventKindJobFailed:
		outcome = jobFailed
		if ev.Job.State == rivertype.JobStateDiscarded {
			outcome = jobDiscarded
		}
	case river.EventKindJobCancelled:
		outcome = jobCancelled
	case river.EventKindJobSnoozed:
		outcome = jobSnoozed
	}
	m.finished.WithLabelValues(kind, outcome).Inc()
	if ev.JobStats != nil {
		m.run.WithLabelValues(kind).Observe(ev.JobStats.RunDuration.Seconds())
		m.wait.WithLabelValues(kind).Observe(ev.JobStats.QueueWaitDuration.Seconds())
	}
}
