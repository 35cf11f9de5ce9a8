package store_test

import (
	"context"
	"crypto/rand"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// recorder is a TracerProvider that keeps the spans ended under it, built
// on the trace API alone: the OpenTelemetry SDK builds on net/http, which
// the store's tests must not (layering_test.go). sampled=false makes its
// spans unsampled, as a sampler that drops a trace would.
type recorder struct {
	embedded.TracerProvider
	sampled bool
	mu      sync.Mutex
	ended   []*span
}

func (r *recorder) Tracer(string, ...trace.TracerOption) trace.Tracer { return tracer{r: r} }

// tracer is recorder's tracer.
type tracer struct {
	embedded.Tracer
	r *recorder
}

func (t tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	parent := trace.SpanContextFromContext(ctx)
	sc := trace.SpanContextConfig{TraceID: parent.TraceID()}
	if !parent.IsValid() {
		rand.Read(sc.TraceID[:])
	}
	rand.Read(sc.SpanID[:])
	if t.r.sampled {
		sc.TraceFlags = trace.FlagsSampled
	}
	r := t.r
	s := &span{r: r, name: name, kind: cfg.SpanKind(), parent: parent.SpanID(), sc: trace.NewSpanContext(sc), attrs: cfg.Attributes()}
	return trace.ContextWithSpan(ctx, s), s
}

// span is a span of recorder.
type span struct {
	embedded.Span
	r      *recorder
	name   string
	kind   trace.SpanKind
	parent trace.SpanID
	sc     trace.SpanContext
	attrs  []attribute.KeyValue
	status codes.Code
	desc   string
	ended  bool
}

func (s *span) End(...trace.SpanEndOption) {
	if !s.IsRecording() {
		return
	}
	s.ended = true
	s.r.mu.Lock()
	s.r.ended = append(s.r.ended, s)
	s.r.mu.Unlock()
}
func (s *span) AddEvent(string, ...trace.EventOption)   {}
func (s *span) AddLink(trace.Link)                      {}
func (s *span) IsRecording() bool                       { return s.r.sampled && !s.ended }
func (s *span) RecordError(error, ...trace.EventOption) {}
func (s *span) SpanContext() trace.SpanContext          { return s.sc }
func (s *span) SetName(name string)                     { s.name = name }
func (s *span) SetAttributes(kv ...attribute.KeyValue)  { s.attrs = append(s.attrs, kv...) }
func (s *span) TracerProvider() trace.TracerProvider    { return s.r }
func (s *span) SetStatus(code codes.Code, desc string)  { s.status, s.desc = code, desc }

// The store's reads and its transactions of their own are client spans of
// the caller's span, taken from that span's provider: named by method,
// db.system=postgresql, no values; failed without the error's text; an
// answer such as "not found" is not a failure; a caller without a sampled
// span gets none.
func TestReadsAreClientSpansOfTheCallersSpan(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	hh := s.Package().EntityByID("household")
	id := uuid.NewString()
	const value = "Jane V"
	if _, err := s.Create(ctx, hh, id, map[string]any{"name": value}, journal()); err != nil {
		t.Fatal(err)
	}
	tp := &recorder{sampled: true}

	// No span, or one not sampled: nothing is recorded.
	if _, err := s.Get(ctx, hh, id); err != nil {
		t.Fatal(err)
	}
	unsampled := &recorder{}
	uctx, uspan := unsampled.Tracer("test").Start(ctx, "request")
	if _, err := s.Get(uctx, hh, id); err != nil {
		t.Fatal(err)
	}
	uspan.End()
	if n := len(tp.ended) + len(unsampled.ended); n != 0 {
		t.Fatalf("%d spans recorded without a sampled caller span", n)
	}

	pctx, parent := tp.Tracer("test").Start(ctx, "request")
	if _, err := s.Get(pctx, hh, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(pctx, hh, uuid.NewString()); err == nil {
		t.Fatal("a missing record was found")
	}
	if _, err := s.Revisions(pctx, hh, id, 0, 10); err != nil {
		t.Fatal(err)
	}
	snap, err := s.CurrentSnapshot(pctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckSnapshot(pctx, snap); err != nil {
		t.Fatal(err)
	}
	c, err := s.Content().Put(pctx, strings.NewReader(value), 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Content().Open(pctx, c.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(r); err != nil || string(b) != value {
		t.Fatalf("content %q: %v", b, err)
	}
	r.Close()
	cancelled, cancel := context.WithCancel(pctx)
	cancel()
	if _, err := s.Get(cancelled, hh, id); err == nil {
		t.Fatal("a read under a cancelled context succeeded")
	}
	parent.End()

	want := []struct {
		name   string
		failed bool
	}{
		{"store.read Get", false}, {"store.read Get", false}, {"store.read Revisions", false},
		{"store.read CurrentSnapshot", false}, {"store.read CheckSnapshot", false},
		{"store.tx Content.Put", false}, {"store.read Content.Open", false}, {"store.read Get", true},
	}
	var got []*span
	for _, sp := range tp.ended {
		if sp.name != "request" {
			got = append(got, sp)
		}
	}
	if len(got) != len(want) {
		names := []string{}
		for _, sp := range got {
			names = append(names, sp.name)
		}
		t.Fatalf("spans %q, want %d", names, len(want))
	}
	for i, sp := range got {
		w := want[i]
		if sp.name != w.name || sp.kind != trace.SpanKindClient || sp.parent != parent.SpanContext().SpanID() || sp.sc.TraceID() != parent.SpanContext().TraceID() {
			t.Fatalf("span %d: %q kind %v parent %v, want %q, a client span of the caller's", i, sp.name, sp.kind, sp.parent, w.name)
		}
		attrs := map[string]string{}
		for _, kv := range sp.attrs {
			v := kv.Value.Emit()
			attrs[string(kv.Key)] = v
			if strings.Contains(v, value) || strings.Contains(v, id) || strings.Contains(v, c.SHA256) {
				t.Fatalf("span %q attribute %s carries a value: %q", sp.name, kv.Key, v)
			}
		}
		if attrs["db.system"] != "postgresql" || "store.read "+attrs["db.operation.name"] != w.name && "store.tx "+attrs["db.operation.name"] != w.name {
			t.Fatalf("span %q attributes %v", sp.name, attrs)
		}
		if failed := sp.status == codes.Error; failed != w.failed {
			t.Fatalf("span %q failed = %v, want %v", sp.name, failed, w.failed)
		}
		if strings.Contains(sp.desc, "cancel") {
			t.Fatalf("span %q status carries the error's text: %q", sp.name, sp.desc)
		}
	}
}
