package issuer

import (
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/registrum/registrum/internal/telemetry"
	"github.com/registrum/registrum/internal/telemetry/telemetrytest"
)

// tokenRequest posts a token request of the deployment's first client with
// the given traceparent.
func (d *deployment) tokenRequest(traceparent string) response {
	d.t.Helper()
	c := d.setup.Clients[0]
	req, _ := http.NewRequest(http.MethodPost, d.baseURL+"/token", strings.NewReader(formBody(d.assertion(c.ID, d.keys[c.ID], nil))))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("traceparent", traceparent)
	return d.do(req)
}

// A token request that carries a traceparent is a server span of that
// trace, the inbound parent's child, and its audit append is a span under
// it. The telemetry block comes from the environment, as any key can.
func TestTracesOfATokenRequest(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	otlp := telemetrytest.NewReceiver(t)
	t.Setenv(EnvPrefix+"TELEMETRY_OTLP_ENDPOINT", otlp.URL())
	t.Setenv(EnvPrefix+"TELEMETRY_SERVICE_NAME", "registrum-issuer-test")
	d := startDeployment(t, nil)
	if tc := d.cfg.Telemetry; tc == nil || tc.Endpoint != otlp.URL() || tc.ServiceName != "registrum-issuer-test" {
		t.Fatalf("telemetry from the environment: %+v", tc)
	}
	if !telemetry.Enabled() {
		t.Fatal("the issuer did not start its exporter")
	}

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const parentID = "00f067aa0ba902b7"
	if r := d.tokenRequest("00-" + traceID + "-" + parentID + "-01"); r.status != http.StatusOK {
		t.Fatalf("token: %d %s", r.status, r.body)
	}
	var server, appended *tracepb.Span
	otlp.Wait(t, 15*time.Second, func([]*tracepb.Span) bool {
		spans := otlp.Trace(traceID)
		server = telemetrytest.Find(spans, tracepb.Span_SPAN_KIND_SERVER, "POST /token")
		appended = telemetrytest.Find(spans, tracepb.Span_SPAN_KIND_INTERNAL, "audit.append")
		return server != nil && appended != nil
	})
	if server.Name != "POST /token" || hex.EncodeToString(server.ParentSpanId) != parentID {
		t.Fatalf("server span %q under %x, want POST /token under the inbound %s", server.Name, server.ParentSpanId, parentID)
	}
	if route, _ := telemetrytest.Attribute(server, "http.route"); route != "/token" {
		t.Fatalf("server span's route %q", route)
	}
	if !telemetrytest.ChildOf(appended, server) {
		t.Fatalf("the audit append is not the request's child: %x, request %x", appended.ParentSpanId, server.SpanId)
	}
	if appended.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Fatal("a committed append is marked failed")
	}

	// A refused request is traced too, with its audit append; the spans
	// carry no assertion or token.
	const refusedTrace = "0af7651916cd43dd8448eb211c80319c"
	req, _ := http.NewRequest(http.MethodPost, d.baseURL+"/token", strings.NewReader("grant_type=password"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("traceparent", "00-"+refusedTrace+"-b7ad6b7169203331-01")
	if r := d.do(req); r.status != http.StatusBadRequest {
		t.Fatalf("refused: %d %s", r.status, r.body)
	}
	otlp.Wait(t, 15*time.Second, func([]*tracepb.Span) bool {
		spans := otlp.Trace(refusedTrace)
		return telemetrytest.ChildOf(telemetrytest.Find(spans, tracepb.Span_SPAN_KIND_INTERNAL, "audit.append"),
			telemetrytest.Find(spans, tracepb.Span_SPAN_KIND_SERVER, "POST /token"))
	})
	for _, s := range otlp.Spans() {
		for _, kv := range s.Attributes {
			if v := kv.Value.GetStringValue(); strings.Contains(v, "eyJ") {
				t.Fatalf("span %q attribute %s holds a JWT", s.Name, kv.Key)
			}
		}
	}
}

// Without a telemetry block nothing is built: no exporter, no span, even
// with the standard OTEL_EXPORTER_OTLP_ENDPOINT set (only the
// configuration turns tracing on).
func TestNoTracesWithoutTelemetry(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	otlp := telemetrytest.NewReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.URL())
	d := startDeployment(t, nil)
	if d.cfg.Telemetry != nil || d.srv.telemetry != nil || telemetry.Enabled() {
		t.Fatalf("telemetry built without a telemetry block: %+v", d.cfg.Telemetry)
	}
	if r := d.tokenRequest("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"); r.status != http.StatusOK {
		t.Fatalf("token: %d %s", r.status, r.body)
	}
	d.srv.Close() // would export what was buffered
	time.Sleep(300 * time.Millisecond)
	if spans := otlp.Spans(); len(spans) != 0 {
		t.Fatalf("spans exported without telemetry: %q", telemetrytest.Names(spans))
	}
}

// The telemetry block is refused by the record host's rule, naming the key.
func TestTelemetryBlockIsChecked(t *testing.T) {
	for value, want := range map[string]string{
		"ftp://collector:4318":            "telemetry.otlpEndpoint",
		"http://user:pw@collector:4318":   "telemetry.otlpEndpoint",
		"http://collector:4318/v1/traces": "",
	} {
		t.Run(value, func(t *testing.T) {
			t.Setenv(EnvPrefix+"TELEMETRY_OTLP_ENDPOINT", value)
			setup, _ := newSetup(t)
			_, err := LoadConfig(setup.ConfigPath)
			if want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "pw") {
				t.Fatalf("%s: %v, want a refusal of %s without the credentials", value, err, want)
			}
		})
	}
}
