package records

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"go.opentelemetry.io/otel/trace"
)

// NewTraceID returns a fresh trace id (32 lowercase hex, the W3C trace-id
// form) for work that does not arrive with one: an HTTP request without a
// traceparent, a job, an operator command. It is what the audit trail
// records and what a refusal names.
func NewTraceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// TraceIDOf returns the trace id of ctx's span when it has one (with
// telemetry on, a job continues the trace of the request that enqueued it),
// else a fresh one.
func TraceIDOf(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return NewTraceID()
}
