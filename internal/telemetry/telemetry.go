// Package telemetry exports OpenTelemetry traces over OTLP/HTTP when a
// process is configured to, and is a no-op otherwise: no span is recorded,
// no traceparent is injected or continued (docs/operations.md, "Traces").
//
// The provider is installed as the process's global one (otel's
// TracerProvider and the W3C trace-context propagator), so that every
// component reaches it without plumbing; one process has one telemetry
// configuration.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of Registrum's spans.
const ScopeName = "github.com/registrum/registrum"

// DefaultServiceName is the service.name when none is configured.
const DefaultServiceName = "registrum"

// Options configure the export.
type Options struct {
	// Endpoint is the OTLP/HTTP URL; without a path, spans go to
	// /v1/traces. Empty: telemetry is off.
	Endpoint string
	// ServiceName is the resource's service.name (default "registrum").
	ServiceName string
	// SampleRatio is the share of new traces sampled (nil: all); an
	// inbound parent's sampled flag is followed.
	SampleRatio *float64
}

// Check returns the key of the first setting of o that is not acceptable
// ("otlpEndpoint" or "sampleRatio", as a configuration's telemetry block
// names them) and the rule it breaks; empty strings when o is acceptable.
// An empty Endpoint is refused: a configuration that has a telemetry block
// must say where spans go. It is the one rule both services' configurations
// apply.
func (o Options) Check() (key, rule string) {
	u, err := url.Parse(o.Endpoint)
	if o.Endpoint == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "otlpEndpoint", "must be an http or https URL without query or fragment"
	}
	if u.User != nil {
		return "otlpEndpoint", "must not hold credentials; give a collector's credentials in OTEL_EXPORTER_OTLP_HEADERS"
	}
	if r := o.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
		return "sampleRatio", "must be between 0 and 1"
	}
	return "", ""
}

// Provider is a running export; Shutdown flushes it.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// active is the installed provider, nil when telemetry is off.
var active atomic.Pointer[Provider]

var traceContext = propagation.TraceContext{}

// Start builds the exporter and installs the provider globally. With an
// empty endpoint it returns an off Provider (its TracerProvider is a
// no-op) and installs nothing.
func Start(ctx context.Context, o Options) (*Provider, error) {
	if o.Endpoint == "" {
		return &Provider{}, nil
	}
	u, err := url.Parse(o.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("telemetry: the OTLP endpoint must be an http or https URL")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()))
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	name := o.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	sampler := sdktrace.AlwaysSample()
	if o.SampleRatio != nil {
		sampler = sdktrace.TraceIDRatioBased(*o.SampleRatio)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sampler)),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name))),
	)
	p := &Provider{tp: tp}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(traceContext)
	active.Store(p)
	return p, nil
}

// TracerProvider returns the provider's TracerProvider (a no-op one when
// telemetry is off).
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil || p.tp == nil {
		return noop.NewTracerProvider()
	}
	return p.tp
}

// Shutdown exports the spans still buffered and stops the export; the
// global provider becomes a no-op again when it was this one.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.tp == nil {
		return nil
	}
	if active.CompareAndSwap(p, nil) {
		otel.SetTracerProvider(noop.NewTracerProvider())
	}
	return p.tp.Shutdown(ctx)
}

// Current returns the installed TracerProvider, nil when telemetry is off.
func Current() trace.TracerProvider {
	if p := active.Load(); p != nil {
		return p.tp
	}
	return nil
}

// Enabled reports whether a provider is installed.
func Enabled() bool { return active.Load() != nil }

// Tracer returns the tracer of Registrum's spans (a no-op one when off).
func Tracer() trace.Tracer {
	if p := active.Load(); p != nil {
		return p.tp.Tracer(ScopeName)
	}
	return noop.NewTracerProvider().Tracer(ScopeName)
}

// Start starts a span under ctx's (internal kind unless opts say otherwise).
func StartSpan(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return Tracer().Start(ctx, name, opts...)
}

// OtherMethod is what Method returns for a request method it does not
// know, as OpenTelemetry's HTTP conventions name it.
const OtherMethod = "_OTHER"

// Method returns the request method m when it is one of HTTP's standard
// methods (RFC 9110 and PATCH), OtherMethod otherwise: what a metric label
// or a span name may carry. A method is any token a client chooses, so a
// label of the method as sent would let a caller create a series per
// request.
func Method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return OtherMethod
}

// ServerSpan starts the server span of an inbound request, continuing its
// traceparent. Off, it starts nothing and returns ctx unchanged with a
// no-op span. A method that is not standard is named OtherMethod, the
// method as sent kept in http.request.method_original.
func ServerSpan(ctx context.Context, r *http.Request) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	ctx = traceContext.Extract(ctx, propagation.HeaderCarrier(r.Header))
	method := Method(r.Method)
	attrs := []attribute.KeyValue{attribute.String("http.request.method", method)}
	if method != r.Method {
		attrs = append(attrs, attribute.String("http.request.method_original", r.Method))
	}
	return Tracer().Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// EndServerSpan names the span by its method (Method) and route, and
// records the status.
func EndServerSpan(span trace.Span, method, route string, status int) {
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetName(Method(method) + " " + route)
	span.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", status))
	if status >= 500 {
		span.SetStatus(codes.Error, strconv.Itoa(status))
	}
	span.End()
}

// Traceparent returns the W3C traceparent of ctx's span, "" when ctx
// carries no valid span context: what a call that is not HTTP (a plugin's
// protocol) sends so that its peer can continue the trace.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}

// Transport wraps base (http.DefaultTransport when nil) so that each
// request, when telemetry is on, gets a client span and carries its
// traceparent. Off, it sends the request as it is.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

// CloseIdleConnections closes the idle connections of base, as
// http.Client.CloseIdleConnections does for its own transport.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip implements http.RoundTripper.
func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !Enabled() {
		return t.base.RoundTrip(r)
	}
	ctx, span := Tracer().Start(r.Context(), r.Method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("http.request.method", r.Method),
			attribute.String("server.address", r.URL.Hostname())))
	defer span.End()
	r = r.Clone(ctx)
	traceContext.Inject(ctx, propagation.HeaderCarrier(r.Header))
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		span.SetStatus(codes.Error, "transport")
		return nil, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetStatus(codes.Error, strconv.Itoa(resp.StatusCode))
	}
	return resp, nil
}

// Fail marks span failed when err is set (nothing when err is nil or a
// cancellation). The error's text stays out of the span: like the logs,
// traces carry no values, and an error may quote one.
func Fail(span trace.Span, err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		span.SetStatus(codes.Error, "failed")
	}
}
