package desk

import (
	"fmt"
	"testing"
	"time"
)

// The throttle table stays within its bound however many addresses fail,
// making room from the stalest entries, and a throttled address stays
// throttled while younger entries are added.
func TestThrottleTableIsBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := newSessions(func() time.Time { return now })
	guesser := throttleKey{address: "192.0.2.1", account: reviewerAccount}
	for i := 0; i < failureLimit; i++ {
		s.failed(guesser)
	}
	for i := 0; i < maximumThrottled+500; i++ {
		now = now.Add(time.Millisecond)
		s.failed(throttleKey{address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), account: reviewerAccount})
		if len(s.failures) > maximumThrottled {
			t.Fatalf("%d entries after %d addresses", len(s.failures), i+1)
		}
	}
	// The guesser's entry was the stalest: evicted first. Fresh failures
	// throttle it again, within the window only.
	for i := 0; i < failureLimit; i++ {
		s.failed(guesser)
	}
	if !s.throttled(guesser) || s.throttled(throttleKey{address: "192.0.2.2", account: reviewerAccount}) {
		t.Fatal("the throttle follows the address")
	}
	now = now.Add(failureWindow + time.Second)
	if s.throttled(guesser) {
		t.Fatal("still throttled after the window")
	}
}
