// Package telemetrytest is an in-test OTLP/HTTP trace receiver, shipped for
// the tests of every service that exports traces (as River ships rivertest):
// it decodes the protobuf export requests a real exporter posts to
// /v1/traces and keeps their spans for the test to read.
package telemetrytest

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver is a running OTLP/HTTP trace receiver.
type Receiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

// NewReceiver starts a receiver, closed when the test ends. A request that
// is not an OTLP/HTTP protobuf export of traces fails the test.
func NewReceiver(t testing.TB) *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP receiver: %s %s (%s)", req.Method, req.URL.Path, req.Header.Get("Content-Type"))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		var ex coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &ex); err != nil {
			t.Errorf("OTLP receiver: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range ex.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the receiver's endpoint, without a path (spans go to /v1/traces),
// as a telemetry configuration's otlpEndpoint takes it.
func (r *Receiver) URL() string { return r.srv.URL }

// Spans returns every span received so far.
func (r *Receiver) Spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// Trace returns the spans received of trace id (hex).
func (r *Receiver) Trace(id string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range r.Spans() {
		if hex.EncodeToString(s.TraceId) == id {
			out = append(out, s)
		}
	}
	return out
}

// Wait polls until ok holds for the spans received, failing the test after
// timeout with the names of the spans received.
func (r *Receiver) Wait(t testing.TB, timeout time.Duration, ok func([]*tracepb.Span) bool) []*tracepb.Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		spans := r.Spans()
		if ok(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("OTLP receiver: the spans wanted did not arrive within %s; received %q", timeout, Names(spans))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Names lists the spans as "KIND name", for failure messages.
func Names(spans []*tracepb.Span) []string {
	names := make([]string, 0, len(spans))
	for _, s := range spans {
		names = append(names, s.Kind.String()+" "+s.Name)
	}
	return names
}

// Find returns the first span of kind whose name starts with prefix, nil
// when there is none.
func Find(spans []*tracepb.Span, kind tracepb.Span_SpanKind, prefix string) *tracepb.Span {
	for _, s := range spans {
		if s.Kind == kind && strings.HasPrefix(s.Name, prefix) {
			return s
		}
	}
	return nil
}

// ChildOf reports whether child's parent is parent.
func ChildOf(child, parent *tracepb.Span) bool {
	return child != nil && parent != nil && bytes.Equal(child.ParentSpanId, parent.SpanId)
}

// Attribute returns the string value of span's attribute key, and whether
// the span has it.
func Attribute(s *tracepb.Span, key string) (string, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.GetStringValue(), true
		}
	}
	return "", false
}
