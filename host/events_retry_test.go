package host_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrum/registrum/host"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/internal/testslack"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

// retryProject holds one url hook on creates with the default day-long
// retry schedule (5 s, 30 s, 2 min, …, 12 h).
const retryProject = "testdata/eventsretry"

// retryDeployment compiles retryProject with its destination bound to url.
func retryDeployment(t *testing.T, dsn, url string, extra ...string) *config.Config {
	t.Helper()
	return hosttest.EventsDeployment(t, retryProject, dsn, url, extra...)
}

// outageReceiver is a webhook receiver that can be unavailable (503, with
// an optional Retry-After), gone (410), stopped altogether (its listener
// closed: connections are refused) and started again on the same address.
// It counts what it accepted per ce-source + ce-id and generation, as a
// deduplicating receiver would.
type outageReceiver struct {
	t    *testing.T
	addr string
	srv  *http.Server

	mu         sync.Mutex
	status     int
	retryAfter []string // answered in turn on non-2xx answers, then none
	requests   int
	accepted   map[string][]string // ce-source + ce-id → generations acknowledged
}

func newOutageReceiver(t *testing.T, status int) *outageReceiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &outageReceiver{t: t, addr: ln.Addr().String(), status: status, accepted: map[string][]string{}}
	r.serve(ln)
	t.Cleanup(r.stop)
	return r
}

func (r *outageReceiver) url() string { return "http://" + r.addr + "/hooks/registry" }

func (r *outageReceiver) serve(ln net.Listener) {
	r.srv = &http.Server{Handler: r}
	go r.srv.Serve(ln)
}

// stop closes the listener and every connection: the receiver is down.
func (r *outageReceiver) stop() { r.srv.Close() }

// start listens on the same address again, answering status.
func (r *outageReceiver) start(status int) {
	r.t.Helper()
	r.set(status)
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatalf("the receiver cannot listen on %s again: %v", r.addr, err)
	}
	r.serve(ln)
}

func (r *outageReceiver) set(status int, retryAfter ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.retryAfter = status, retryAfter
}

func (r *outageReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	io.Copy(io.Discard, req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	if r.status/100 == 2 {
		id := req.Header.Get("Ce-Source") + " " + req.Header.Get("Ce-Id")
		r.accepted[id] = append(r.accepted[id], req.Header.Get("X-Registry-Event-Generation"))
	} else if len(r.retryAfter) > 0 {
		w.Header().Set("Retry-After", r.retryAfter[0])
		r.retryAfter = r.retryAfter[1:]
	}
	w.WriteHeader(r.status)
}

func (r *outageReceiver) counts() (requests int, accepted map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]string{}
	for k, v := range r.accepted {
		out[k] = append([]string(nil), v...)
	}
	return r.requests, out
}

