package model

import (
	"testing"
	"time"
)

// The pause after a failed attempt is its step plus up to RetryJitter of
// it; a receiver's Retry-After lengthens it, never past the schedule's
// largest step, and never shortens it.
func TestRetryDelayKeepsTheReceiversPauseWithinTheSchedule(t *testing.T) {
	delays := []int32{5_000, 30_000, 43_200_000}
	s := time.Second
	for _, tc := range []struct {
		name       string
		attempt    int
		retryAfter time.Duration
		spread     float64
		want       time.Duration
	}{
		{"first step, no jitter", 1, 0, 0, 5 * s},
		{"first step, the most jitter", 1, 0, 0.999999, 5*s + 999999*time.Microsecond},
		{"half the jitter", 2, 0, 0.5, 33 * s},
		{"the last step repeats", 7, 0, 0, 12 * time.Hour},
		{"a spread out of range is clamped", 1, 0, 7, 6 * s},
		{"Retry-After shorter than the step", 1, 2 * s, 0, 5 * s},
		{"Retry-After shorter than the jittered step", 1, 5500 * time.Millisecond, 0.5, 5500 * time.Millisecond},
		{"Retry-After longer than the step", 1, 120 * s, 0.5, 120 * s},
		{"Retry-After past the largest step is capped", 1, 48 * time.Hour, 0, 12 * time.Hour},
		{"the capped Retry-After never shortens a jittered last step", 3, 48 * time.Hour, 0.5, 13*time.Hour + 12*time.Minute},
	} {
		if got := RetryDelay(delays, tc.attempt, tc.retryAfter, tc.spread); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if got := RetryDelay([]int{}, 1, time.Hour, 0.5); got != 0 {
		t.Errorf("an empty schedule: %s", got)
	}
}

// The span of a schedule is every pause between its attempts at the
// largest jitter; one attempt has none.
func TestRetrySpanIsTheLongestTimeASchedulesAttemptsTake(t *testing.T) {
	if got := RetrySpan([]int{1000, 2000}, 4); got != 6*time.Second {
		t.Errorf("1 s, 2 s, 2 s with 20%% jitter: %s", got)
	}
	if got := RetrySpan([]int{1000}, 1); got != 0 {
		t.Errorf("one attempt: %s", got)
	}
	d := DefaultDelivery()
	if got := RetrySpan(d.RetryDelaysMs, d.MaximumAttempts); got != 27*time.Hour+15*time.Minute+6*time.Second {
		t.Errorf("default schedule spans %s", got)
	}
}
