package hooks

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/registrum/registrum/store"
)

// Failure classes of a receiver's answer, as the attempt audit records them.
const (
	// FailureGone is 410 Gone: the receiver asks never to be sent the event
	// again; the delivery is dead-lettered at once (replayable).
	FailureGone = "gone"
	// FailureThrottled is 429, 502, 503 or 504: the receiver is busy or
	// down for a while; retried on the schedule (and its Retry-After).
	FailureThrottled = "throttled"
	// FailureRedirect is any 3xx: redirects are not followed; retried.
	FailureRedirect = "redirect"
	// FailureStatus is any other non-2xx answer; retried.
	FailureStatus = "status"
)

// maxRetryAfterSeconds bounds the delay-seconds a Retry-After is read as
// before the schedule caps it (model.RetryDelay): it only keeps the
// arithmetic in range.
const maxRetryAfterSeconds = 30 * 24 * 3600

// outcome classifies a receiver's answer: any 2xx delivers; 410 stops
// retrying; everything else is retried on the schedule, after the pause
// Retry-After asks for when it asks for one (seconds or an HTTP date,
// read against now).
func outcome(status int, h http.Header, now time.Time) store.AttemptResult {
	r := store.AttemptResult{StatusCode: status}
	switch {
	case status >= 200 && status < 300:
		r.Delivered = true
		return r
	case status == http.StatusGone:
		r.Failure, r.Stop = FailureGone, true
		return r
	case status == http.StatusTooManyRequests || status == http.StatusBadGateway || status == http.StatusServiceUnavailable ||
		status == http.StatusGatewayTimeout:
		r.Failure = FailureThrottled
	case status >= 300 && status < 400:
		r.Failure = FailureRedirect
	default:
		r.Failure = FailureStatus
	}
	r.RetryAfter = retryAfter(h.Get("Retry-After"), now)
	return r
}

// retryAfter reads a Retry-After value (RFC 9110 §10.2.3): delay-seconds
// or an HTTP date. It returns 0 for an absent or malformed value or a date
// not after now.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0
		}
		return time.Duration(min(n, maxRetryAfterSeconds)) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil || !t.After(now) {
		return 0
	}
	return min(t.Sub(now), maxRetryAfterSeconds*time.Second)
}
