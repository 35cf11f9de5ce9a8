package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/registrum/registrum/host/records"
)

type traceKey struct{}

// TraceID returns the request's trace id (32 lowercase hex).
func TraceID(ctx context.Context) string {
	id, _ := ctx.Value(traceKey{}).(string)
	return id
}

var traceparentRE = regexp.MustCompile(`^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$`)

// newTraceID adopts the trace id of a valid W3C traceparent header, or makes one.
func newTraceID(r *http.Request) string {
	if tp := r.Header.Get("traceparent"); tp != "" {
		if m := traceparentRE.FindStringSubmatch(tp); m != nil && m[1] != "00000000000000000000000000000000" {
			return m[1]
		}
	}
	return records.NewTraceID()
}

// statusRecorder remembers the status and size of a response.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

// Metrics are the HTTP metrics of the host.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the HTTP metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "registrum_http_requests_total",
			Help: "HTTP requests answered, by method, route pattern and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "registrum_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests, by method and route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// observe wraps the router: it assigns the trace id, recovers panics, and
// logs and counts every request by its route pattern (never its path, body
// or credentials).
func (a *API) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		trace := newTraceID(r)
		ctx := context.WithValue(r.Context(), traceKey{}, trace)
		rctx := chi.NewRouteContext()
		if r.Method == http.MethodHead {
			// HEAD is served wherever GET is, by the GET handler; the
			// server sends its headers and drops its body.
			rctx.RouteMethod = http.MethodGet
		}
		ctx = context.WithValue(ctx, chi.RouteCtxKey, rctx)
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				a.log.ErrorContext(ctx, "panic while serving a request", "trace_id", trace, "panic", p)
				if rec.status == 0 {
					a.fail(rec, r.WithContext(ctx), nil)
				}
			}
			pattern := rctx.RoutePattern()
			if pattern == "" {
				pattern = "unmatched"
			}
			elapsed := time.Since(start)
			if a.metrics != nil {
				a.metrics.requests.WithLabelValues(r.Method, pattern, strconv.Itoa(rec.status)).Inc()
				a.metrics.duration.WithLabelValues(r.Method, pattern).Observe(elapsed.Seconds())
			}
			a.log.LogAttrs(ctx, slog.LevelInfo, "request",
				slog.String("trace_id", trace),
				slog.String("method", r.Method),
				slog.String("route", pattern),
				slog.Int("status", rec.status),
				slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
				slog.Int("bytes", rec.bytes),
			)
		}()
		next.ServeHTTP(rec, r.WithContext(ctx))
	})
}
