// Package webhookreceiver is an example receiver of a registry's event
// deliveries: it verifies each delivery with sdk/webhook (signature in
// constant time, delivery-time skew, source, exact envelope), deduplicates
// on ce-source plus ce-id, and writes one line per delivery to its log.
// `registrum dev` runs it for the example registry; cmd/webhook-receiver
// runs it on its own.
package webhookreceiver

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/registrum/registrum/sdk/webhook"
)

// Receiver is an http.Handler for one destination's deliveries.
type Receiver struct {
	verifier *webhook.Verifier
	dedup    webhook.Deduplicator
	mu       sync.Mutex
	log      io.Writer
}

// New returns a receiver checking deliveries with v and logging to log.
func New(v *webhook.Verifier, log io.Writer) *Receiver {
	return &Receiver{verifier: v, log: log}
}

// ServeHTTP answers 204 to a verified delivery (new or a duplicate) and 401
// to anything that does not verify.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	d, err := r.verifier.Verify(req)
	if err != nil {
		r.logf("%s rejected: %v", time.Now().UTC().Format(time.RFC3339), errors.Unwrap(err))
		http.Error(w, "delivery rejected", http.StatusUnauthorized)
		return
	}
	what := "new event"
	if !r.dedup.First(d) {
		what = "duplicate, already handled"
	}
	r.logf("%s verified %s id=%s generation=%d attempt=%d idempotency-key=%s (%s)\n  %s",
		time.Now().UTC().Format(time.RFC3339), d.Type, d.ID, d.Generation, d.Attempt, d.IdempotencyKey, what, d.Event.Data)
	w.WriteHeader(http.StatusNoContent)
}

func (r *Receiver) logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.log, format+"\n", args...)
}
