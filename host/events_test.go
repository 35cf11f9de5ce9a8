package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/hooks"
	"github.com/registrum/registrum/host"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/testslack"
	"github.com/registrum/registrum/project"
	"github.com/registrum/registrum/project/generate"
	"github.com/registrum/registrum/sdk/webhook"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/storetest"
)

// eventKey is the test destinations' signing key (hosttest.EventKey): 40
// bytes ending in whitespace, which must be used as they are.
var eventKey = []byte(hosttest.EventKey)

// receiver is a local webhook receiver that records what it gets and
// answers the statuses it is given in turn (then 200).
type receiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	got      []received
	statuses []int
}

type received struct {
	header http.Header
	body   []byte
	path   string
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{header: req.Header.Clone(), body: b, path: req.URL.RequestURI()})
		status := http.StatusOK
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// wait returns the first n deliveries, failing after timeout.
func (r *receiver) wait(t *testing.T, n int, timeout time.Duration) []received {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r.mu.Lock()
		got := append([]received(nil), r.got...)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d deliveries, want %d", len(got), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// destination is the runtime configuration binding destination
// "receiver" to url, with extra settings.
func destination(url string, extra ...string) string {
	return hosttest.Destination(url, extra...)
}

// eventsDeployment compiles the events test project with its destination
// bound to rcv, and writes the signing key.
func eventsDeployment(t *testing.T, dsn, url string, extra ...string) *config.Config {
	t.Helper()
	return hosttest.EventsDeployment(t, "testdata/events", dsn, url, extra...)
}

// runWorkers works the host's jobs until t ends.
func runWorkers(t *testing.T, h *host.Host) {
	hosttest.RunWorkers(t, h)
}

func verifier(t *testing.T, h *host.Host) *webhook.Verifier {
	types := map[string]string{}
	p := h.Package()
	for _, e := range p.Entities {
		for _, hk := range e.Hooks {
			urn, err := generate.EventSchemaURN(p, e.ID, hk.ID)
			if err != nil {
				t.Fatal(err)
			}
			types[hk.EventType] = urn
		}
	}
	return &webhook.Verifier{Key: eventKey, Path: "/hooks/registry", Source: "urn:engine:registry:parcels:instance:test-1", Types: types, MaxSkew: time.Minute}
}

// verify checks a received delivery with the receiver SDK.
func verify(t *testing.T, v *webhook.Verifier, r received) *webhook.Delivery {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, r.path, bytes.NewReader(r.body))
	req.Header = r.header
	d, err := v.Verify(req)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return d
}

type eventData struct {
	Entity, PackageRevision, RecordID, Trigger string
	Revision                                   int64
	Values                                     map[string]any
}