// waitDeliveries polls the store until want deliveries satisfy ok (given
// each delivery and its attempt audit), calling poke about once a second
// meanwhile (nil: never); it returns them.
func waitDeliveries(t *testing.T, h *host.Host, want int, what string, poke func(), ok func(*store.Delivery, []store.DeliveryAttempt) bool) []*store.Delivery {
	t.Helper()
	ctx := context.Background()
	deadline, poked := time.Now().Add(30*time.Second), time.Now()
	for {
		var ds []*store.Delivery
		for _, s := range deliveries(t, h) {
			d, err := h.Store().Delivery(ctx, s.DeliveryID)
			if err != nil {
				t.Fatal(err)
			}
			atts, err := h.Store().DeliveryAttempts(ctx, s.DeliveryID)
			if err != nil {
				t.Fatal(err)
			}
			if ok(d, atts) {
				ds = append(ds, d)
			}
		}
		if len(ds) == want {
			return ds
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries %s, want %d", len(ds), what, want)
		}
		if poke != nil && time.Since(poked) > time.Second {
			poke()
			poked = time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// inState selects the deliveries in state.
func inState(state string) func(*store.Delivery, []store.DeliveryAttempt) bool {
	return func(d *store.Delivery, _ []store.DeliveryAttempt) bool { return d.State == state }
}

// scheduledPause returns the pause the attempt audit recorded after a
// failed attempt: from its claim (X-Registry-Delivery-Time) to the next
// attempt it scheduled.
func scheduledPause(t *testing.T, a store.DeliveryAttempt) time.Duration {
	t.Helper()
	if a.NextAttemptAt == nil {
		t.Fatalf("attempt %d scheduled no next attempt: %+v", a.Attempt, a)
	}
	claimed, err := time.Parse(time.RFC3339Nano, a.DeliveryTime)
	if err != nil {
		t.Fatal(err)
	}
	return a.NextAttemptAt.Sub(claimed)
}

// checkPause fails unless the pause after attempt a is between min and max
// (max plus the scheduling slack: the pause is counted from the attempt's
// end, the audit's time is its claim).
func checkPause(t *testing.T, a store.DeliveryAttempt, min, max time.Duration) {
	t.Helper()
	if pause := scheduledPause(t, a); pause < min || pause > max+testslack.Scheduling {
		t.Fatalf("attempt %d (%s %d): next attempt %s after its claim, want %s to %s", a.Attempt, a.Failure, a.StatusCode, pause, min, max)
	}
}

// checkSchedule checks every failed attempt of a delivery but a last one
// that dead-lettered it against the default schedule: its step, at most
// its step plus the jitter.
func checkSchedule(t *testing.T, atts []store.DeliveryAttempt) {
	t.Helper()
	for i, a := range atts {
		if a.Outcome == "failed" && (i < len(atts)-1 || a.NextAttemptAt != nil) {
			step := model.RetryStep(model.DefaultRetryDelaysMs, a.Attempt)
			checkPause(t, a, step, step+time.Duration(float64(step)*model.RetryJitter))
		}
	}
}

// A receiver that is down for a while (answering 503, then refusing
// connections) and comes back loses and duplicates nothing: every event is
// delivered once, in its first generation; no event is dead-lettered; each
// failed attempt scheduled the next one on the default schedule. The test
// does not wait for the steps: it reads each scheduled pause from the
// attempt audit and then makes the deliveries due through the store.
func TestAReceiverDownForAWhileLosesAndDuplicatesNothing(t *testing.T) {
	const events = 6
	rcv := newOutageReceiver(t, http.StatusServiceUnavailable)
	dsn := storetest.NewDatabase(t)
	h, srv := serve(t, retryDeployment(t, dsn, rcv.url()))
	hosttest.RunWorkers(t, h)
	c := hosttest.Caller{URL: srv.URL}
	for i := range events {
		c.Create(t, "parcels", `{"parcelCode":"O-`+string(rune('a'+i))+`"}`)
	}
	ctx := context.Background()
	retryNow := func() {
		if _, err := h.Store().RetryNow(ctx, "receiver"); err != nil {
			t.Fatal(err)
		}
	}
	// Unavailable: each event's first attempt is answered 503.
	waitDeliveries(t, h, events, "answered 503", nil, func(_ *store.Delivery, atts []store.DeliveryAttempt) bool {
		return len(atts) > 0 && atts[0].Failure == "throttled" && atts[0].StatusCode == 503 && atts[0].NextAttemptAt != nil
	})
	// Down: connections are refused.
	rcv.stop()
	waitDeliveries(t, h, events, "refused a connection", retryNow, func(_ *store.Delivery, atts []store.DeliveryAttempt) bool {
		return slices.ContainsFunc(atts, func(a store.DeliveryAttempt) bool { return a.Failure == "transport" && a.NextAttemptAt != nil })
	})
	// Back: every event is delivered.
	rcv.start(http.StatusNoContent)
	for _, d := range waitDeliveries(t, h, events, "delivered", retryNow, inState(store.DeliveryDelivered)) {
		atts, _ := h.Store().DeliveryAttempts(ctx, d.DeliveryID)
		last := atts[len(atts)-1]
		if d.Generation != 1 || d.Payload != nil || last.Outcome != "delivered" || last.Generation != 1 || len(atts) < 3 {
			t.Fatalf("delivery %+v, attempts %+v", d, atts)
		}
		checkSchedule(t, atts)
	}
	_, accepted := rcv.counts()
	if len(accepted) != events {
		t.Fatalf("the receiver accepted %d events, want %d", len(accepted), events)
	}
	for id, gens := range accepted {
		if len(gens) != 1 || gens[0] != "1" {
			t.Fatalf("event %s accepted as generations %v, want once as 1", id, gens)
		}
	}
	if dead, _ := h.Store().ListDeliveries(ctx, store.DeliveryDeadLettered, 100); len(dead) != 0 {
		t.Fatalf("dead letters %+v", dead)
	}
	// Captures, scheduled retries and the retries made due at once all
	// went to the destination's queue.
	if queues := jobQueues(t, dsn, store.KindDeliverEvent); !slices.Equal(queues, []string{store.EventQueue("receiver")}) {
		t.Fatalf("delivery jobs in queues %q, want only %q", queues, store.EventQueue("receiver"))
	}
}

// A receiver answering 410 Gone is never tried again: the delivery is
// dead-lettered at its first attempt although nine remain, with its
// payload retained for a replay.
func TestAGoneDestinationDeadLettersAtOnce(t *testing.T) {
	rcv := newOutageReceiver(t, http.StatusGone)
	h, srv := serve(t, retryDeployment(t, storetest.NewDatabase(t), rcv.url()))
	hosttest.RunWorkers(t, h)
	hosttest.Caller{URL: srv.URL}.Create(t, "parcels", `{"parcelCode":"G-1"}`)
	d := waitDeliveries(t, h, 1, "dead-lettered", nil, inState(store.DeliveryDeadLettered))[0]
	if d.Attempt != 1 || d.MaximumAttempts != 10 || d.Payload == nil {
		t.Fatalf("dead letter %+v", d)
	}
	atts, err := h.Store().DeliveryAttempts(context.Background(), d.DeliveryID)
	if err != nil || len(atts) != 1 || atts[0].Outcome != "failed" || atts[0].Failure != "gone" || atts[0].StatusCode != 410 || atts[0].NextAttemptAt != nil {
		t.Fatalf("attempt audit %+v %v", atts, err)
	}
	if requests, _ := rcv.counts(); requests != 1 {
		t.Fatalf("the receiver saw %d requests", requests)
	}
}

// Retry-After lengthens the pause before the next attempt, within the
// schedule: never sooner than its step, never later than its largest step
// (12 h); seconds and HTTP dates are both read. Checked on the stored next
// attempt time.
func TestRetryAfterIsHonouredWithinTheSchedule(t *testing.T) {
	rcv := newOutageReceiver(t, http.StatusTooManyRequests)
	h, srv := serve(t, retryDeployment(t, storetest.NewDatabase(t), rcv.url()))
	hosttest.RunWorkers(t, h)
	c := hosttest.Caller{URL: srv.URL}
	inTwoHours := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	for i, tc := range []struct {
		retryAfter string
		min, max   time.Duration
	}{
		{"120", 120 * time.Second, 120 * time.Second},
		{"1", 5 * time.Second, 6 * time.Second}, // the step (5 s) and its jitter
		{"172800", 12 * time.Hour, 12 * time.Hour},
		{"", 5 * time.Second, 6 * time.Second},
		{inTwoHours.Format(http.TimeFormat), 0, 0},
	} {
		rcv.set(http.StatusTooManyRequests, tc.retryAfter)
		if tc.retryAfter == "" {
			rcv.set(http.StatusServiceUnavailable)
		}
		c.Create(t, "parcels", `{"parcelCode":"A-`+string(rune('a'+i))+`"}`)
		// The newest delivery's first attempt, whatever came after it.
		waitDeliveries(t, h, i+1, "captured", nil, func(*store.Delivery, []store.DeliveryAttempt) bool { return true })
		newest := deliveries(t, h)[0].DeliveryID
		var first store.DeliveryAttempt
		waitDeliveries(t, h, 1, "with its first attempt scheduled", nil, func(d *store.Delivery, atts []store.DeliveryAttempt) bool {
			if d.DeliveryID != newest || len(atts) == 0 || atts[0].NextAttemptAt == nil {
				return false
			}
			first = atts[0]
			return true
		})
		if first.Failure != "throttled" {
			t.Fatalf("attempt %+v", first)
		}
		if tc.max == 0 { // an HTTP date: the next attempt is at that date
			if next := *first.NextAttemptAt; next.Before(inTwoHours.Add(-time.Second)) || next.After(inTwoHours.Add(testslack.Scheduling)) {
				t.Fatalf("Retry-After %s: next attempt at %s", tc.retryAfter, next)
			}
			continue
		}
		checkPause(t, first, tc.min, tc.max)
	}
}

// The runtime configuration tightens the compiled schedule (fewer
// attempts) and never widens it: a delivery under maximumAttempts 2 is
// dead-lettered at its second failure; 11 attempts, or a payload
// retention the schedule would outlast, do not start.
func TestRuntimeConfigurationTightensTheScheduleNeverWidensIt(t *testing.T) {
	dsn := storetest.NewDatabase(t)
	for extra, want := range map[string]string{
		"    maximumAttempts: 11\n":                                   "maximumAttempts 11 must be between 1 and the compiled 10",
		"    payloadRetentionSeconds: 3600\n":                         "payloadRetentionSeconds 3600 is not longer than the retry schedule",
		"    maximumAttempts: 6\n    payloadRetentionSeconds: 2000\n": "the retry schedule of 6 attempts",
	} {
		cfg := retryDeployment(t, dsn, "http://127.0.0.1:9/hooks/registry", extra)
		if h, err := host.Open(context.Background(), cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), want) {
			if h != nil {
				h.Close()
			}
			t.Fatalf("%q: %v, want a refusal saying %q", extra, err, want)
		}
	}
	rcv := newOutageReceiver(t, http.StatusBadGateway)
	h, srv := serve(t, retryDeployment(t, storetest.NewDatabase(t), rcv.url(), "    maximumAttempts: 2\n    payloadRetentionSeconds: 60\n"))
	hosttest.RunWorkers(t, h)
	hosttest.Caller{URL: srv.URL}.Create(t, "parcels", `{"parcelCode":"T-1"}`)
	d := waitDeliveries(t, h, 1, "tried once", nil, func(_ *store.Delivery, atts []store.DeliveryAttempt) bool {
		return len(atts) > 0 && atts[0].NextAttemptAt != nil
	})[0]
	if d.MaximumAttempts != 2 || len(d.RetryDelaysMs) != 9 || d.RetryDelaysMs[0] != 5000 {
		t.Fatalf("the delivery carries %d attempts on %v", d.MaximumAttempts, d.RetryDelaysMs)
	}
	retryNow := func() {
		if _, err := h.Store().RetryNow(context.Background(), "receiver"); err != nil {
			t.Fatal(err)
		}
	}
	d = waitDeliveries(t, h, 1, "dead-lettered", retryNow, inState(store.DeliveryDeadLettered))[0]
	atts, _ := h.Store().DeliveryAttempts(context.Background(), d.DeliveryID)
	if d.Attempt != 2 || len(atts) != 2 || atts[1].Failure != "throttled" || atts[1].NextAttemptAt != nil {
		t.Fatalf("dead letter %+v after %+v", d, atts)
	}
	checkSchedule(t, atts)
}

// Bulk replay reopens the dead letters of one destination captured in a
// time window, each as its next generation with a new key; a dry run only
// counts; what is outside the window, expired or of another state is left.
func TestBulkReplayReopensTheDeadLettersOfAWindow(t *testing.T) {
	rcv := newOutageReceiver(t, http.StatusGone)
	h, srv := serve(t, retryDeployment(t, storetest.NewDatabase(t), rcv.url()))
	hosttest.RunWorkers(t, h)
	c := hosttest.Caller{URL: srv.URL}
	c.Create(t, "parcels", `{"parcelCode":"B-0"}`)
	waitDeliveries(t, h, 1, "dead-lettered", nil, inState(store.DeliveryDeadLettered))
	since := time.Now()
	for i := range 3 {
		c.Create(t, "parcels", `{"parcelCode":"B-`+string(rune('1'+i))+`"}`)
	}
	until := time.Now()
	waitDeliveries(t, h, 4, "dead-lettered", nil, inState(store.DeliveryDeadLettered))
	st, ev, ctx := h.Store(), h.Events(), context.Background()
	window := store.ReplayFilter{DestinationID: "receiver", Since: since, Until: until}

	for _, f := range []store.ReplayFilter{{}, {DestinationID: "receiver", State: store.DeliveryPending}, {DestinationID: "receiver", Since: until, Until: since}} {
		if _, err := st.ReplayMatching(ctx, f, ev.Bindings(), ev.Modules(), "op", true); !errors.Is(err, store.ErrReplayFilter) {
			t.Fatalf("filter %+v: %v", f, err)
		}
	}
	if n, err := st.ReplayMatching(ctx, window, map[string]string{"receiver": "sha256:other"}, ev.Modules(), "op", true); err != nil ||
		n != (store.ReplayCount{Matched: 3}) {
		t.Fatalf("under another binding: %+v %v", n, err)
	}
	if n, err := st.ReplayMatching(ctx, store.ReplayFilter{DestinationID: "other"}, ev.Bindings(), ev.Modules(), "op", true); err != nil || n != (store.ReplayCount{}) {
		t.Fatalf("another destination: %+v %v", n, err)
	}
	n, err := st.ReplayMatching(ctx, window, ev.Bindings(), ev.Modules(), "op", true)
	if err != nil || n != (store.ReplayCount{Matched: 3, Replayable: 3}) {
		t.Fatalf("dry run: %+v %v", n, err)
	}
	if dead, _ := st.ListDeliveries(ctx, store.DeliveryDeadLettered, 100); len(dead) != 4 {
		t.Fatalf("a dry run changed %d dead letters", 4-len(dead))
	}
	rcv.set(http.StatusOK)
	n, err = st.ReplayMatching(ctx, window, ev.Bindings(), ev.Modules(), "op", false)
	if err != nil || n != (store.ReplayCount{Matched: 3, Replayable: 3, Replayed: 3}) {
		t.Fatalf("replay: %+v %v", n, err)
	}
	waitDeliveries(t, h, 3, "delivered as generation 2", nil, func(d *store.Delivery, _ []store.DeliveryAttempt) bool {
		return d.State == store.DeliveryDelivered && d.Generation == 2 && d.Attempt == 1
	})
	dead, _ := st.ListDeliveries(ctx, store.DeliveryDeadLettered, 100)
	if len(dead) != 1 || !dead[0].CapturedAt.Before(since) {
		t.Fatalf("left dead letters %+v", dead)
	}
	_, accepted := rcv.counts()
	for id, gens := range accepted {
		if len(gens) != 1 || gens[0] != "2" {
			t.Fatalf("event %s accepted as generations %v", id, gens)
		}
	}
	if len(accepted) != 3 {
		t.Fatalf("%d events accepted", len(accepted))
	}
	// Nothing is left to replay in the window.
	if n, err := st.ReplayMatching(ctx, window, ev.Bindings(), ev.Modules(), "op", false); err != nil || n != (store.ReplayCount{}) {
		t.Fatalf("second replay: %+v %v", n, err)
	}
}

// Payload expiry is a terminal move: the audit entry, the state change and
// the erasure commit together.
func TestPayloadExpiryIsAuditedWithItsStateAndErasure(t *testing.T) {
	rcv := newOutageReceiver(t, http.StatusGone)
	h, srv := serve(t, retryDeployment(t, storetest.NewDatabase(t), rcv.url(), "    maximumAttempts: 1\n    payloadRetentionSeconds: 1\n"))
	hosttest.RunWorkers(t, h)
	hosttest.Caller{URL: srv.URL}.Create(t, "parcels", `{"parcelCode":"E-1"}`)
	d := waitDeliveries(t, h, 1, "dead-lettered", nil, inState(store.DeliveryDeadLettered))[0]
	// The reaper expires it once its second has passed (or this call does).
	waitDeliveries(t, h, 1, "expired", nil, func(d *store.Delivery, _ []store.DeliveryAttempt) bool {
		if d.State != store.DeliveryExpired {
			h.Store().ExpirePayloads(context.Background())
		}
		return d.State == store.DeliveryExpired
	})
	got, err := h.Store().Delivery(context.Background(), d.DeliveryID)
	if err != nil || got.Payload != nil {
		t.Fatalf("expired delivery %+v %v", got, err)
	}
	audit, err := h.Store().DeliveryAudit(context.Background(), d.DeliveryID)
	if err != nil || len(audit) != 1 || audit[0].Action != "expired" || audit[0].Generation != 1 || audit[0].Operator != store.ExpiryOperator {
		t.Fatalf("delivery audit %+v %v", audit, err)
	}
	// Expiring again changes nothing and audits nothing.
	if n, err := h.Store().ExpirePayloads(context.Background()); err != nil || n != 0 {
		t.Fatalf("second expiry: %d %v", n, err)
	}
	if audit, _ := h.Store().DeliveryAudit(context.Background(), d.DeliveryID); len(audit) != 1 {
		t.Fatalf("delivery audit %+v", audit)
	}
}
