package store

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the store's spans.
const tracerName = "github.com/registrum/registrum/store"

// The store's spans (docs/operations.md, "Traces"): one client span per
// database operation a caller asks for, named by its kind and, for all but
// the write transaction, by the store method:
//
//   - "store.write": a write transaction (Store.Write);
//   - "store.read <Method>": a read (Get, Page, Count, Revisions, …);
//   - "store.tx <Method>": a transaction of its own that is not a record
//     write (the bookkeeping of verifications, for example).
//
// Each carries db.system=postgresql and db.operation.name, the method;
// never a value, a statement or its parameters.
const (
	spanWrite = "store.write"
	spanRead  = "store.read "
	spanTx    = "store.tx "
)

// noSpan is the span of work that is not traced: a no-op.
var noSpan = trace.SpanFromContext(context.Background())

// startSpan starts a client span of the database work name under the span
// of ctx, from that span's own provider. Without tracing (no span, a no-op
// one, or one not sampled) it starts nothing and returns ctx unchanged: it
// costs nothing. The store never builds a provider itself.
func startSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, noSpan
	}
	return parent.TracerProvider().Tracer(tracerName).Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attribute.String("db.system", "postgresql")))
}

// startOp starts the span of one store method that is not a write
// transaction: kind is spanRead or spanTx, method the method's name. End it
// with endOp.
func startOp(ctx context.Context, kind, method string) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, noSpan
	}
	ctx, span := startSpan(ctx, kind+method)
	span.SetAttributes(attribute.String("db.operation.name", method))
	return ctx, span
}

// endSpan ends span, marking it failed when err is set. The error's text
// stays out of the span: like the logs, traces carry no values.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "the database work failed")
	}
	span.End()
}

// endOp ends the span of a read or bookkeeping transaction as endSpan does,
// except that an error that answers the caller (nothing found, a snapshot
// not available here, another worker's lease) is not a failure.
func endOp(span trace.Span, err error) {
	if err == nil {
		span.End()
		return
	}
	var held *ErrLeaseHeld
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrRunNotFound) || errors.Is(err, ErrContentMissing) || errors.Is(err, ErrNoSnapshot) ||
		errors.Is(err, ErrOtherHistory) || errors.As(err, &held) {
		err = nil
	}
	endSpan(span, err)
}
