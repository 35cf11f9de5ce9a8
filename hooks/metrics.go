package hooks

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Prometheus figures of event delivery.
type Metrics struct {
	captured, delivered, retried, deadLettered, failed, replayed prometheus.Counter
	latency                                                      prometheus.Histogram
}

// NewMetrics registers the delivery metrics in reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "registrum", Subsystem: "events", Name: name, Help: help})
	}
	m := &Metrics{
		captured:     counter("captured_total", "Events whose first attempt started (captured in a committed write)."),
		delivered:    counter("delivered_total", "Deliveries that ended delivered (a 2xx answer, or a local handler that ran)."),
		retried:      counter("retried_total", "Failed attempts followed by another attempt."),
		deadLettered: counter("dead_lettered_total", "Deliveries whose attempts were exhausted."),
		failed:       counter("failed_total", "Local handler deliveries that could never run."),
		replayed:     counter("replayed_total", "Replayed generations whose first attempt this host started."),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "registrum", Subsystem: "events", Name: "commit_to_delivery_seconds",
			Help:    "Time from the capturing commit to the end of the successful attempt.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}),
	}
	if reg != nil {
		reg.MustRegister(m.captured, m.delivered, m.retried, m.deadLettered, m.failed, m.replayed, m.latency)
	}
	return m
}
