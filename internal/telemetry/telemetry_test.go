package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// echo answers with the traceparent it received.
func echo(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.Header.Get("traceparent")))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// send calls url through Transport under the server span of an inbound
// request that carries traceparent tp.
func send(t *testing.T, url, tp string) (string, string) {
	t.Helper()
	in := httptest.NewRequest("POST", "/v1/x", nil)
	in.Header.Set("traceparent", tp)
	ctx, span := ServerSpan(context.Background(), in)
	defer span.End()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := (&http.Client{Transport: Transport(nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if req.Header.Get("traceparent") != "" {
		t.Fatal("the caller's request was changed")
	}
	sc := span.SpanContext()
	if !sc.IsValid() {
		return string(b), ""
	}
	return string(b), sc.TraceID().String()
}

func TestOffSendsNothingAndOnContinuesTheTrace(t *testing.T) {
	const inbound = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	srv := echo(t)

	off, err := Start(context.Background(), Options{})
	if err != nil || Enabled() || Current() != nil {
		t.Fatalf("an empty endpoint must leave telemetry off: %v", err)
	}
	if got, trace := send(t, srv.URL, inbound); got != "" || trace != "" {
		t.Fatalf("off: traceparent %q sent, server trace %q", got, trace)
	}
	_ = off.Shutdown(context.Background())

	collector := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer collector.Close()
	p, err := Start(context.Background(), Options{Endpoint: collector.URL})
	if err != nil || !Enabled() {
		t.Fatalf("on: %v", err)
	}
	got, trace := send(t, srv.URL, inbound)
	if trace != "4bf92f3577b34da6a3ce929d0e0e4736" || len(got) != 55 || got[3:35] != trace || got[36:52] == "00f067aa0ba902b7" {
		t.Fatalf("on: traceparent %q sent under server trace %q", got, trace)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if Enabled() {
		t.Fatal("still on after Shutdown")
	}
}

func TestMethodNamesOnlyStandardMethods(t *testing.T) {
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE"} {
		if got := Method(m); got != m {
			t.Errorf("Method(%q) = %q", m, got)
		}
	}
	for _, m := range []string{"get", "PROPFIND", "INVENTED01", "", "GET "} {
		if got := Method(m); got != OtherMethod {
			t.Errorf("Method(%q) = %q, want %q", m, got, OtherMethod)
		}
	}
}
