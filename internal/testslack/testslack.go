// Package testslack holds the one allowance tests give a machine's scheduler
// when they check that a limit stopped some work.
//
// A test that checks a limit asserts what the limit means: the work failed
// with the limit's own kind (timeout, deadline, memory), and it did not end
// before the limit. How soon after the limit the work actually stopped
// depends on the machine: on two cores shared with other test binaries, a
// goroutine woken by a timer can wait a second or more for a processor. So
// the upper bound a test asserts is the limit plus Scheduling, never a tight
// figure. It still catches the regressions it is there for: a limit that no
// longer fires lets the work run until the test binary's own timeout, far
// past any finite bound.
//
// Only tests import this package.
package testslack

import (
	"testing"
	"time"
)

// Scheduling is how late past its limit work may stop before a test calls the
// limit broken: generous enough for a two-core machine running the whole
// suite beside two CPU-bound processes (a load average near 6), small beside
// the hang it detects.
const Scheduling = 5 * time.Second

// Stopped fails t unless took, the time the work ran under a limit, is no
// more than limit plus Scheduling. what names the work in the failure.
func Stopped(t testing.TB, what string, took, limit time.Duration) {
	t.Helper()
	if took > limit+Scheduling {
		t.Fatalf("%s ran %s: the %s limit did not stop it (allowed %s of scheduling delay)", what, took, limit, Scheduling)
	}
}
