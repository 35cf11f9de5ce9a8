// Package host assembles the record host: it loads the runtime
// configuration's package and secrets, opens the store, and serves the HTTP
// edge and the metrics listener until its context ends.
package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riverqueue/river"

	"github.com/registrum/registrum/hooks"
	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/actions"
	"github.com/registrum/registrum/host/auth"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/host/gis"
	"github.com/registrum/registrum/host/history"
	"github.com/registrum/registrum/host/httpapi"
	"github.com/registrum/registrum/host/ingest"
	"github.com/registrum/registrum/host/metadata"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/host/requests"
	"github.com/registrum/registrum/internal/ratelimit"
	"github.com/registrum/registrum/internal/telemetry"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/planners"
	"github.com/registrum/registrum/plugins"
	"github.com/registrum/registrum/plugins/contract"
	"github.com/registrum/registrum/plugins/verifier"
	"github.com/registrum/registrum/store"
)

// Host is a running record host's parts.
type Host struct {
	cfg      *config.Config
	log      *slog.Logger
	pool     *pgxpool.Pool
	session  *pgxpool.Pool // for River's LISTEN and the activation watch: database.directUrl's, else pool
	api      *httpapi.API
	verifier *auth.Verifier
	pkg      *model.Package
	metrics  http.Handler
	// mods are the loaded planner modules, nil when the package has none.
	mods *plugins.Runtime
	// hookMods are the loaded local hook handlers, nil when there are none.
	hookMods *plugins.Runtime
	// events capture and deliver the package's events.
	events *hooks.Events
	store  *store.Store
	// runner works the post-commit jobs (River).
	runner *river.Client[pgx.Tx]
	// verifiers are the package's attachment verifiers, opened.
	verifiers map[string]verifier.VerifyCloser
	// fingerprint is the schema fingerprint of the package's layout: an
	// activation of another one stops Serve.
	fingerprint string
	// draining is set when Serve begins to stop: /ready answers 503 from
	// then on, while the listener still serves.
	draining atomic.Bool
	// jobs are the metrics of the jobs this process works; stopJobMetrics
	// ends their subscription to the runner's events.
	jobs           *jobMetrics
	stopJobMetrics func()
	// telemetry exports the process's traces (a no-op when not configured).
	telemetry *telemetry.Provider
}

// errDraining is what /ready reports once the host has begun to stop.
var errDraining = errors.New("host: draining before shutdown")

// ready answers /ready: the host is not draining and the database answers.
func (h *Host) ready(ctx context.Context) error {
	if h.draining.Load() {
		return errDraining
	}
	return h.store.Ping(ctx)
}

// Open loads the package and secrets named by cfg, connects to the database,
// refuses an unmigrated or too new schema, activates the package's layout,
// and builds the HTTP edge.
func Open(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Host, error) {
	pkg, err := model.Load(cfg.Package)
	if err != nil {
		return nil, err
	}
	rootKey, err := cfg.HostKey()
	if err != nil {
		return nil, err
	}
	keys, err := records.DeriveKeys(rootKey)
	if err != nil {
		return nil, err
	}
	pool, session, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	h, err := assemble(ctx, cfg, log, pool, session, pkg, keys)
	if err != nil {
		pool.Close()
		if session != pool {
			session.Close()
		}
		return nil, err
	}
	return h, nil
}

// connect opens the pool of database.url and the pool for what needs a
// session of its own (River's LISTEN, the activation watch): the pool of
// database.directUrl when it is set, url then naming a pooler in
// transaction mode (store.ConnectPooled); else the same pool.
func connect(ctx context.Context, cfg *config.Config) (pool, session *pgxpool.Pool, err error) {
	dsn, err := cfg.DatabaseURL()
	if err != nil {
		return nil, nil, err
	}
	direct, err := cfg.DirectDatabaseURL()
	if err != nil {
		return nil, nil, err
	}
	if direct == "" {
		pool, err := store.Connect(ctx, dsn)
		return pool, pool, err
	}
	if pool, err = store.ConnectPooled(ctx, dsn); err != nil {
		return nil, nil, err
	}
	if session, err = store.Connect(ctx, direct); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("host: database.directUrl: %w", err)
	}
	return pool, session, nil
}

