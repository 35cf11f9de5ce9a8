package hooks

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/registrum/registrum/store"
)

// Retry-After is read as delay-seconds or an HTTP date; anything else, a
// negative number or a date already past asks for nothing.
func TestRetryAfterIsReadAsSecondsOrAnHTTPDate(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                                 0,
		"120":                              120 * time.Second,
		" 7 ":                              7 * time.Second,
		"0":                                0,
		"-5":                               0,
		"1.5":                              0,
		"soon":                             0,
		"99999999999999999999":             0,
		"9999999999":                       maxRetryAfterSeconds * time.Second,
		"Sat, 01 Mar 2025 12:30:00 GMT":    30 * time.Minute,
		"Saturday, 01-Mar-25 14:00:00 GMT": 2 * time.Hour,    // RFC 850
		"Sat Mar  1 12:00:10 2025":         10 * time.Second, // asctime
		"Sat, 01 Mar 2025 11:59:00 GMT":    0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: %s, want %s", v, got, want)
		}
	}
}

// A receiver's answer decides the attempt, over real HTTP: 2xx delivers;
// 410 stops retrying; 429, 502, 503 and 504 are throttling; redirects and
// every other status (other 4xx included) are retried; Retry-After is
// carried on every retried answer; a refused connection is a transport
// failure.
func TestReceiverSignalsDecideTheAttempt(t *testing.T) {
	type answer struct {
		status     int
		retryAfter string
	}
	var next answer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if next.retryAfter != "" {
			w.Header().Set("Retry-After", next.retryAfter)
		}
		if next.status/100 == 3 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(next.status)
	}))
	defer srv.Close()
	d := newDestination("crm")
	d.URL, _ = url.Parse(srv.URL + "/registry/crm")
	d.Network = NetworkLoopback
	ev, err := New(configFor(eventsPackage(urlHook("person-created", "crm")), d))
	if err != nil {
		t.Fatal(err)
	}
	lease := func() *store.Lease {
		return &store.Lease{Delivery: &store.Delivery{DeliveryID: uuid.NewString(), EventID: uuid.NewString(), HookID: "person-created",
			HandlerKind: "url", DestinationID: "crm", BindingDigest: d.BindingDigest(), Generation: 1, Attempt: 1, AttemptTimeoutMs: 5000,
			Payload: []byte(`{"id":"e","source":"s","type":"person-created-v1","time":"2025-03-01T12:00:00.000Z","dataschema":"urn:x"}`)},
			DeliveryTime: time.Now()}
	}
	inAnHour := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		answer
		want store.AttemptResult
	}{
		{answer{200, ""}, store.AttemptResult{Delivered: true, StatusCode: 200}},
		{answer{204, "60"}, store.AttemptResult{Delivered: true, StatusCode: 204}},
		{answer{410, "60"}, store.AttemptResult{StatusCode: 410, Failure: FailureGone, Stop: true}},
		{answer{429, "120"}, store.AttemptResult{StatusCode: 429, Failure: FailureThrottled, RetryAfter: 120 * time.Second}},
		{answer{502, ""}, store.AttemptResult{StatusCode: 502, Failure: FailureThrottled}},
		{answer{503, "30"}, store.AttemptResult{StatusCode: 503, Failure: FailureThrottled, RetryAfter: 30 * time.Second}},
		{answer{504, ""}, store.AttemptResult{StatusCode: 504, Failure: FailureThrottled}},
		{answer{500, ""}, store.AttemptResult{StatusCode: 500, Failure: FailureStatus}},
		{answer{400, ""}, store.AttemptResult{StatusCode: 400, Failure: FailureStatus}},
		{answer{401, ""}, store.AttemptResult{StatusCode: 401, Failure: FailureStatus}},
		{answer{404, "5"}, store.AttemptResult{StatusCode: 404, Failure: FailureStatus, RetryAfter: 5 * time.Second}},
		{answer{301, "10"}, store.AttemptResult{StatusCode: 301, Failure: FailureRedirect, RetryAfter: 10 * time.Second}},
	} {
		next = tc.answer
		if got := ev.attempt(context.Background(), lease()); got != tc.want {
			t.Errorf("%d (Retry-After %q): %+v, want %+v", tc.status, tc.retryAfter, got, tc.want)
		}
	}
	// An HTTP date an hour away asks for about an hour.
	next = answer{503, inAnHour}
	got := ev.attempt(context.Background(), lease())
	if got.Failure != FailureThrottled || got.RetryAfter < 59*time.Minute || got.RetryAfter > time.Hour {
		t.Errorf("503 with Retry-After %s: %+v", inAnHour, got)
	}
	// A receiver that is gone altogether refuses the connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	d.URL, _ = url.Parse("http://127.0.0.1:" + strconv.Itoa(port) + "/registry/crm")
	l := lease()
	l.BindingDigest = d.BindingDigest()
	if got := ev.attempt(context.Background(), l); got != (store.AttemptResult{Failure: "transport"}) {
		t.Errorf("connection refused: %+v", got)
	}
}
