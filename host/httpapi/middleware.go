package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/internal/telemetry"
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
	refusals *prometheus.CounterVec
}

// The categories of registrum_host_auth_refusals_total: why a request was
// refused for its credential or its profile. A category never carries the
// token or a claim.
const (
	// RefusalMissingToken: no token was presented and the access decision
	// refused (a concealed 404: the profile needs a token, or no profile
	// grants the operation anonymously).
	RefusalMissingToken = "missing_token"
	// RefusalUnusableCredential: an Authorization header that carries no
	// bearer token (another scheme, or an empty token): 401.
	RefusalUnusableCredential = "unusable_credential"
	// RefusalInvalidToken: a presented bearer token failed verification
	// (signature, issuer, audience, lifetime, or no issuer configured): 401.
	RefusalInvalidToken = "invalid_token"
	// RefusalProfileNotSatisfied: a verified token that the access profile
	// refused (principal claim, scope, purpose, operation, row-boundary
	// claims, or no profile selectable): a concealed 404.
	RefusalProfileNotSatisfied = "profile_not_satisfied"
)

// RefusalCategories are the categories of auth refusals, each exported
// from the start at 0.
var RefusalCategories = []string{RefusalMissingToken, RefusalUnusableCredential, RefusalInvalidToken, RefusalProfileNotSatisfied}

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
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "registrum_host_auth_refusals_total",
			Help: "Requests refused for their credential or access profile (401, or the concealed 404 of a refused access decision), by category.",
		}, []string{"category"}),
	}
	for _, c := range RefusalCategories {
		m.refusals.WithLabelValues(c)
	}
	reg.MustRegister(m.requests, m.duration, m.refusals)
	return m
}

// refusalNote holds, for one request, the category of its latest refused
// access decision ("" when its latest decision granted). The request is
// counted under it when it is answered 401 or 404: a request decides
// several times (the registry document probes every operation, a batch
// every item) and only the refusal that ended it counts.
type refusalNote struct{ category string }

type refusalKey struct{}

// Decider wraps d so that its refusals are counted by category in
// registrum_host_auth_refusals_total, once per request answered 401 or 404.
// The wrapper decides exactly as d does; it is an access.ActionDecider when
// d is one.
func (m *Metrics) Decider(d access.Decider) access.Decider {
	if m == nil {
		return d
	}
	if ad, ok := d.(access.ActionDecider); ok {
		return countingActionDecider{countingDecider{d}, ad}
	}
	return countingDecider{d}
}

type countingDecider struct{ inner access.Decider }

// Decide implements access.Decider.
func (c countingDecider) Decide(ctx context.Context, r access.Request) (*access.Grant, error) {
	g, err := c.inner.Decide(ctx, r)
	note(ctx, r.Bearer, err)
	return g, err
}

type countingActionDecider struct {
	countingDecider
	actions access.ActionDecider
}

// DecideAction implements access.ActionDecider.
func (c countingActionDecider) DecideAction(ctx context.Context, r access.ActionRequest) (*access.ActionGrant, error) {
	g, err := c.actions.DecideAction(ctx, r)
	note(ctx, r.Bearer, err)
	return g, err
}

// note records the category of a decision's outcome in the request's note.
func note(ctx context.Context, bearer string, err error) {
	n, _ := ctx.Value(refusalKey{}).(*refusalNote)
	if n == nil {
		return
	}
	n.category = refusalCategory(bearer, err)
}

// refusalCategory classifies a refused decision ("" for a grant or an
// error that is not a refusal, such as an unavailable database).
func refusalCategory(bearer string, err error) string {
	if err == nil {
		return "" // before pe, which errors.As makes the heap's
	}
	var pe *problem.Error
	if !errors.As(err, &pe) {
		return ""
	}
	switch pe.Code {
	case problem.AuthenticationRefused:
		if bearer == "" {
			return RefusalUnusableCredential
		}
		return RefusalInvalidToken
	case problem.ResourceNotFound:
		if bearer == "" {
			return RefusalMissingToken
		}
		return RefusalProfileNotSatisfied
	}
	return ""
}

// observe wraps the router: it assigns the trace id, recovers panics, and
// logs and counts every request by its route pattern (never its path, body
// or credentials).
func (a *API) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// With telemetry on, the request's server span continues an inbound
		// traceparent and its trace id is the request's; off, the trace id
		// is adopted from the traceparent or made.
		ctx, span := telemetry.ServerSpan(r.Context(), r)
		trace := newTraceID(r)
		if sc := span.SpanContext(); sc.IsValid() {
			trace = sc.TraceID().String()
		}
		ctx = context.WithValue(ctx, traceKey{}, trace)
		refusal := &refusalNote{}
		ctx = context.WithValue(ctx, refusalKey{}, refusal)
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
			telemetry.EndServerSpan(span, r.Method, pattern, rec.status)
			if a.metrics != nil {
				method := telemetry.Method(r.Method)
				a.metrics.requests.WithLabelValues(method, pattern, strconv.Itoa(rec.status)).Inc()
				a.metrics.duration.WithLabelValues(method, pattern).Observe(elapsed.Seconds())
				if refusal.category != "" && (rec.status == http.StatusUnauthorized || rec.status == http.StatusNotFound) {
					a.metrics.refusals.WithLabelValues(refusal.category).Inc()
				}
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
