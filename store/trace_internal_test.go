package store

import (
	"context"
	"testing"
)

// Without a sampled span the store's spans cost nothing: the caller's
// context comes back unchanged and nothing is allocated.
func TestSpansCostNothingWhenOff(t *testing.T) {
	ctx := context.Background()
	if got, span := startOp(ctx, spanRead, "Get"); got != ctx || span.IsRecording() {
		t.Fatal("a span started without a caller's span")
	}
	if got, _ := startSpan(ctx, spanWrite); got != ctx {
		t.Fatal("a write span started without a caller's span")
	}
	if n := testing.AllocsPerRun(100, func() {
		c, span := startOp(ctx, spanRead, "Get")
		_ = c
		endOp(span, nil)
	}); n != 0 {
		t.Fatalf("%v allocations per read span with tracing off", n)
	}
}