func assemble(ctx context.Context, cfg *config.Config, log *slog.Logger, pool, session *pgxpool.Pool, pkg *model.Package, keys records.Keys) (_ *Host, err error) {
	if cfg.ActivateOnStart {
		act, err := store.Activate(ctx, pool, pkg, false)
		if err != nil {
			return nil, fmt.Errorf("host: activate the package on start: %w", err)
		}
		if act.From != act.To {
			log.Info("package activated", "from", act.From, "to", act.To, "changes", len(act.Changes))
		}
	}
	h := &Host{cfg: cfg, log: log, pool: pool, session: session, pkg: pkg}
	// What the steps below open is closed again when a later one fails;
	// the pool is the caller's.
	defer func() {
		if err != nil {
			h.closeParts()
		}
	}()
	if h.telemetry, err = startTelemetry(ctx, cfg); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	// The events are built before the store: their capturer is one of the
	// store's construction inputs. Retained work is checked against their
	// bindings once the store is open.
	if h.events, h.hookMods, err = openEvents(ctx, cfg, pkg, keys, log, reg); err != nil {
		return nil, err
	}
	if h.store, err = store.Open(ctx, pool, pkg, store.Options{Capture: h.events, Session: session}); err != nil {
		return nil, err
	}
	st := h.store
	if err := h.events.CheckBindings(ctx, st); err != nil {
		return nil, err
	}
	decider, verifier, err := decider(cfg, pkg, keys, log)
	if err != nil {
		return nil, err
	}
	h.verifier = verifier
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newPoolCollector(pool), newCountsCollector(st, log))
	h.jobs = newJobMetrics(reg)
	httpMetrics := httpapi.NewMetrics(reg)
	// Every decision goes through the counting wrapper: a refusal is counted
	// by category once per refused request.
	decider = httpMetrics.Decider(decider)
	ps, handlers, err := h.loadPlanners(ctx)
	if err != nil {
		return nil, err
	}
	auths, err := requests.NewAuthorities(cfg)
	if err != nil {
		return nil, err
	}
	svc, err := records.New(records.Options{Store: st, Keys: keys, Access: decider, Plans: requests.FrozenPlans{}})
	if err != nil {
		return nil, err
	}
	workflow, err := requests.New(requests.Options{Records: svc, Planners: ps, Review: auths})
	if err != nil {
		return nil, err
	}
	if h.verifiers, err = openVerifiers(cfg, pkg); err != nil {
		return nil, err
	}
	if h.runner, err = jobRunner(cfg, st, svc, workflow, auths, h.verifiers, h.events, log); err != nil {
		return nil, err
	}
	docs, err := metadata.Load(pkg, cfg.Package)
	if err != nil {
		return nil, err
	}
	spatial, err := gis.New(gis.Options{Records: svc})
	if err != nil {
		return nil, err
	}
	past, err := history.New(history.Options{Records: svc})
	if err != nil {
		return nil, err
	}
	immediate, err := actions.New(actions.Options{Records: svc, Access: decider, Handlers: handlers})
	if err != nil {
		return nil, err
	}
	runs, err := ingest.New(ingest.Options{Records: svc})
	if err != nil {
		return nil, err
	}
	limit, err := rateLimit(cfg, verifier)
	if err != nil {
		return nil, err
	}
	h.api = httpapi.New(httpapi.Options{
		Records:   svc,
		GIS:       spatial,
		History:   past,
		Actions:   immediate,
		Ingest:    runs,
		Requests:  workflow,
		Documents: docs,
		Access:    decider,
		Logger:    log,
		Metrics:   httpMetrics,
		Ready:     h.ready,
		CORS:      edgeCORS(cfg),
		RateLimit: limit,
	})
	h.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	h.fingerprint = st.SchemaFingerprint()
	return h, nil
}

// Package returns the package the host serves.
func (h *Host) Package() *model.Package { return h.pkg }

// Handler returns the public HTTP handler.
func (h *Host) Handler() http.Handler { return h.api }

// MetricsHandler returns the Prometheus handler.
func (h *Host) MetricsHandler() http.Handler { return h.metrics }

