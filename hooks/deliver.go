package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/registrum/registrum/internal/telemetry"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
	"github.com/registrum/registrum/plugins/contract"
	"github.com/registrum/registrum/store"
)

// KindReap is the periodic job that reaps expired leases and expires
// retained payloads.
const KindReap = "registrum.event.reap"

// ReapArgs is the reaper's job.
type ReapArgs struct{}

// Kind implements river.JobArgs.
func (ReapArgs) Kind() string { return KindReap }

// Register adds the delivery and reaper workers to w; st is the store
// they work on.
func (ev *Events) Register(w *river.Workers, st *store.Store) error {
	if err := river.AddWorkerSafely(w, &deliverWorker{ev: ev, st: st}); err != nil {
		return fmt.Errorf("hooks: %w", err)
	}
	if err := river.AddWorkerSafely(w, &reapWorker{st: st, log: ev.log}); err != nil {
		return fmt.Errorf("hooks: %w", err)
	}
	return nil
}

// PeriodicJobs returns the reaper's schedule.
func (ev *Events) PeriodicJobs() []*river.PeriodicJob {
	return []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(ev.cfg.ReapEvery),
		func() (river.JobArgs, *river.InsertOpts) { return ReapArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true})}
}

// CheckBindings refuses to start when retained nonterminal work (pending or
// leased deliveries) was captured for a destination binding this host no
// longer has: that work could never be delivered.
func (ev *Events) CheckBindings(ctx context.Context, st *store.Store) error {
	bs, err := st.PendingBindings(ctx)
	if err != nil {
		return err
	}
	have := ev.Bindings()
	for _, b := range bs {
		if have[b.DestinationID] != b.BindingDigest {
			return fmt.Errorf("hooks: %d pending deliveries were captured for destination %s as it was bound before; bind it as it was (url, network, classificationCeiling) until they end, or end them first",
				b.Deliveries, b.DestinationID)
		}
	}
	return nil
}

type reapWorker struct {
	river.WorkerDefaults[ReapArgs]
	st  *store.Store
	log interface {
		Info(string, ...any)
	}
}

func (w *reapWorker) Work(ctx context.Context, _ *river.Job[ReapArgs]) error {
	n, err := w.st.ReapLeases(ctx)
	if err != nil {
		return err
	}
	x, err := w.st.ExpirePayloads(ctx)
	if err != nil {
		return err
	}
	if n > 0 || x > 0 {
		w.log.Info("event deliveries reaped", "expiredLeases", n, "expiredPayloads", x)
	}
	return nil
}

type deliverWorker struct {
	river.WorkerDefaults[store.DeliverEventArgs]
	ev *Events
	st *store.Store
}

// Work makes one attempt of a due delivery: lease (with its audit,
// committed), send, record the result.
func (w *deliverWorker) Work(ctx context.Context, job *river.Job[store.DeliverEventArgs]) error {
	ev := w.ev
	l, err := w.st.ClaimDelivery(ctx, job.Args.DeliveryID, ev.cfg.LeaseGrace)
	if err != nil || l == nil {
		return err
	}
	switch {
	case l.Attempt == 1 && l.Generation == 1:
		ev.m.captured.Inc()
	case l.Attempt == 1:
		ev.m.replayed.Inc()
	}
	res := ev.attempt(ctx, l)
	state, err := w.st.FinishAttempt(context.WithoutCancel(ctx), l, res)
	if err != nil {
		return err
	}
	switch state {
	case store.DeliveryDelivered:
		ev.m.delivered.Inc()
		ev.m.latency.Observe(time.Since(l.CapturedAt).Seconds())
	case store.DeliveryPending:
		ev.m.retried.Inc()
	case store.DeliveryDeadLettered:
		ev.m.deadLettered.Inc()
		ev.log.Warn("event delivery dead-lettered", "deliveryId", l.DeliveryID, "eventId", l.EventID, "hook", l.HookID, "generation", l.Generation,
			"attempt", l.Attempt, "failure", res.Failure, "status", res.StatusCode)
	case store.DeliveryFailed:
		ev.m.failed.Inc()
		ev.log.Warn("local event handler failed for good", "deliveryId", l.DeliveryID, "hook", l.HookID, "failure", res.Failure)
	}
	return nil
}

// identity is the event identity a body restates.
type identity struct {
	ID         string `json:"id"`
	Source     string `json:"source"`
	Type       string `json:"type"`
	Time       string `json:"time"`
	DataSchema string `json:"dataschema"`
}

