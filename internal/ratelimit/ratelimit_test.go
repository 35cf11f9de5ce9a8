package ratelimit

import (
	"net/http"
	"regexp"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mustNew(t *testing.T, perSecond float64, burst, clients int) *Limiter {
	t.Helper()
	l, err := New(perSecond, burst, clients)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestBurstThenRefusalThenRecovery(t *testing.T) {
	l := mustNew(t, 2, 3, 0) // one request every 500 ms, three at once
	for i := range 3 {
		d := l.Allow("a", t0)
		if !d.Allowed || d.Remaining != 2-i {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	d := l.Allow("a", t0)
	if d.Allowed || d.Remaining != 0 || d.Reset != 500*time.Millisecond {
		t.Fatalf("over the burst: %+v", d)
	}
	if RetryAfter(d) != 1 {
		t.Fatalf("retry after %d", RetryAfter(d))
	}
	if d := l.Allow("a", t0.Add(499*time.Millisecond)); d.Allowed {
		t.Fatalf("admitted before a request refilled: %+v", d)
	}
	if d := l.Allow("a", t0.Add(500*time.Millisecond)); !d.Allowed {
		t.Fatalf("not admitted once a request refilled: %+v", d)
	}
}

func TestClientsAreIndependentAndTheTableIsBounded(t *testing.T) {
	l := mustNew(t, 1, 1, 2)
	if !l.Allow("a", t0).Allowed || l.Allow("a", t0).Allowed {
		t.Fatal("a: burst of one not applied")
	}
	if !l.Allow("b", t0).Allowed {
		t.Fatal("b is limited by a's requests")
	}
	if l.Len() != 2 {
		t.Fatalf("len %d", l.Len())
	}
	// A third client forgets the least recently seen one (a), which then
	// starts afresh; the table never holds more than two.
	if !l.Allow("c", t0).Allowed || l.Len() != 2 {
		t.Fatalf("c: len %d", l.Len())
	}
	if !l.Allow("a", t0).Allowed || l.Len() != 2 {
		t.Fatalf("a was not forgotten: len %d", l.Len())
	}
	// b was the least recently seen when a came back.
	if !l.Allow("b", t0).Allowed {
		t.Fatal("b was not forgotten")
	}
	if l.Allow("a", t0).Allowed {
		t.Fatal("a, seen recently, was forgotten")
	}
}

func TestHeadersFollowTheDraftSyntax(t *testing.T) {
	l := mustNew(t, 0.5, 2, 0)
	h := http.Header{}
	l.WriteHeaders(h, l.Allow("a", t0))
	if got := h.Get("RateLimit-Policy"); got != `"client";q=2;w=4` {
		t.Fatalf("policy %q", got)
	}
	if got := h.Get("RateLimit"); got != `"client";r=1;t=2` {
		t.Fatalf("ratelimit %q", got)
	}
	if h.Get("Retry-After") != "" {
		t.Fatal("Retry-After on an admitted request")
	}
	l.Allow("a", t0)
	h = http.Header{}
	l.WriteHeaders(h, l.Allow("a", t0))
	if got := h.Get("RateLimit"); got != `"client";r=0;t=2` || h.Get("Retry-After") != "2" {
		t.Fatalf("refused: RateLimit %q Retry-After %q", got, h.Get("Retry-After"))
	}
	item := regexp.MustCompile(`^"client";r=\d+;t=\d+$`)
	if !item.MatchString(h.Get("RateLimit")) {
		t.Fatalf("not a structured-field item: %q", h.Get("RateLimit"))
	}
}

func TestNewRefusesNonsense(t *testing.T) {
	for _, c := range []struct {
		perSecond float64
		burst     int
	}{{0, 1}, {-1, 1}, {1, 0}} {
		if _, err := New(c.perSecond, c.burst, 0); err == nil {
			t.Errorf("New(%v, %d) accepted", c.perSecond, c.burst)
		}
	}
}

func TestAddressKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7:5123":                   "address:192.0.2.7",
		"[::ffff:192.0.2.7]:5123":          "address:192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443":       "address:2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1%eth0]:8080": "address:2001:db8:1:2::/64",
		"unix":                             "address:unix",
	} {
		if got := AddressKey(in); got != want {
			t.Errorf("AddressKey(%q) = %q, want %q", in, got, want)
		}
	}
}