// ServeMetrics answers GET /metrics on ln until ctx ends, for `registrum
// worker`, which serves no other HTTP (Serve answers /metrics itself).
func (h *Host) ServeMetrics(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h.metrics)
	s := newServer(mux)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), HTTPShutdownTimeout)
		defer cancel()
		_ = s.Shutdown(shutdown)
	}()
	if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("host: serve metrics: %w", err)
	}
	return nil
}

// Close stops the key-set refresh and releases the database pool.
func (h *Host) Close() {
	h.closeParts()
	h.pool.Close()
	if h.session != h.pool {
		h.session.Close()
	}
}

// closeParts closes what assemble opened: the key-set refresh, the plugin
// runtimes and the verifiers (each only when it was opened).
func (h *Host) closeParts() {
	if h.verifier != nil {
		h.verifier.Close()
	}
	closeRuntime(h.mods)
	closeRuntime(h.hookMods)
	closeVerifiers(h.verifiers)
	if h.telemetry != nil {
		// Export what is still buffered, within a bound.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.telemetry.Shutdown(ctx); err != nil {
			h.log.Warn("telemetry: spans not exported on close", "error", err)
		}
		h.telemetry = nil
	}
}

// startTelemetry starts the export of traces configured by telemetry (off
// when the key is absent).
func startTelemetry(ctx context.Context, cfg *config.Config) (*telemetry.Provider, error) {
	t := cfg.Telemetry
	if t == nil {
		return nil, nil
	}
	return telemetry.Start(ctx, telemetry.Options{Endpoint: t.OTLPEndpoint, ServiceName: t.ServiceName, SampleRatio: t.SampleRatio})
}

func closeRuntime(rt *plugins.Runtime) {
	if rt != nil {
		rt.Close(context.Background())
	}
}

// Events returns the host's events (capture, delivery, bindings).
func (h *Host) Events() *hooks.Events { return h.events }

// Store returns the host's store.
func (h *Host) Store() *store.Store { return h.store }

// openVerifiers opens the package's attachment verifiers: go-plugin
// binaries checked against their pinned digests, http scanners with their
// credentials.
func openVerifiers(cfg *config.Config, pkg *model.Package) (map[string]verifier.VerifyCloser, error) {
	if len(pkg.Verifiers) == 0 {
		return nil, nil
	}
	vs, err := verifier.OpenPackage(cfg.Package, verifier.OpenOptions{SecretRoot: cfg.Secrets.Root})
	if err != nil {
		return nil, fmt.Errorf("host: open attachment verifiers: %w", err)
	}
	return vs, nil
}

func closeVerifiers(vs map[string]verifier.VerifyCloser) {
	for _, v := range vs {
		_ = v.Close()
	}
}

// jobRunner builds the workers of the post-commit jobs: the review
// authorities' submissions and results, and automatic application.
func jobRunner(cfg *config.Config, st *store.Store, svc *records.Service, workflow *requests.Service, auths *requests.Authorities, verifiers map[string]verifier.VerifyCloser, ev *hooks.Events, log *slog.Logger) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	if _, err := requests.RegisterReviewWorkers(workers, cfg, st, workflow, auths, log); err != nil {
		return nil, err
	}
	timeout, rescue := cfg.JobTimeouts()
	// The lease outlasts the job's run; a host that died mid-verification
	// leaves both to expire, and the rescued job claims the verdict again.
	if _, err := requests.RegisterVerification(workers, st, workflow.ContentStore(), verifiers, log, requests.VerificationOptions{Lease: timeout}); err != nil {
		return nil, err
	}
	if err := ev.Register(workers, st); err != nil {
		return nil, err
	}
	return st.NewJobRunner(workers, store.JobRunnerOptions{Logger: log, JobTimeout: timeout, RescueAfter: rescue, PeriodicJobs: ev.PeriodicJobs(),
		EventDestinations: slices.Sorted(maps.Keys(ev.Bindings())), Tracer: telemetry.Current()})
}

