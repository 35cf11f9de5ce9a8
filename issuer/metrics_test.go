package issuer

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestMetricsCountWhatTheIssuerDid issues tokens and refuses requests of each
// kind, then reads the registry: every released token, every refusal by its
// OAuth code, every audit append and every group commit is counted.
func TestMetricsCountWhatTheIssuerDid(t *testing.T) {
	reg := prometheus.NewRegistry()
	d := startDeployment(t, nil, WithMetrics(reg))

	d.issue(DevStandardClientID, nil)
	d.issue(DevStandardClientID, nil)
	expectError(t, d.postType("text/plain", "grant_type=client_credentials"), http.StatusBadRequest, ErrorInvalidRequest)
	expectError(t, d.post("grant_type=password&client_assertion_type=x&client_assertion=y"), http.StatusBadRequest, ErrorUnsupportedGrantType)
	// A replayed assertion is refused as invalid_client.
	a := d.assertion(DevStandardClientID, d.keys[DevStandardClientID], nil)
	if r := d.post(formBody(a)); r.status != http.StatusOK {
		t.Fatalf("first use of an assertion: %d %s", r.status, r.body)
	}
	expectError(t, d.post(formBody(a)), http.StatusUnauthorized, ErrorInvalidClient)

	got := gather(t, reg)
	want := map[string]float64{
		"registrum_issuer_tokens_issued_total":                                          3,
		`registrum_issuer_token_requests_refused_total{error="invalid_request"}`:        1,
		`registrum_issuer_token_requests_refused_total{error="unsupported_grant_type"}`: 1,
		`registrum_issuer_token_requests_refused_total{error="invalid_client"}`:         1,
		`registrum_issuer_token_requests_refused_total{error="server_error"}`:           0,
		"registrum_issuer_audit_append_duration_seconds_count":                          6,
		"registrum_issuer_signer_ready":                                                 1,
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v", name, got[name], v)
		}
	}
	// Every decision is audited, so the group commits made all six records
	// durable between them, in at most six commits.
	if got["registrum_issuer_audit_commit_entries_sum"] != 6 {
		t.Errorf("audit commit entries sum = %v, want 6", got["registrum_issuer_audit_commit_entries_sum"])
	}
	if n := got["registrum_issuer_audit_commit_entries_count"]; n < 1 || n > 6 {
		t.Errorf("audit commits = %v, want 1 to 6", n)
	}
	if got["registrum_issuer_audit_commit_duration_seconds_count"] != got["registrum_issuer_audit_commit_entries_count"] {
		t.Errorf("commit duration count %v differs from commit count %v", got["registrum_issuer_audit_commit_duration_seconds_count"], got["registrum_issuer_audit_commit_entries_count"])
	}
}

// TestMetricsRegistrationClashRefusesStart: two issuers on one registry
// would silently share counters; the second is refused instead.
func TestMetricsRegistrationClashRefusesStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	startDeployment(t, nil, WithMetrics(reg))
	setup, _ := newSetup(t)
	cfg, err := LoadConfig(setup.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, nil, WithMetrics(reg))
	if err == nil {
		srv.Close()
		t.Fatal("a second issuer registered the same metrics on one registry")
	}
	if !strings.Contains(err.Error(), "register metrics") {
		t.Fatalf("error does not say what failed: %v", err)
	}
}

// gather flattens the registry into name{labels} → value; histograms give
// their _count and _sum.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName() + labels(m)
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[name] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[mf.GetName()+"_count"+labels(m)] = float64(m.GetHistogram().GetSampleCount())
				out[mf.GetName()+"_sum"+labels(m)] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

func labels(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return ""
	}
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+`="`+l.GetValue()+`"`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}