// attempt sends one attempt and classifies its result.
func (ev *Events) attempt(ctx context.Context, l *store.Lease) store.AttemptResult {
	timeout := time.Duration(l.AttemptTimeoutMs) * time.Millisecond
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if l.HandlerKind != model.HandlerURL {
		return ev.runLocal(actx, l)
	}
	d := ev.cfg.Destinations[l.DestinationID]
	if d == nil || d.BindingDigest() != l.BindingDigest {
		// Start-up refuses this; a reaped lease may still meet it.
		return store.AttemptResult{Failure: "destination_unbound"}
	}
	req, err := ev.Request(actx, d, l)
	if err != nil {
		return store.AttemptResult{Failure: "unreadable_payload"}
	}
	resp, err := ev.clients[d.ID].Do(req)
	if err != nil {
		if errors.Is(actx.Err(), context.DeadlineExceeded) {
			return store.AttemptResult{Failure: "timeout"}
		}
		return store.AttemptResult{Failure: "transport"}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return outcome(resp.StatusCode, resp.Header, time.Now())
}

// Request builds the signed CloudEvents request of one attempt: POST to
// the destination's fixed path, the exact captured body, every header of
// the protocol, X-Registry-Signature under the destination's current key,
// and the Standard Webhooks headers: webhook-id (the event id),
// webhook-timestamp (the delivery time in seconds) and webhook-signature
// (one entry per key the destination holds, the current key first).
func (ev *Events) Request(ctx context.Context, d *Destination, l *store.Lease) (*http.Request, error) {
	var id identity
	if err := json.Unmarshal(l.Payload, &id); err != nil {
		return nil, fmt.Errorf("hooks: payload of delivery %s: %w", l.DeliveryID, err)
	}
	if id.ID == "" || strings.Contains(id.ID, ".") {
		// The Standard Webhooks signing input is delimited by dots.
		return nil, fmt.Errorf("hooks: payload of delivery %s: the event id is empty or holds a dot", l.DeliveryID)
	}
	env := Envelope{ID: id.ID, Source: id.Source, Type: id.Type, Time: id.Time, DataSchema: id.DataSchema,
		Generation: l.Generation, Attempt: l.Attempt, DeliveryTime: store.FormatTime(l.DeliveryTime), Path: d.URL.EscapedPath(),
		IdempotencyKey: IdempotencyKey(l.EventID, l.DeliveryID, l.Generation, l.PayloadDigest, l.BindingDigest)}
	u := *d.URL
	u.RawQuery, u.Fragment = "", ""
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(l.Payload))
	if err != nil {
		return nil, fmt.Errorf("hooks: request of delivery %s: %w", l.DeliveryID, err)
	}
	h := req.Header
	h["Ce-Specversion"] = []string{SpecVersion}
	h["Ce-Id"] = []string{env.ID}
	h["Ce-Source"] = []string{env.Source}
	h["Ce-Type"] = []string{env.Type}
	h["Ce-Time"] = []string{env.Time}
	h["Ce-Dataschema"] = []string{env.DataSchema}
	h["X-Registry-Event-Generation"] = []string{strconv.Itoa(env.Generation)}
	h["X-Registry-Delivery-Attempt"] = []string{strconv.Itoa(env.Attempt)}
	h["X-Registry-Delivery-Time"] = []string{env.DeliveryTime}
	h["Idempotency-Key"] = []string{env.IdempotencyKey}
	h["X-Registry-Signature"] = []string{Sign(d.Key, env, l.Payload)}
	// Standard Webhooks: the seconds of the same delivery time, so that both
	// schemes name one instant.
	ts := l.DeliveryTime.Unix()
	h[HeaderWebhookID] = []string{env.ID}
	h[HeaderWebhookTimestamp] = []string{strconv.FormatInt(ts, 10)}
	h[HeaderWebhookSignature] = []string{StandardSignatures(d.Keys(), env.ID, ts, l.Payload)}
	h["Content-Type"] = []string{ContentType}
	h["User-Agent"] = []string{"registrum-events/1"}
	return req, nil
}

// runLocal runs a local handler on the captured body: only under the
// module digest the delivery was captured for.
func (ev *Events) runLocal(ctx context.Context, l *store.Lease) store.AttemptResult {
	b := ev.hooks[l.HookID]
	if b == nil || b.module == nil || b.module.SHA256 != l.ModuleDigest || l.PackageRevision != ev.cfg.Package.Revision {
		return store.AttemptResult{Failure: "module_unbound", Final: true}
	}
	ctx, span := telemetry.StartSpan(ctx, "hook.handler "+l.HookID)
	defer span.End()
	out, err := ev.cfg.Handlers.HandleEvent(WithCausationOf(ctx, l.Payload), b.module.ID, l.Payload)
	if err != nil {
		telemetry.Fail(span, err)
		kind := string(plugins.FailureKindOf(err))
		if kind == "" {
			kind = "execution"
		}
		// A refused call (input over the limit, wrong kind) can never run.
		return store.AttemptResult{Failure: "handler_" + kind, Final: kind == string(plugins.FailureRefused)}
	}
	if out.Outcome == contract.HookRetry {
		return store.AttemptResult{Failure: "handler_retry"}
	}
	return store.AttemptResult{Delivered: true}
}

// WithCausationOf continues the causation chain of a captured body in ctx.
func WithCausationOf(ctx context.Context, payload []byte) context.Context {
	var b struct {
		Causation Causation `json:"causation"`
	}
	if json.Unmarshal(payload, &b) != nil {
		return ctx
	}
	return WithCausation(ctx, b.Causation)
}
