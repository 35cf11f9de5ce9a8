package issuer

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// latencyBuckets span a fast local fsync (0.5 ms) to a stalled disk (1 s).
var latencyBuckets = []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1}

// metrics are the issuer's Prometheus instruments. The zero value (nil
// pointer) records nothing, so a server built without WithMetrics pays
// nothing for them.
type metrics struct {
	issued      prometheus.Counter
	refused     *prometheus.CounterVec
	appendTime  prometheus.Histogram
	commitSize  prometheus.Histogram
	commitTime  prometheus.Histogram
	signerReady prometheus.GaugeFunc
}

// WithMetrics registers the issuer's metrics on reg (see docs/issuer.md,
// "Metrics"): tokens issued, token requests refused by OAuth error code,
// audit append latency, audit group-commit size and duration, and signer
// readiness. Registration fails New when a name is already taken on reg.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(o *options) { o.metrics = reg }
}

// newMetrics builds the instruments and registers them on reg; ready reports
// the signer's readiness for the gauge.
func newMetrics(reg prometheus.Registerer, ready func() bool) (*metrics, error) {
	m := &metrics{
		issued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "registrum_issuer_tokens_issued_total",
			Help: "Access tokens released, each after its audit record was durable.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "registrum_issuer_token_requests_refused_total",
			Help: "Token requests answered with an OAuth error, by error code (invalid_request, invalid_client, unsupported_grant_type, server_error; slow_down when the rate limit refused the request before reading it).",
		}, []string{"error"}),
		appendTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "registrum_issuer_audit_append_duration_seconds",
			Help:    "Time a token request waited for its audit record to be durable (group commit included).",
			Buckets: latencyBuckets,
		}),
		commitSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "registrum_issuer_audit_commit_entries",
			Help:    "Audit records made durable by one group commit (one fsync of the active segment).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		commitTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "registrum_issuer_audit_commit_duration_seconds",
			Help:    "Time one audit group commit took: write, fsyncs and any segment rotation.",
			Buckets: latencyBuckets,
		}),
		signerReady: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "registrum_issuer_signer_ready",
			Help: "1 while the signer's last self-test or signature succeeded, else 0.",
		}, func() float64 {
			if ready() {
				return 1
			}
			return 0
		}),
	}
	for _, c := range []prometheus.Collector{m.issued, m.refused, m.appendTime, m.commitSize, m.commitTime, m.signerReady} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every error code is exported from the start, at zero, so a rate over
	// a refusal that has not happened yet is 0 rather than absent.
	for _, code := range []string{ErrorInvalidRequest, ErrorInvalidClient, ErrorUnsupportedGrantType, ErrorServerError, ErrorSlowDown} {
		m.refused.WithLabelValues(code)
	}
	return m, nil
}

// tokenRequest records one answered token request: code is empty when a
// token was released; took is the audit append's wait (zero when the append
// was not reached).
func (m *metrics) tokenRequest(code string, appendTook time.Duration) {
	if m == nil {
		return
	}
	if appendTook > 0 {
		m.appendTime.Observe(appendTook.Seconds())
	}
	if code == "" {
		m.issued.Inc()
		return
	}
	m.refused.WithLabelValues(code).Inc()
}

// auditCommit records one group commit of the audit writer.
func (m *metrics) auditCommit(entries int, took time.Duration) {
	if m == nil || entries == 0 {
		return // a commit that made nothing durable poisoned the writer
	}
	m.commitSize.Observe(float64(entries))
	m.commitTime.Observe(took.Seconds())
}