func dataOf(t *testing.T, d *webhook.Delivery) eventData {
	var e eventData
	if err := json.Unmarshal(d.Event.Data, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func deliveries(t *testing.T, h *host.Host) []store.DeliverySummary {
	t.Helper()
	ds, err := h.Store().ListDeliveries(context.Background(), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func waitState(t *testing.T, h *host.Host, id, state string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d, err := h.Store().Delivery(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery %s is %s, want %s", id, d.State, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var signedHeaders = []string{"Ce-Specversion", "Ce-Id", "Ce-Source", "Ce-Type", "Ce-Time", "Ce-Dataschema", "X-Registry-Event-Generation",
	"X-Registry-Delivery-Attempt", "X-Registry-Delivery-Time", "Idempotency-Key", "X-Registry-Signature", "Content-Type"}

func TestEventsAreCapturedWithTheirWriteAndDeliveredSigned(t *testing.T) {
	rcv := newReceiver(t)
	dsn := storetest.NewDatabase(t)
	cfg := eventsDeployment(t, dsn, rcv.srv.URL+"/hooks/registry")
	h, srv := serve(t, cfg)
	runWorkers(t, h)
	c := caller{srv: srv}
	v := verifier(t, h)

	// A create: one event, signed, exactly the declared projection.
	resp, b := c.do(t, "POST", "/v1/records/parcels", "application/json", `{"data":{"parcelCode":"P-1","area":10,"surveyed":true,"ownerName":"Ada Secret"}}`)
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	loc, tag := resp.Header.Get("Location"), resp.Header.Get("ETag")
	id := loc[strings.LastIndex(loc, "/")+1:]
	got := rcv.wait(t, 1, 10*time.Second)
	// The delivery ran in its destination's own queue (docs/record-host.md,
	// "Pool sizing").
	if queues := jobQueues(t, dsn, store.KindDeliverEvent); !slices.Equal(queues, []string{store.EventQueue("receiver")}) {
		t.Fatalf("delivery jobs in queues %q, want only %q", queues, store.EventQueue("receiver"))
	}
	r := got[0]
	if r.path != "/hooks/registry" {
		t.Fatalf("path %q", r.path)
	}
	for _, name := range signedHeaders {
		if len(r.header.Values(name)) != 1 {
			t.Fatalf("header %s: %q", name, r.header.Values(name))
		}
	}
	for name, vals := range r.header {
		if strings.Contains(strings.Join(vals, ","), id) {
			t.Fatalf("header %s carries the record id", name)
		}
	}
	d := verify(t, v, r)
	if d.Type != "parcel-created-v1" || d.Generation != 1 || d.Attempt != 1 || r.header.Get("Ce-Specversion") != "1.0" {
		t.Fatalf("delivery %+v", d)
	}
	if canon, _ := canonjson.Transform(r.body); !bytes.Equal(canon, r.body) {
		t.Fatalf("body is not in canonical form: %s", r.body)
	}
	var members map[string]json.RawMessage
	json.Unmarshal(r.body, &members)
	if len(members) != 8 {
		t.Fatalf("body members: %s", r.body)
	}
	data := dataOf(t, d)
	if data.Entity != "parcel" || data.RecordID != id || data.Revision != 1 || data.Trigger != "created" || data.PackageRevision != h.Package().Revision {
		t.Fatalf("data %+v", data)
	}
	if vals, _ := json.Marshal(data.Values); string(vals) != `{"area":10,"parcelCode":"P-1"}` {
		t.Fatalf("values %s: only the projected fields", vals)
	}
	if !regexp.MustCompile(`^hmac-sha256:[0-9a-f]{64}$`).MatchString(d.Event.Subject.RecordReference) || d.Event.Subject.RecordRevision != 1 {
		t.Fatalf("subject %+v", d.Event.Subject)
	}
	if d.Event.Causation.Hop != 0 || d.Event.Causation.Root != d.ID {
		t.Fatalf("causation %+v", d.Event.Causation)
	}
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(d.Time) {
		t.Fatalf("time %q", d.Time)
	}

	// A write that rolls back captures nothing.
	before := len(deliveries(t, h))
	if resp, b := c.do(t, "POST", "/v1/records/parcels", "application/json", `{"data":{"parcelCode":"P-1","area":5}}`); resp.StatusCode < 400 {
		t.Fatalf("duplicate code: %d %s", resp.StatusCode, b)
	}
	if n := len(deliveries(t, h)); n != before {
		t.Fatalf("a refused write captured %d deliveries", n-before)
	}

	// Patches: changed(area) AND afterEquals(surveyed: true).
	patch := func(ops, etag string) string {
		t.Helper()
		resp, b := c.do(t, "PATCH", loc, "application/json-patch+json", ops, "If-Match", etag)
		if resp.StatusCode != 200 {
			t.Fatalf("patch: %d %s", resp.StatusCode, b)
		}
		return resp.Header.Get("ETag")
	}
	tag = patch(`[{"op":"replace","path":"/data/ownerName","value":"Other"}]`, tag) // area unchanged: no event
	tag = patch(`[{"op":"replace","path":"/data/area","value":12}]`, tag)           // event
	got = rcv.wait(t, 2, 10*time.Second)
	d = verify(t, v, got[1])
	if data := dataOf(t, d); d.Type != "surveyed-area-changed-v1" || data.Revision != 3 || data.Trigger != "patched" || data.Values["area"] != float64(12) {
		t.Fatalf("patch event %s %+v", d.Type, data)
	}
	tag = patch(`[{"op":"replace","path":"/data/surveyed","value":false},{"op":"replace","path":"/data/area","value":13}]`, tag) // not surveyed after: no event

	// Tombstones: beforeEquals(surveyed: true).
	if resp, b := c.do(t, "DELETE", loc, "", "", "If-Match", tag); resp.StatusCode != 200 {
		t.Fatalf("tombstone: %d %s", resp.StatusCode, b)
	}
	resp, _ = c.do(t, "POST", "/v1/records/parcels", "application/json", `{"data":{"parcelCode":"P-2","surveyed":true}}`)
	loc2, tag2 := resp.Header.Get("Location"), resp.Header.Get("ETag")
	if resp, b := c.do(t, "DELETE", loc2, "", "", "If-Match", tag2); resp.StatusCode != 200 {
		t.Fatalf("tombstone: %d %s", resp.StatusCode, b)
	}
	// A batch: one event per created record, in the batch's transaction.
	resp, b = c.do(t, "POST", "/v1/records/parcels:batch", "application/json",
		`{"items":[{"operation":"create","data":{"parcelCode":"B-1"}},{"operation":"create","data":{"parcelCode":"B-2"}}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("batch: %d %s", resp.StatusCode, b)
	}
	// A refused batch captures nothing.
	before = len(deliveries(t, h))
	c.do(t, "POST", "/v1/records/parcels:batch", "application/json",
		`{"items":[{"operation":"create","data":{"parcelCode":"B-3"}},{"operation":"create","data":{"parcelCode":"B-1"}}]}`)
	if n := len(deliveries(t, h)); n != before {
		t.Fatalf("a refused batch captured %d deliveries", n-before)
	}
	got = rcv.wait(t, 6, 10*time.Second)
	types := map[string]int{}
	for _, r := range got {
		types[verify(t, v, r).Type]++
	}
	want := map[string]int{"parcel-created-v1": 4, "surveyed-area-changed-v1": 1, "surveyed-parcel-removed-v1": 1}
	if tj, wj := jsonOf(types), jsonOf(want); tj != wj {
		t.Fatalf("events %s, want %s", tj, wj)
	}
	time.Sleep(300 * time.Millisecond)
	if rcv.count() != 6 {
		t.Fatalf("%d deliveries, want 6", rcv.count())
	}
	for _, s := range deliveries(t, h) {
		if s.State != store.DeliveryDelivered || s.PayloadAvailable || s.Attempt != 1 {
			t.Fatalf("delivery %+v: delivered, payload erased", s)
		}
	}
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

// A receiver answering 500 twice then 200 sees one Idempotency-Key with
// attempts 1, 2, 3; each attempt is audited before its send.
func TestRetriesKeepTheIdempotencyKeyUntilDelivered(t *testing.T) {
	rcv := newReceiver(t, 500, 500, 200)
	dsn := storetest.NewDatabase(t)
	cfg := eventsDeployment(t, dsn, rcv.srv.URL+"/hooks/registry")
	h, srv := serve(t, cfg)
	runWorkers(t, h)
	v := verifier(t, h)
	start := time.Now()
	if resp, b := (caller{srv: srv}).do(t, "POST", "/v1/records/parcels", "application/json", `{"data":{"parcelCode":"R-1"}}`); resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	got := rcv.wait(t, 3, 15*time.Second)
	if el := time.Since(start); el < 3*time.Second {
		t.Fatalf("three attempts in %v: the schedule waits 1 s then 2 s", el)
	}
	key := got[0].header.Get("Idempotency-Key")
	for i, r := range got {
		d := verify(t, v, r)
		if d.Attempt != i+1 || d.Generation != 1 || d.IdempotencyKey != key || !bytes.Equal(r.body, got[0].body) {
			t.Fatalf("attempt %d: %+v", i+1, d)
		}
	}
	ds := deliveries(t, h)
	waitState(t, h, ds[0].DeliveryID, store.DeliveryDelivered, 5*time.Second)
	atts, err := h.Store().DeliveryAttempts(context.Background(), ds[0].DeliveryID)
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 3 || atts[0].Outcome != "failed" || atts[0].StatusCode != 500 || atts[1].Outcome != "failed" || atts[2].Outcome != "delivered" || atts[2].StatusCode != 200 {
		t.Fatalf("attempt audit %+v", atts)
	}
	for i, a := range atts {
		if a.DeliveryTime != got[i].header.Get("X-Registry-Delivery-Time") {
			t.Fatalf("attempt %d audited delivery time %s, sent %s", i+1, a.DeliveryTime, got[i].header.Get("X-Registry-Delivery-Time"))
		}
	}
	d, _ := h.Store().Delivery(context.Background(), ds[0].DeliveryID)
	if d.Payload != nil {
		t.Fatal("the payload of a delivered event is erased")
	}
	// The retries were scheduled in the destination's queue.
	if queues := jobQueues(t, dsn, store.KindDeliverEvent); !slices.Equal(queues, []string{store.EventQueue("receiver")}) {
		t.Fatalf("delivery jobs in queues %q, want only %q", queues, store.EventQueue("receiver"))
	}
	rec := httptest.NewRecorder()
	h.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{"registrum_events_captured_total 1", "registrum_events_retried_total 2", "registrum_events_delivered_total 1",
		"registrum_events_commit_to_delivery_seconds_count 1"} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Fatalf("metrics lack %q", want)
		}
	}
}

// A receiver down past the retries yields a dead letter; replay delivers it
// as generation 2 with a new key; every refusal is the same.
func TestDeadLetterReplayOpensANewGeneration(t *testing.T) {
	rcv := newReceiver(t, 503, 302)
	dsn := storetest.NewDatabase(t)
	cfg := eventsDeployment(t, dsn, rcv.srv.URL+"/hooks/registry", "    maximumAttempts: 2\n")
	h, srv := serve(t, cfg)
	runWorkers(t, h)
	v := verifier(t, h)
	if resp, b := (caller{srv: srv}).do(t, "POST", "/v1/records/parcels", "application/json", `{"data":{"parcelCode":"D-1"}}`); resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	rcv.wait(t, 2, 10*time.Second)
	ds := deliveries(t, h)
	waitState(t, h, ds[0].DeliveryID, store.DeliveryDeadLettered, 5*time.Second)
	atts, _ := h.Store().DeliveryAttempts(context.Background(), ds[0].DeliveryID)
	if len(atts) != 2 || atts[1].Failure != "redirect" || atts[1].StatusCode != 302 {
		t.Fatalf("a redirect is a failed attempt: %+v", atts)
	}
	s := deliveries(t, h)[0]
	if !s.PayloadAvailable || s.Generation != 1 {
		t.Fatalf("dead letter %+v keeps its payload", s)
	}
	st, ev := h.Store(), h.Events()
	ctx := context.Background()
	refusals := []func() (int, error){
		func() (int, error) {
			return st.Replay(ctx, s.EventID, s.DeliveryID, 2, ev.Bindings(), ev.Modules(), "op")
		},
		func() (int, error) {
			return st.Replay(ctx, s.EventID, s.DeliveryID, 1, map[string]string{"receiver": "sha256:other"}, ev.Modules(), "op")
		},
		func() (int, error) {
			return st.Replay(ctx, uuid.NewString(), s.DeliveryID, 1, ev.Bindings(), ev.Modules(), "op")
		},
		func() (int, error) {
			return st.Replay(ctx, "not-an-id", s.DeliveryID, 1, ev.Bindings(), ev.Modules(), "op")
		},
	}
	for i, f := range refusals {
		if _, err := f(); !errors.Is(err, store.ErrReplayRefused) || err.Error() != store.ErrReplayRefused.Error() {
			t.Fatalf("refusal %d: %v", i, err)
		}
	}
	gen, err := st.Replay(ctx, s.EventID, s.DeliveryID, 1, ev.Bindings(), ev.Modules(), "op")
	if err != nil || gen != 2 {
		t.Fatalf("replay: %d %v", gen, err)
	}
	got := rcv.wait(t, 3, 10*time.Second)
	first, replayed := verify(t, v, got[0]), verify(t, v, got[2])
	if replayed.Generation != 2 || replayed.Attempt != 1 || replayed.IdempotencyKey == first.IdempotencyKey || replayed.ID != first.ID ||
		!bytes.Equal(got[2].body, got[0].body) {
		t.Fatalf("replay delivery %+v", replayed)
	}
	waitState(t, h, s.DeliveryID, store.DeliveryDelivered, 5*time.Second)
	// The replay's job went to the destination's queue, as the first ones.
	if queues := jobQueues(t, dsn, store.KindDeliverEvent); !slices.Equal(queues, []string{store.EventQueue("receiver")}) {
		t.Fatalf("delivery jobs in queues %q, want only %q", queues, store.EventQueue("receiver"))
	}
	if _, err := st.Replay(ctx, s.EventID, s.DeliveryID, 2, ev.Bindings(), ev.Modules(), "op"); !errors.Is(err, store.ErrReplayRefused) {
		t.Fatalf("replay of a delivered event: %v", err)
	}
}

func TestStartupRefusesWhatTheDestinationCannotTake(t *testing.T) {
	dsn := storetest.NewDatabase(t)
	cases := map[string][]string{
		"classificationCeiling public": {"    classificationCeiling: public\n"},
		"maximumAttempts 9":            {"    maximumAttempts: 9\n"},
		"attemptTimeoutMs 20000":       {"    attemptTimeoutMs: 20000\n"},
	}
	for name, extra := range cases {
		url := "http://127.0.0.1:9/hooks/registry"
		cfgText := destination(url, extra...)
		if strings.Contains(extra[0], "classificationCeiling") {
			cfgText = strings.Replace(cfgText, "    classificationCeiling: internal\n", "", 1)
		}
		cfg := deployment(t, "testdata/events", dsn, cfgText)
		os.WriteFile(filepath.Join(filepath.Dir(cfg.Path()), "secrets", "webhook-key"), eventKey, 0o600)
		h, err := host.Open(context.Background(), cfg, slog.New(slog.DiscardHandler))
		if err == nil {
			h.Close()
			t.Fatalf("%s: the host started", name)
		}
		t.Logf("%s: %v", name, err)
	}
	// A key shorter than 32 bytes.
	cfg := deployment(t, "testdata/events", dsn, destination("http://127.0.0.1:9/hooks/registry"))
	os.WriteFile(filepath.Join(filepath.Dir(cfg.Path()), "secrets", "webhook-key"), []byte("short key of 31 bytes, trailing"), 0o600)
	if h, err := host.Open(context.Background(), cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "at least 32 bytes") {
		if h != nil {
			h.Close()
		}
		t.Fatalf("short key: %v", err)
	}
}

func TestRuntimeConfigurationCannotAddProjectedFieldsOrWidenTheNetwork(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"projection":               destination("http://127.0.0.1:9/h", "    projection: [owner-name]\n"),
		"public http":              strings.Replace(destination("http://127.0.0.1:9/h"), "network: loopback", "network: public", 1),
		"query":                    destination("http://127.0.0.1:9/h?x=1"),
		"no instance":              strings.Replace(destination("http://127.0.0.1:9/h"), "instanceId: test-1\n", "", 1),
		"loopback to another host": destination("http://example.test/h"),
	} {
		p := filepath.Join(dir, "c.yaml")
		os.WriteFile(p, []byte("version: 1\nlistener: {address: 127.0.0.1, port: 0}\ndatabase: {url: \"postgres://x@localhost/db\"}\npackage: p\nsecrets: {root: s}\nhostKeyRef: secret:file/k\n"+text), 0o600)
		if _, err := config.Load(p); err == nil {
			t.Fatalf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// Retained pending work bound to a destination blocks a start that would
// change that binding.
func TestStartupRefusesToStrandPendingDeliveries(t *testing.T) {
	dsn := storetest.NewDatabase(t)
	cfg := eventsDeployment(t, dsn, "http://127.0.0.1:9/hooks/registry")
	h, srv := serve(t, cfg) // no workers: the delivery stays pending
	if resp, b := (caller{srv: srv}).do(t, "POST", "/v1/records/parcels", "application/json", `{"data":{"parcelCode":"S-1"}}`); resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	h.Close()
	moved := eventsDeployment(t, dsn, "http://127.0.0.1:10/hooks/registry")
	if h, err := host.Open(context.Background(), moved, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "1 pending deliveries") {
		if h != nil {
			h.Close()
		}
		t.Fatalf("moved destination: %v", err)
	}
	same := eventsDeployment(t, dsn, "http://127.0.0.1:9/hooks/registry")
	h2, err := host.Open(context.Background(), same, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("same binding: %v", err)
	}
	h2.Close()
}

// A lease whose worker died is reaped as a failed attempt; the next attempt
// keeps the generation's key.
func TestCrashedLeasesAreReaped(t *testing.T) {
	rcv := newReceiver(t)
	cfg := eventsDeployment(t, storetest.NewDatabase(t), rcv.srv.URL+"/hooks/registry")
	h, srv := serve(t, cfg)
	if resp, b := (caller{srv: srv}).do(t, "POST", "/v1/records/parcels", "application/json", `{"data":{"parcelCode":"L-1"}}`); resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	st := h.Store()
	id := deliveries(t, h)[0].DeliveryID
	// A worker leases the attempt and dies: its lease runs out.
	l, err := st.ClaimDelivery(context.Background(), id, -4900*time.Millisecond)
	if err != nil || l == nil || l.Attempt != 1 {
		t.Fatalf("claim: %+v %v", l, err)
	}
	time.Sleep(200 * time.Millisecond)
	if n, err := st.ReapLeases(context.Background()); err != nil || n != 1 {
		t.Fatalf("reap: %d %v", n, err)
	}
	runWorkers(t, h)
	got := rcv.wait(t, 1, 10*time.Second)
	d := verify(t, verifier(t, h), got[0])
	if d.Attempt != 2 || d.Generation != 1 {
		t.Fatalf("after the reaped lease: %+v", d)
	}
	waitState(t, h, id, store.DeliveryDelivered, 5*time.Second)
	atts, _ := st.DeliveryAttempts(context.Background(), id)
	if len(atts) != 2 || atts[0].Outcome != "lease_expired" || atts[1].Outcome != "delivered" {
		t.Fatalf("attempts %+v", atts)
	}
}

// causation.hop counts the events between a write and the client's write
// that started the chain; past hooks.MaxHop the write is refused.
func TestEventChainsStopAtTheLoopLimit(t *testing.T) {
	rcv := newReceiver(t)
	cfg := eventsDeployment(t, storetest.NewDatabase(t), rcv.srv.URL+"/hooks/registry")
	h, _ := serve(t, cfg)
	st := h.Store()
	e := h.Package().EntityByID("parcel")
	create := func(ctx context.Context, code string) error {
		_, _, err := st.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
			id := uuid.NewString()
			_, err := w.Create(ctx, e, id, map[string]any{"parcel-code": code}, store.Journal{OperationID: uuid.NewString(), TraceID: strings.Repeat("a", 32),
				RecordReference: "hmac-sha256:" + strings.Repeat("0", 64), Data: []byte(`{}`)})
			return &store.Outcome{}, err
		})
		return err
	}
	root := uuid.NewString()
	if err := create(hooks.WithCausation(context.Background(), hooks.Causation{Hop: hooks.MaxHop - 1, Root: root}), "H-1"); err != nil {
		t.Fatal(err)
	}
	err := create(hooks.WithCausation(context.Background(), hooks.Causation{Hop: hooks.MaxHop, Root: root}), "H-2")
	if !errors.Is(err, hooks.ErrLoop) {
		t.Fatalf("hop past the limit: %v", err)
	}
	ds := deliveries(t, h)
	if len(ds) != 1 {
		t.Fatalf("%d deliveries: the refused write captured nothing", len(ds))
	}
	runWorkers(t, h)
	d := verify(t, verifier(t, h), rcv.wait(t, 1, 10*time.Second)[0])
	if d.Event.Causation.Hop != hooks.MaxHop || d.Event.Causation.Root != root {
		t.Fatalf("causation %+v", d.Event.Causation)
	}
}

// A dead letter's payload is kept only for the retention: then it expires,
// is erased, and can no longer be replayed.
func TestExpiredDeadLettersCannotBeReplayed(t *testing.T) {
	rcv := newReceiver(t, 500)
	cfg := eventsDeployment(t, storetest.NewDatabase(t), rcv.srv.URL+"/hooks/registry", "    maximumAttempts: 1\n    payloadRetentionSeconds: 2\n")
	h, srv := serve(t, cfg)
	runWorkers(t, h)
	if resp, b := (caller{srv: srv}).do(t, "POST", "/v1/records/parcels", "application/json", `{"data":{"parcelCode":"X-1"}}`); resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	rcv.wait(t, 1, 10*time.Second)
	s := deliveries(t, h)[0]
	waitState(t, h, s.DeliveryID, store.DeliveryDeadLettered, 5*time.Second)
	// The reaper (every 5 s) expires it once the retention has passed.
	waitState(t, h, s.DeliveryID, store.DeliveryExpired, 15*time.Second)
	d, _ := h.Store().Delivery(context.Background(), s.DeliveryID)
	if d.Payload != nil {
		t.Fatal("an expired payload is erased")
	}
	ev := h.Events()
	if _, err := h.Store().Replay(context.Background(), s.EventID, s.DeliveryID, 1, ev.Bindings(), ev.Modules(), "op"); !errors.Is(err, store.ErrReplayRefused) {
		t.Fatalf("replay of an expired dead letter: %v", err)
	}
}

// A production package's url hook must be bound; a development package's
// unbound hook captures nothing.
func TestUnboundDestinations(t *testing.T) {
	dsn := storetest.NewDatabase(t)
	dir := t.TempDir()
	res, err := project.Compile("testdata/events", project.Options{Fingerprint: layout.Fingerprint, Production: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Write(filepath.Join(dir, "package")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), bytes.Repeat([]byte{7}, 32), 0o600)
	p := filepath.Join(dir, "registrum.yaml")
	os.WriteFile(p, []byte("version: 1\nlistener: {address: 127.0.0.1, port: 0}\ndatabase: {url: \""+dsn+"\"}\npackage: package\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n"), 0o600)
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := host.Open(context.Background(), cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "which eventDestinations does not bind") {
		if h != nil {
			h.Close()
		}
		t.Fatalf("production package without its destination: %v", err)
	}
	// Development: served, nothing captured.
	h, srv := serve(t, deployment(t, "testdata/events", storetest.NewDatabase(t)))
	if resp, b := (caller{srv: srv}).do(t, "POST", "/v1/records/parcels", "application/json", `{"data":{"parcelCode":"U-1"}}`); resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	if n := len(deliveries(t, h)); n != 0 {
		t.Fatalf("%d deliveries captured for an unbound destination", n)
	}
}

// An attempt is bounded by the (tightened) attempt timeout: a receiver
// slower than it fails the attempt as a timeout.
func TestAttemptsTimeOut(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	}))
	defer slow.Close()
	cfg := eventsDeployment(t, storetest.NewDatabase(t), slow.URL+"/hooks/registry", "    maximumAttempts: 1\n    attemptTimeoutMs: 200\n")
	h, srv := serve(t, cfg)
	runWorkers(t, h)
	if resp, b := (caller{srv: srv}).do(t, "POST", "/v1/records/parcels", "application/json", `{"data":{"parcelCode":"T-1"}}`); resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	id := deliveries(t, h)[0].DeliveryID
	start := time.Now()
	// The receiver would answer after a minute: only the attempt timeout
	// ends the attempt, and it is recorded as a timeout.
	waitState(t, h, id, store.DeliveryDeadLettered, 30*time.Second)
	atts, _ := h.Store().DeliveryAttempts(context.Background(), id)
	if len(atts) != 1 || atts[0].Failure != "timeout" {
		t.Fatalf("attempts %+v after %v", atts, time.Since(start))
	}
	testslack.Stopped(t, "an attempt to a silent receiver", time.Since(start), 200*time.Millisecond)
}

// jobQueues returns the queues of the jobs of kind on the database dsn.
func jobQueues(t *testing.T, dsn, kind string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT DISTINCT queue FROM `+store.JobSchema+`.river_job WHERE kind = $1 ORDER BY queue`, kind)
	if err != nil {
		t.Fatal(err)
	}
	queues, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return queues
}
