package host_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/registrum/registrum/host/requests"
	"github.com/registrum/registrum/internal/telemetry/telemetrytest"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

// A request that creates a record, the job that delivers its event, and
// the webhook send are one trace: the inbound traceparent's, which is also
// the trace id of the audit and of problem documents.
func TestTracesFollowARequestIntoItsJobsAndDeliveries(t *testing.T) {
	// Export every 100 ms (the SDK's standard setting) rather than 5 s.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	otlp := telemetrytest.NewReceiver(t)
	rcv := newReceiver(t)
	dsn := storetest.NewDatabase(t)
	cfg := eventsDeployment(t, dsn, rcv.srv.URL+"/hooks/registry",
		"telemetry: {otlpEndpoint: \""+otlp.URL()+"\", serviceName: registrum-test}\n")
	h, srv := serve(t, cfg)
	runWorkers(t, h)
	c := caller{srv: srv}

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const parentID = "00f067aa0ba902b7"
	resp, b := c.do(t, "POST", "/v1/records/parcels", "application/json", `{"data":{"parcelCode":"P-1","area":10,"surveyed":true}}`,
		"traceparent", "00-"+traceID+"-"+parentID+"-01")
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}

	// The webhook receiver sees the same trace, under the delivery's
	// client span; the seed's headers are all there beside it.
	got := rcv.wait(t, 1, 10*time.Second)[0]
	tp := got.header.Get("traceparent")
	if len(tp) != 55 || tp[3:35] != traceID {
		t.Fatalf("delivery traceparent %q, want trace %s", tp, traceID)
	}
	for _, name := range signedHeaders {
		if len(got.header.Values(name)) != 1 {
			t.Fatalf("header %s: %q", name, got.header.Values(name))
		}
	}

	// The audit and a problem document carry the same trace id.
	if n := countRows(t, dsn, `SELECT count(*) FROM registrum.audit WHERE trace_id = '`+traceID+`'`); n < 1 {
		t.Fatalf("no audit row under trace %s", traceID)
	}
	const otherTrace = "0af7651916cd43dd8448eb211c80319c"
	resp, b = c.do(t, "POST", "/v1/records/parcels", "application/json", `{"data":{"parcelCode":"P-1","area":5}}`,
		"traceparent", "00-"+otherTrace+"-b7ad6b7169203331-01")
	var prob struct {
		TraceID string `json:"traceId"`
	}
	if resp.StatusCode < 400 || json.Unmarshal(b, &prob) != nil || prob.TraceID != otherTrace {
		t.Fatalf("duplicate create: %d %s, want a problem under trace %s", resp.StatusCode, b, otherTrace)
	}

	// The OTLP receiver gets the server span (the inbound parent's child),
	// the job's span and the send's client span, chained, in one trace.
	var server, write, job, send *tracepb.Span
	deadline := time.Now().Add(15 * time.Second)
	for {
		spans := otlp.Trace(traceID)
		server = telemetrytest.Find(spans, tracepb.Span_SPAN_KIND_SERVER, "POST /v1/records/")
		write = telemetrytest.Find(spans, tracepb.Span_SPAN_KIND_CLIENT, "store.write")
		job = telemetrytest.Find(spans, tracepb.Span_SPAN_KIND_CONSUMER, "river.work "+store.KindDeliverEvent)
		send = telemetrytest.Find(spans, tracepb.Span_SPAN_KIND_CLIENT, "POST")
		if server != nil && write != nil && job != nil && send != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans of trace %s: %q", traceID, telemetrytest.Names(spans))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if hex.EncodeToString(server.ParentSpanId) != parentID {
		t.Fatalf("server span's parent %x, want the inbound %s", server.ParentSpanId, parentID)
	}
	// The write transaction is the request's child, and the job it
	// enqueued is the transaction's.
	if !bytes.Equal(write.ParentSpanId, server.SpanId) {
		t.Fatalf("the write transaction is not the request's child: %x, request %x", write.ParentSpanId, server.SpanId)
	}
	if !bytes.Equal(job.ParentSpanId, write.SpanId) {
		t.Fatalf("the job is not the write transaction's child: %x, transaction %x", job.ParentSpanId, write.SpanId)
	}
	if !bytes.Equal(send.ParentSpanId, job.SpanId) {
		t.Fatalf("the send is not the job's child: %x, job %x", send.ParentSpanId, job.SpanId)
	}
	if tp[36:52] != hex.EncodeToString(send.SpanId) {
		t.Fatalf("delivery traceparent %q, want the send's span %x", tp, send.SpanId)
	}
	if len(otlp.Trace(otherTrace)) == 0 {
		// The refused request's span may still be buffered; it is exported
		// within the schedule delay.
		time.Sleep(300 * time.Millisecond)
		if len(otlp.Trace(otherTrace)) == 0 {
			t.Fatalf("no span of the refused request's trace %s", otherTrace)
		}
	}
}

// A submission's review job continues the trace of the request that
// submitted it, and its call to the review authority is a client span of
// that job, in the same trace.
func TestTracesFollowASubmissionToTheReviewAuthority(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	otlp := telemetrytest.NewReceiver(t)
	// The telemetry block comes from the environment, as any key can.
	t.Setenv("REGISTRUM_CONFIG_TELEMETRY_OTLP_ENDPOINT", otlp.URL())
	env := startApplication(t, applicationOptions{staticToken: "casework-issued-token-1"})
	env.submitted(t, "staged-changes", "777")

	deadline := time.Now().Add(15 * time.Second)
	for {
		spans := otlp.Spans()
		if job := telemetrytest.Find(spans, tracepb.Span_SPAN_KIND_CONSUMER, "river.work "+requests.KindReviewSubmit); job != nil {
			trace := otlp.Trace(hex.EncodeToString(job.TraceId))
			var parent, call *tracepb.Span
			for _, s := range trace {
				if s.Kind == tracepb.Span_SPAN_KIND_SERVER && bytes.Equal(s.SpanId, job.ParentSpanId) {
					parent = s
				}
				if s.Kind == tracepb.Span_SPAN_KIND_CLIENT && s.Name == "POST" && bytes.Equal(s.ParentSpanId, job.SpanId) {
					call = s
				}
			}
			if parent != nil && call != nil {
				if !strings.HasPrefix(parent.Name, "POST ") {
					t.Fatalf("the submission job's parent is %q", parent.Name)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no submission job under its request with a call to the authority: %q", telemetrytest.Names(spans))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
