package store

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the store's spans.
const tracerName = "github.com/registrum/registrum/store"

// startSpan starts a client span of the database work name under the span
// of ctx, from that span's own provider: without tracing (no span, or a
// no-op one) it costs nothing. The store never builds a provider itself.
func startSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(tracerName).Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attribute.String("db.system", "postgresql")))
}

// endSpan ends span, marking it failed when err is set. The error's text
// stays out of the span: like the logs, traces carry no values.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "the transaction did not commit")
	}
	span.End()
}
