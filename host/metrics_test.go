package host_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/registrum/registrum/host"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/internal/telemetry"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// families is one scrape of a metrics listener, by metric name.
type families map[string]*dto.MetricFamily

// scrape reads the metrics listener at url over HTTP.
func scrape(t *testing.T, url string) families {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return fs
}

// value sums the samples of name whose labels include every pair of
// labels (a histogram's sample count).
func (fs families) value(name string, labels ...string) float64 {
	f := fs[name]
	if f == nil {
		return 0
	}
	var sum float64
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// documentedMetrics reads the record host's metrics table of
// docs/operations.md: the first column of every row of the table under the
// heading "### Record host metrics".
func documentedMetrics(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `(registrum_[a-z_]+)` \\|")
	var names []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			in = line == "### Record host metrics"
			continue
		}
		if m := row.FindStringSubmatch(line); in && m != nil {
			names = append(names, m[1])
		}
	}
	if len(names) == 0 {
		t.Fatal("docs/operations.md: no row in the table under ### Record host metrics")
	}
	return names
}

// TestMetricsListenerServesTheDocumentedMetrics serves a host with a
// metrics listener, sends it real traffic (writes, a submitted change
// request delivered to a webhook receiver, refused credentials), then reads
// the listener over HTTP: every metric the table of docs/operations.md
// documents is served, every registrum_ metric served is documented, and
// the counts moved.
func TestMetricsListenerServesTheDocumentedMetrics(t *testing.T) {
	t.Setenv("REGISTRUM_CONFIG_LISTENER_DRAIN_SECONDS", "0")
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}}, nil)
	rcv := newReceiver(t)
	cfg := deployment(t, "testdata/eventrequests", storetest.NewDatabase(t), is.HostAuthentication(),
		"instanceId: test-1\neventDestinations:\n  receiver:\n    url: "+rcv.srv.URL+"/hooks/registry\n    hmacSha256KeyRef: secret:file/webhook-key\n    classificationCeiling: internal\n    network: loopback\n")
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg.Path()), "secrets", "webhook-key"), eventKey, 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- h.Serve(ctx, ln, mln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
		h.Close()
	})
	base, metrics := "http://"+ln.Addr().String(), "http://"+mln.Addr().String()+"/metrics"
	before := scrape(t, metrics)

	// The public listener never serves the metrics.
	if resp, _ := (hosttest.Caller{URL: base}).Do(t, "GET", "/metrics", "", ""); resp.StatusCode != 404 {
		t.Fatalf("GET /metrics on the public listener: %d", resp.StatusCode)
	}

	// Traffic: a child, an address change submitted (its lifecycle event
	// delivered to the receiver by a job).
	c := hosttest.Caller{URL: base, Token: is.Token(t, issuertest.StandardClientID)}
	childLoc, _ := c.Create(t, "children", `{"name":"Bo"}`)
	loc, tag := c.Create(t, "address-changes", `{"childId":"`+filepath.Base(childLoc)+`","address":"Elm 3"}`)
	if resp, b := c.Do(t, "POST", loc+"/actions/submit", "application/json", `{"actorReference":"a"}`, "If-Match", tag, "Idempotency-Key", "k1"); resp.StatusCode != 200 {
		t.Fatalf("submit: %d %s", resp.StatusCode, b)
	}
	rcv.wait(t, 1, 10*time.Second)

	// One refusal of each category; the registry document, which probes
	// every operation of every entity, counts none.
	refusals := []struct {
		category string
		caller   hosttest.Caller
		hdr      []string
		status   int
	}{
		{"missing_token", hosttest.Caller{URL: base}, nil, 404},
		{"invalid_token", hosttest.Caller{URL: base, Token: "not-a-token"}, nil, 401},
		{"unusable_credential", hosttest.Caller{URL: base}, []string{"Authorization", "Basic YTpi"}, 401},
		{"profile_not_satisfied", hosttest.Caller{URL: base, Token: is.Token(t, issuertest.EvidenceClientID)}, nil, 404},
	}
	for _, r := range refusals {
		if resp, b := r.caller.Do(t, "GET", "/v1/records/children", "", "", r.hdr...); resp.StatusCode != r.status {
			t.Fatalf("%s: %d %s, want %d", r.category, resp.StatusCode, b, r.status)
		}
	}
	if resp, b := c.Do(t, "GET", "/v1/registry", "", ""); resp.StatusCode != 200 {
		t.Fatalf("registry document: %d %s", resp.StatusCode, b)
	}
	// A method is any token a caller sends: methods that are not HTTP's
	// standard ones are counted under one label, never one series each.
	const invented = 20
	for i := range invented {
		if resp, _ := c.Do(t, fmt.Sprintf("INVENTED%02d", i), "/v1/records/children", "", ""); resp.StatusCode != 404 {
			t.Fatalf("an invented method: %d, want the concealed 404", resp.StatusCode)
		}
	}

	// River reports a job's completion after it is recorded: wait for it.
	var after families
	deadline := time.Now().Add(10 * time.Second)
	for {
		after = scrape(t, metrics)
		if after.value("registrum_host_jobs_finished_total", "outcome", "completed") > 0 && after.value("registrum_events_delivered_total") > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no completed job and no delivery in the metrics after 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The table and the listener agree.
	documented := documentedMetrics(t)
	for _, name := range documented {
		if after[name] == nil {
			t.Errorf("%s is documented in docs/operations.md but not served", name)
		}
	}
	for name := range after {
		if strings.HasPrefix(name, "registrum_") && !slices.Contains(documented, name) {
			t.Errorf("%s is served but not documented in docs/operations.md", name)
		}
	}

	for _, name := range []string{"registrum_http_requests_total", "registrum_http_request_duration_seconds"} {
		for _, m := range after[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" && strings.HasPrefix(l.GetValue(), "INVENTED") {
					t.Fatalf("%s has a series for the method %q", name, l.GetValue())
				}
			}
		}
		if got := after.value(name, "method", telemetry.OtherMethod) - before.value(name, "method", telemetry.OtherMethod); got != invented {
			t.Errorf("%s{method=%q} moved by %v, want %d", name, telemetry.OtherMethod, got, invented)
		}
	}

	// The counts moved.
	for _, r := range refusals {
		if got := after.value("registrum_host_auth_refusals_total", "category", r.category) - before.value("registrum_host_auth_refusals_total", "category", r.category); got != 1 {
			t.Errorf("auth refusals %s: %v, want 1", r.category, got)
		}
	}
	moved := []struct {
		name   string
		labels []string
	}{
		{"registrum_http_requests_total", []string{"status", "201"}},
		{"registrum_http_request_duration_seconds", nil},
		{"registrum_host_pool_acquires_total", nil},
		{"registrum_host_job_run_duration_seconds", nil},
		{"registrum_host_job_queue_wait_seconds", nil},
		{"registrum_events_captured_total", nil},
		{"registrum_events_delivered_total", nil},
	}
	for _, m := range moved {
		if after.value(m.name, m.labels...) <= before.value(m.name, m.labels...) {
			t.Errorf("%s%v did not move: %v then %v", m.name, m.labels, before.value(m.name, m.labels...), after.value(m.name, m.labels...))
		}
	}
	gauges := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"registrum_host_change_requests", []string{"state", "submitted"}, 1},
		{"registrum_host_change_requests", []string{"state", "draft"}, 0},
		{"registrum_host_pool_max_connections", nil, 32},
		{"registrum_host_attachment_verifications", []string{"verdict", "pending"}, 0},
		{"registrum_host_review_submissions", []string{"state", "pending"}, 0},
	}
	for _, g := range gauges {
		if got := after.value(g.name, g.labels...); got != g.want {
			t.Errorf("%s%v = %v, want %v", g.name, g.labels, got, g.want)
		}
	}
	if after.value("registrum_host_event_deliveries", "state", "delivered")+after.value("registrum_host_event_deliveries", "state", "leased") < 1 {
		t.Errorf("registrum_host_event_deliveries: no delivered delivery")
	}
	if after.value("registrum_host_jobs") < 1 {
		t.Errorf("registrum_host_jobs: no job counted")
	}
	if after.value("registrum_host_pool_total_connections") < 1 {
		t.Errorf("registrum_host_pool_total_connections: no connection")
	}
	if after.value("registrum_host_count_query_failures_total") != 0 {
		t.Errorf("the count query failed")
	}
}
