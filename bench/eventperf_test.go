package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

// eventsProject is the record host's events test project (one url hook on
// create), shared with the host's event tests.
const eventsProject = "../host/testdata/events"

type noopArgs struct{}

func (noopArgs) Kind() string { return "registrum.test.noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	done *atomic.Int64
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error { w.done.Add(1); return nil }

// writeInBatches commits n records of the events test project, per
// transactions of batch creates, each with jobs of its own (each create
// captures one parcel-created event); extra runs in each transaction.
func writeInBatches(t *testing.T, st *store.Store, from, n, batch int, extra func(context.Context, *store.Writer) error) {
	t.Helper()
	e := st.Package().EntityByID("parcel")
	ctx := context.Background()
	for i := from; i < from+n; i += batch {
		_, _, err := st.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
			for j := i; j < i+batch && j < from+n; j++ {
				if extra != nil {
					if err := extra(ctx, w); err != nil {
						return nil, err
					}
					continue
				}
				if _, err := w.Create(ctx, e, uuid.NewString(), map[string]any{"parcel-code": fmt.Sprintf("E-%d", j)}, store.Journal{OperationID: uuid.NewString(),
					TraceID: strings.Repeat("b", 32), RecordReference: "hmac-sha256:" + strings.Repeat("0", 64), Data: []byte(`{}`)}); err != nil {
					return nil, err
				}
			}
			return &store.Outcome{}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestEventDeliveryReport measures 10,000 events delivered to a local
// receiver (deliveries/s, commit→delivery latency) against River's own
// throughput for a no-op job in the same run. Opt-in:
// REGISTRUM_EVENTS_BENCH=1 (see docs/performance.md).
func TestEventDeliveryReport(t *testing.T) {
	if os.Getenv("REGISTRUM_EVENTS_BENCH") != "1" {
		t.Skip("set REGISTRUM_EVENTS_BENCH=1 to run the event delivery report")
	}
	const n, batch = 10000, 100

	// River alone: n no-op jobs, inserted in the same transactions shape.
	{
		dsn := storetest.NewDatabase(t)
		cfg := hosttest.EventsDeployment(t, eventsProject, dsn, "http://127.0.0.1:9/hooks/registry")
		h, _ := hosttest.Serve(t, cfg)
		var done atomic.Int64
		workers := river.NewWorkers()
		river.AddWorker(workers, &noopWorker{done: &done})
		runner, err := h.Store().NewJobRunner(workers, store.JobRunnerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		writeInBatches(t, h.Store(), 0, n, batch, func(ctx context.Context, w *store.Writer) error { return w.Enqueue(ctx, noopArgs{}, nil) })
		if err := runner.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		for done.Load() < n {
			time.Sleep(10 * time.Millisecond)
		}
		el := time.Since(start)
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		runner.Stop(stop)
		cancel()
		t.Logf("River no-op jobs: %d inserted and worked in %v: %.0f jobs/s", n, el.Round(time.Millisecond), float64(n)/el.Seconds())
	}

	// Events: n creates, each capturing one event, delivered while the
	// writes go on: first as fast as the writes commit (burst), then paced
	// at 1,000 events a second (10 per transaction every 10 ms).
	for _, phase := range []struct {
		name  string
		batch int
		pace  time.Duration
	}{{"burst", batch, 0}, {"paced 1,000/s", 10, 10 * time.Millisecond}} {
		eventPhase(t, phase.name, n, phase.batch, phase.pace)
	}
}

// eventPhase delivers n events to a local receiver and reports the rate and
// the commit→delivery latency (receipt time minus the event's time, the
// writing transaction's clock).
func eventPhase(t *testing.T, name string, n, batch int, pace time.Duration) {
	var mu sync.Mutex
	var lat []time.Duration
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		now := time.Now()
		var body struct{ Time time.Time }
		json.Unmarshal(b, &body)
		mu.Lock()
		lat = append(lat, now.Sub(body.Time))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	cfg := hosttest.EventsDeployment(t, eventsProject, storetest.NewDatabase(t), rcv.URL+"/hooks/registry")
	h, _ := hosttest.Serve(t, cfg)
	hosttest.RunWorkers(t, h)
	start := time.Now()
	if pace == 0 {
		writeInBatches(t, h.Store(), 0, n, batch, nil)
	} else {
		tick := time.NewTicker(pace)
		for i := 0; i < n; i += batch {
			<-tick.C
			writeInBatches(t, h.Store(), i, batch, batch, nil)
		}
		tick.Stop()
	}
	committed := time.Since(start)
	for {
		mu.Lock()
		got := len(lat)
		mu.Unlock()
		if got >= n {
			break
		}
		if time.Since(start) > 5*time.Minute {
			t.Fatalf("%d of %d delivered", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	el := time.Since(start)
	slices.Sort(lat)
	t.Logf("events, %s: %d committed in %v, all delivered in %v: %.0f deliveries/s; commit→delivery p50 %v, p99 %v, max %v",
		name, n, committed.Round(time.Millisecond), el.Round(time.Millisecond), float64(n)/el.Seconds(),
		lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}
