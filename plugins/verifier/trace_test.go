package verifier_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/registrum/registrum/internal/telemetry"
	"github.com/registrum/registrum/internal/telemetry/telemetrytest"
	"github.com/registrum/registrum/plugins/verifier"
)

// With telemetry on, a verification is a span "verifier <id>" of the
// caller's span, and each call of the go-plugin protocol a client span of
// it named by its method; a call that failed is marked failed with its
// value-free cause and no error text.
func TestProcessCallsAreClientSpans(t *testing.T) {
	otlp := telemetrytest.NewReceiver(t)
	tp, err := telemetry.Start(context.Background(), telemetry.Options{Endpoint: otlp.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	clean := verifyUnder(ctx, t, newProcess(t, "eicar-verifier"), "clean", filler(300<<10))
	if clean.err != nil {
		t.Fatal(clean.err)
	}
	crashed := verifyUnder(ctx, t, newProcess(t, "hostile"), "crashMidStream", filler(300<<10))
	if verifier.CauseOf(crashed.err) != verifier.CauseCrashed {
		t.Fatalf("crash: %v", crashed.err)
	}
	if err := tp.Shutdown(context.Background()); err != nil { // exports what is buffered
		t.Fatal(err)
	}

	for _, c := range []struct {
		run     verified
		methods []string
		cause   string
	}{
		{clean, []string{"Plugin.Begin", "Plugin.Write", "Plugin.Write", "Plugin.Write", "Plugin.Finish"}, ""},
		{crashed, []string{"Plugin.Begin", "Plugin.Write", "Plugin.Write"}, "crashed"},
	} {
		spans := otlp.Trace(c.run.trace)
		parent := telemetrytest.Find(spans, tracepb.Span_SPAN_KIND_INTERNAL, "job")
		verify := telemetrytest.Find(spans, tracepb.Span_SPAN_KIND_INTERNAL, "verifier ")
		if !telemetrytest.ChildOf(verify, parent) {
			t.Fatalf("no verification span under the caller's: %q", telemetrytest.Names(spans))
		}
		var calls []string
		var last *tracepb.Span
		for _, s := range spans {
			if s.Kind == tracepb.Span_SPAN_KIND_CLIENT {
				if !telemetrytest.ChildOf(s, verify) {
					t.Fatalf("call %q is not the verification's child", s.Name)
				}
				calls = append(calls, s.Name)
				last = s
			}
		}
		if len(calls) != len(c.methods) {
			t.Fatalf("calls %q, want %q", calls, c.methods)
		}
		for i := range calls {
			if calls[i] != c.methods[i] {
				t.Fatalf("calls %q, want %q", calls, c.methods)
			}
		}
		failed := tracepb.Status_STATUS_CODE_ERROR
		if cause, _ := telemetrytest.Attribute(last, "registrum.verifier.cause"); cause != c.cause || (last.Status.GetCode() == failed) != (c.cause != "") {
			t.Fatalf("last call %q: cause %q, status %v; want cause %q", last.Name, cause, last.Status, c.cause)
		}
		if cause, _ := telemetrytest.Attribute(verify, "registrum.verifier.cause"); cause != c.cause || (verify.Status.GetCode() == failed) != (c.cause != "") {
			t.Fatalf("verification: cause %q, status %v; want cause %q", cause, verify.Status, c.cause)
		}
		for _, s := range spans {
			if d := s.Status.GetMessage(); d != "" && bytes.Contains([]byte(d), []byte(c.run.errText)) {
				t.Fatalf("span %q status carries the error's text %q", s.Name, d)
			}
		}
	}
}

// verified is one verification run under a span of its own trace.
type verified struct {
	trace   string
	err     error
	errText string
}

// verifyUnder runs one verification of content under a span "job".
func verifyUnder(ctx context.Context, t *testing.T, p *verifier.Process, slot string, content []byte) verified {
	t.Helper()
	ctx, span := telemetry.StartSpan(ctx, "job")
	defer span.End()
	_, err := p.Verify(ctx, attachment(slot, content), bytes.NewReader(content))
	v := verified{trace: span.SpanContext().TraceID().String(), err: err}
	if err != nil {
		v.errText = err.Error()
	}
	return v
}

// A go-plugin verifier receives the traceparent of the host's verification
// span (verifier.Traceparent in the SDK), so that its own spans join the
// trace; untraced, it receives none.
func TestProcessVerifierReceivesTheTraceparent(t *testing.T) {
	told := filepath.Join(bins, "hostile.traceparent")
	read := func() string {
		b, err := os.ReadFile(told)
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(told)
		return string(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := newProcess(t, "hostile")

	// Untraced: nothing is sent.
	if _, err := p.Verify(ctx, attachment("tellsTraceparent", filler(100)), bytes.NewReader(filler(100))); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "" {
		t.Fatalf("untraced, the plugin received traceparent %q", got)
	}

	otlp := telemetrytest.NewReceiver(t)
	tp, err := telemetry.Start(context.Background(), telemetry.Options{Endpoint: otlp.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown(context.Background())
	for _, size := range []int{100, 300 << 10} { // one Verify call; Begin, Writes and Finish
		run := verifyUnder(ctx, t, p, "tellsTraceparent", filler(size))
		if run.err != nil {
			t.Fatal(run.err)
		}
		got := read()
		if err := tp.Shutdown(context.Background()); err != nil && size == 100 {
			t.Fatal(err)
		}
		spans := otlp.Trace(run.trace)
		verify := telemetrytest.Find(spans, tracepb.Span_SPAN_KIND_INTERNAL, "verifier ")
		if verify == nil {
			t.Fatalf("no verification span: %q", telemetrytest.Names(spans))
		}
		want := "00-" + run.trace + "-" + hex.EncodeToString(verify.SpanId) + "-01"
		if got != want {
			t.Fatalf("content of %d bytes: the plugin received traceparent %q, want the verification span's %q", size, got, want)
		}
		if tp, err = telemetry.Start(context.Background(), telemetry.Options{Endpoint: otlp.URL()}); err != nil {
			t.Fatal(err)
		}
	}
}
