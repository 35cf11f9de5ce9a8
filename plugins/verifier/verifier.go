package verifier

import (
	"context"
	"errors"
	"io"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/registrum/registrum/internal/telemetry"
	"github.com/registrum/registrum/plugins/verifier/proto"
)

// MaxContentBytes is the largest attachment any verifier accepts: the record
// service's largest slot size (16 MiB).
const MaxContentBytes = proto.MaxContentBytes

// Outcome is a verifier's answer (approved, rejected or retry).
type Outcome = proto.Outcome

// The three outcomes. The zero Outcome is not valid.
const (
	// Approved means the bytes may be used.
	Approved = proto.Approved
	// Rejected means the bytes must not be used; Verdict.Reason says why.
	Rejected = proto.Rejected
	// Retry means no decision was reached; the attachment stays pending and
	// is verified again later.
	Retry = proto.Retry
)

// Reason is the value-free category of a rejection.
type Reason = proto.Reason

// The reason categories a verifier may give with a rejection.
const (
	// ReasonMalware: the content carries a malware or test-malware signature.
	ReasonMalware = proto.ReasonMalware
	// ReasonPolicy: the content breaks a local content policy.
	ReasonPolicy = proto.ReasonPolicy
	// ReasonMalformed: the content is not a well-formed file of its media type.
	ReasonMalformed = proto.ReasonMalformed
	// ReasonUnspecified: the verifier gave no category (the http kind).
	ReasonUnspecified = proto.ReasonUnspecified
)

// Verdict is the result of one verification.
type Verdict = proto.Verdict

// Attachment is the metadata of the bytes to verify, as the record service
// computed it when they were uploaded.
type Attachment = proto.Attachment

// Verifier decides whether attachment bytes may be used.
//
// Verify reads the attachment's bytes from content; content must yield
// exactly att.DeclaredSize bytes hashing to att.SHA256. Implementations return
// by ctx's deadline. The host side's implementations ([Process], [HTTP])
// return a nil error exactly when the verdict is Approved or Rejected, and a
// [*Failure] with a Retry verdict otherwise. A verifier written with the
// sdk/verifier package implements this same interface; there, returning an
// error is the same as returning a Retry verdict.
type Verifier = proto.Verifier

// VerifyCloser is a verifier that holds resources (a process, idle
// connections) until it is closed.
type VerifyCloser interface {
	Verifier
	io.Closer
}

// Cause is the value-free reason a verification ended in Retry. It is safe to
// log: it is always one of the constants below, never text from a plugin,
// a scanner or the content.
type Cause = proto.Cause

// The causes a plugin may send (see package proto).
const (
	// CauseDeadline: the context ended before the verifier answered.
	CauseDeadline = proto.CauseDeadline
	// CausePluginContentMismatch: the plugin side found the bytes it received
	// did not match the declared size or digest.
	CausePluginContentMismatch = proto.CausePluginContentMismatch
	// CauseVerifierError: the verifier's own code failed (an error or a panic).
	CauseVerifierError = proto.CauseVerifierError
	// CauseVerifierRetry: the verifier's own code asked for a retry.
	CauseVerifierRetry = proto.CauseVerifierRetry
	// CauseInvalidVerdict: the verifier's own code returned a malformed verdict.
	CauseInvalidVerdict = proto.CauseInvalidVerdict
)

// The causes only the host gives.
const (
	// CauseInvalidAttachment: the metadata passed to Verify is malformed or over the size limit.
	CauseInvalidAttachment Cause = "invalid-attachment"
	// CauseLongerThanDeclared: the content has more bytes than declared.
	CauseLongerThanDeclared Cause = "longer-than-declared"
	// CauseShorterThanDeclared: the content ended before the declared size.
	CauseShorterThanDeclared Cause = "shorter-than-declared"
	// CauseDigestMismatch: the content does not hash to the declared sha256.
	CauseDigestMismatch Cause = "digest-mismatch"
	// CauseReadError: reading the content failed.
	CauseReadError Cause = "read-error"
	// CauseStartFailed: the verifier process did not start or failed the
	// handshake (wrong magic cookie or protocol, garbage on stdout, exit).
	CauseStartFailed Cause = "start-failed"
	// CauseBinaryChanged: the verifier binary no longer hashes to its pinned digest.
	CauseBinaryChanged Cause = "binary-changed"
	// CauseCrashed: the verifier process died or dropped the connection mid-call.
	CauseCrashed Cause = "crashed"
	// CauseProtocol: the verifier answered something that is not a valid reply.
	CauseProtocol Cause = "protocol"
	// CauseCredential: the http verifier's secret could not be read.
	CauseCredential Cause = "credential"
	// CauseTransport: the http request failed (connection, TLS, redirect, timeout).
	CauseTransport Cause = "transport"
	// CauseStatus: the http scanner answered a status other than 200.
	CauseStatus Cause = "status"
	// CauseAnswer: the http scanner's 200 answer was not exactly a verdict document.
	CauseAnswer Cause = "answer"
	// CauseClosed: the verifier was closed.
	CauseClosed Cause = "closed"
)

// Failure is the error that accompanies every Retry verdict of the host-side
// verifiers. Its text names the verifier and the cause only.
type Failure struct {
	// Verifier is the configured id of the verifier.
	Verifier string
	// Cause is the value-free cause.
	Cause Cause
	// err is a host-side error kept for errors.Is (a context error); it is
	// never plugin-controlled text and is not part of Error.
	err error
}

// Error returns "verifier <id>: retry: <cause>".
func (f *Failure) Error() string {
	return "verifier " + strconv.Quote(f.Verifier) + ": retry: " + string(f.Cause)
}

// Unwrap returns the host-side error behind the failure, if any (for
// example context.DeadlineExceeded).
func (f *Failure) Unwrap() error { return f.err }

// retry builds the Retry verdict and its failure.
func retry(id string, cause Cause, err error) (Verdict, error) {
	return Verdict{Outcome: Retry}, &Failure{Verifier: id, Cause: cause, err: err}
}

// CauseOf returns the cause of a verification error, or "" when err is not
// (and does not wrap) a [*Failure].
func CauseOf(err error) Cause {
	var f *Failure
	if errors.As(err, &f) {
		return f.Cause
	}
	return ""
}

// startVerifySpan starts the span of one verification by verifier id of
// kind ("process" or "http"), "verifier <id>", under the caller's span.
// When the caller's span is not recorded (telemetry off, or not sampled) it
// starts nothing and returns ctx unchanged.
func startVerifySpan(ctx context.Context, id, kind string) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return telemetry.StartSpan(ctx, "verifier "+id, trace.WithAttributes(
		attribute.String("registrum.verifier", id), attribute.String("registrum.verifier.kind", kind)))
}

// endVerifySpan records the verdict's outcome (or the Retry's value-free
// cause, and a failed status without the error's text) and ends span.
func endVerifySpan(span trace.Span, v Verdict, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("registrum.verifier.outcome", string(v.Outcome)))
		if c := CauseOf(err); c != "" {
			span.SetAttributes(attribute.String("registrum.verifier.cause", string(c)))
		}
		if err != nil {
			span.SetStatus(codes.Error, "no verdict")
		}
	}
	span.End()
}
