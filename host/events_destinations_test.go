package host_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/internal/testslack"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

// A destination whose receiver accepts deliveries and never answers holds
// only its own queue's delivery workers: every create is delivered to two
// destinations, and with the slow one holding all 8 delivery workers a
// pool of 4 gives its queue, the quick one still receives each event at
// once. In one queue shared by both, the quick destination's delivery
// waited behind the slow one's for the attempt timeout (5 s) a round.
func TestASlowDestinationDoesNotDelayAnother(t *testing.T) {
	slow, hanging, stop := silentReceiver(t)
	quick := newReceiver(t)
	bind := func(id, url string) string {
		return "  " + id + ":\n    url: " + url + "\n    hmacSha256KeyRef: secret:file/webhook-key\n    classificationCeiling: internal\n    network: loopback\n"
	}
	dsn := storetest.NewDatabase(t)
	cfg := deployment(t, "testdata/eventsdestinations", withPoolMaxConns(dsn, 4),
		"instanceId: test-1\neventDestinations:\n"+bind("slow", slow.URL+"/hooks")+bind("quick", quick.srv.URL+"/hooks"))
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg.Path()), "secrets", "webhook-key"), []byte(hosttest.EventKey), 0o600); err != nil {
		t.Fatal(err)
	}
	h, srv := serve(t, cfg)
	runWorkers(t, h)
	t.Cleanup(stop) // before the host stops its workers
	c := caller{srv: srv}
	create := func(i int) {
		t.Helper()
		if resp, b := c.do(t, "POST", "/v1/records/parcels", "application/json", fmt.Sprintf(`{"data":{"parcelCode":"P-%d"}}`, i)); resp.StatusCode != 201 {
			t.Fatalf("create: %d %s", resp.StatusCode, b)
		}
	}
	for i := range 20 {
		create(i)
	}
	deadline := time.Now().Add(testslack.Scheduling)
	for hanging.Load() < 8 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := hanging.Load(); n != 8 {
		t.Fatalf("%d deliveries wait on the slow receiver, want the 8 delivery workers of its queue on a pool of 4", n)
	}
	// The quick destination got the 20 creates' events, and gets the next
	// one at once, while the slow one still holds its workers.
	quick.wait(t, 20, testslack.Scheduling)
	start := time.Now()
	create(20)
	quick.wait(t, 21, testslack.Scheduling)
	t.Logf("the quick destination received the event %v after its create, %d deliveries waiting on the slow one", time.Since(start).Round(time.Millisecond), hanging.Load())
	if n := hanging.Load(); n != 8 {
		t.Fatalf("%d deliveries wait on the slow receiver, want 8", n)
	}
	queues := jobQueues(t, dsn, store.KindDeliverEvent)
	if want := []string{store.EventQueue("quick"), store.EventQueue("slow")}; !slices.Equal(queues, want) {
		t.Fatalf("delivery jobs in queues %q, want %q", queues, want)
	}
}

// silentReceiver is a webhook receiver that accepts every delivery and
// never answers: it counts the requests it holds (hanging) until stop,
// which must run before the host stops its workers.
func silentReceiver(t *testing.T) (srv *httptest.Server, hanging *atomic.Int32, stop func()) {
	hanging = &atomic.Int32{}
	release := make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hanging.Add(1)
		defer hanging.Add(-1)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	var once sync.Once
	return srv, hanging, func() { once.Do(func() { close(release) }) }
}