// RunWorkers works the host's post-commit jobs without serving HTTP, until
// ctx ends: for operators who run workers apart from the API. The workers
// then stop at a job boundary (stopWorkers).
func (h *Host) RunWorkers(ctx context.Context) error {
	if err := h.startWorkers(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	h.stopWorkers()
	return nil
}

// WorkerStopTimeout is how long a stopping host lets the jobs it is working
// finish before it cancels them; a cancelled job is worked again by another
// host (each is idempotent).
const WorkerStopTimeout = 10 * time.Second

// workerCancelTimeout bounds the wait for cancelled jobs to return.
const workerCancelTimeout = 5 * time.Second

// startWorkers starts the job workers. Their context is detached from
// ctx: River cancels the jobs in flight when the context given to Start
// ends, and a stopping host lets them finish instead (stopWorkers).
func (h *Host) startWorkers(ctx context.Context) error {
	h.stopJobMetrics = h.jobs.watch(h.runner)
	if err := h.runner.Start(context.WithoutCancel(ctx)); err != nil {
		h.stopJobMetrics()
		return fmt.Errorf("host: start the job workers: %w", err)
	}
	return nil
}

// stopWorkers stops fetching jobs and lets the running ones finish
// (WorkerStopTimeout at most), then cancels what still runs and waits for
// it a little longer.
func (h *Host) stopWorkers() {
	// The jobs' last events are recorded before the subscription ends.
	defer h.stopJobMetrics()
	stop, cancel := context.WithTimeout(context.Background(), WorkerStopTimeout)
	defer cancel()
	if err := h.runner.Stop(stop); err == nil {
		return
	}
	h.log.Warn("jobs still running after the stop timeout: cancelling them", "timeout", WorkerStopTimeout.String())
	hard, cancelHard := context.WithTimeout(context.Background(), workerCancelTimeout)
	defer cancelHard()
	if err := h.runner.StopAndCancel(hard); err != nil {
		h.log.Warn("cancelled jobs did not return", "error", err)
	}
}

// loadPlanners loads the plugin modules of the package's change-request
// planners and immediate-action handlers (pinned digests checked) into
// h.mods, and returns the planners and the action handlers (nil when the
// package has no handler module).
func (h *Host) loadPlanners(ctx context.Context) (*planners.Set, actions.Handlers, error) {
	var set *plugins.Set
	if mods := append(planners.Modules(h.pkg), actionModules(h.pkg)...); len(mods) > 0 {
		rt, err := plugins.NewRuntime(ctx, plugins.Config{})
		if err != nil {
			return nil, nil, err
		}
		h.mods = rt
		dir := h.cfg.Package
		if st, err := os.Stat(dir); err == nil && !st.IsDir() {
			dir = filepath.Dir(dir)
		}
		if set, err = rt.Load(ctx, mods, dir); err != nil {
			return nil, nil, fmt.Errorf("host: load planner modules: %w", err)
		}
	}
	ps, err := planners.New(h.pkg, set)
	if err != nil {
		return nil, nil, err
	}
	if set == nil {
		return ps, nil, nil // no typed nil in the interface
	}
	return ps, set, nil
}

// actionModules lists the handler modules of the package's immediate
// actions, with their declared writes and refusal codes.
func actionModules(pkg *model.Package) []plugins.Module {
	var out []plugins.Module
	for _, a := range pkg.Actions {
		if a.Handler == nil {
			continue
		}
		m := pkg.ModuleByID(a.Handler.Module)
		if m == nil {
			continue
		}
		writes := []contract.DeclaredActionWrite{}
		for _, w := range a.Handler.Writes {
			writes = append(writes, contract.DeclaredActionWrite{ID: w.Effect, Fields: w.Fields})
		}
		refusals := append([]string{}, a.Handler.Refusals...)
		out = append(out, plugins.Module{Module: *m, ActionWrites: writes, Refusals: refusals})
	}
	return out
}

// decider returns the access decider of a package: access profiles checked
// against tokens from the configured issuer, or, for a package that declares
// no profile at all, the unrestricted decider of development packages.
func decider(cfg *config.Config, pkg *model.Package, keys records.Keys, log *slog.Logger) (access.Decider, *auth.Verifier, error) {
	if len(pkg.Profiles) == 0 {
		log.Warn("the package declares no access profile: every caller may do everything")
		return access.Unrestricted{}, nil, nil
	}
	if cfg.Authentication == nil {
		for _, p := range pkg.Profiles {
			if !p.Anonymous {
				return nil, nil, fmt.Errorf("host: %s: authentication settings are required, since profile %q admits callers by token", cfg.Path(), p.ID)
			}
		}
		d, err := access.NewProfiles(pkg, nil, keys.PrincipalReference)
		return d, nil, err
	}
	v, err := auth.NewVerifier(cfg.Authentication, nil, auth.WithLogger(log))
	if err != nil {
		return nil, nil, err
	}
	if err := v.Start(context.Background()); err != nil {
		v.Close()
		return nil, nil, err
	}
	d, err := access.NewProfiles(pkg, v, keys.PrincipalReference)
	if err != nil {
		v.Close()
		return nil, nil, err
	}
	return d, v, nil
}

// edgeCORS returns the edge's CORS policy of cfg.cors; nil when absent.
func edgeCORS(cfg *config.Config) *httpapi.CORS {
	if cfg.CORS == nil {
		return nil
	}
	return &httpapi.CORS{AllowedOrigins: cfg.CORS.AllowedOrigins, MaxAge: cfg.CORS.MaxAge()}
}

// rateLimit returns the edge's rate limit of cfg.rateLimit, nil when
// absent: a caller whose bearer token v verifies is limited as its
// principal, any other as its address.
func rateLimit(cfg *config.Config, v *auth.Verifier) (*httpapi.RateLimit, error) {
	rl := cfg.RateLimit
	if rl == nil {
		return nil, nil
	}
	l, err := ratelimit.New(rl.RequestsPerSecond, rl.Burst, rl.Clients)
	if err != nil {
		return nil, fmt.Errorf("host: %s: rateLimit: %w", cfg.Path(), err)
	}
	out := &httpapi.RateLimit{Limiter: l}
	if v != nil {
		out.Principal = func(ctx context.Context, bearer string) string {
			c, err := v.Verify(ctx, bearer)
			if err != nil {
				return ""
			}
			return c.Principal
		}
	}
	return out, nil
}

// HTTPShutdownTimeout is how long requests in flight get to finish once
// the listener stops accepting new ones.
const HTTPShutdownTimeout = 10 * time.Second

// Serve answers on ln (and on metricsLn when not nil) and works the
// post-commit jobs until ctx ends, then drains: /ready answers 503 at once,
// the listener keeps serving for the configured drain delay
// (listener.drainSeconds) so that a load balancer notices, then stops
// accepting; requests in flight get HTTPShutdownTimeout to finish, and the
// workers stop at a job boundary (stopWorkers). An activation of another
// package stops it at once, without the drain delay.
func (h *Host) Serve(ctx context.Context, ln, metricsLn net.Listener) error {
	if err := h.startWorkers(ctx); err != nil {
		return err
	}
	servers := []*http.Server{newServer(h.api)}
	listeners := []net.Listener{ln}
	if metricsLn != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", h.metrics)
		servers = append(servers, newServer(mux))
		listeners = append(listeners, metricsLn)
	}
	errs := make(chan error, len(servers)+1)
	watch, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		// An activation of another package stops this host: it serves the
		// package it was started with, or nothing.
		if err := store.WatchActivations(watch, h.session, h.fingerprint); err != nil {
			errs <- err
		}
	}()
	for i, s := range servers {
		go func() {
			if err := s.Serve(listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- err
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
		err = fmt.Errorf("host: serve: %w", err)
	}
	h.draining.Store(true)
	// Clients that keep their connection open would not notice the drain:
	// answers from now on close theirs, so the next request goes to the
	// load balancer again.
	servers[0].SetKeepAlivesEnabled(false)
	if drain := h.cfg.Drain(); err == nil && drain > 0 {
		h.log.Info("draining: /ready answers 503; still serving", "seconds", drain.Seconds())
		time.Sleep(drain)
	}
	h.log.Info("stopping: finishing the requests and jobs in flight")
	var wg sync.WaitGroup
	wg.Go(h.stopWorkers)
	shutdown, cancel := context.WithTimeout(context.Background(), HTTPShutdownTimeout)
	defer cancel()
	for _, s := range servers {
		if serr := s.Shutdown(shutdown); serr != nil {
			h.log.Warn("requests still in flight after the shutdown timeout", "error", serr)
		}
	}
	wg.Wait()
	return err
}

func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}
