package soak

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/registrum/registrum/sdk/webhook"
)

// Receiver is the soak's webhook destination: it verifies every delivery
// with sdk/webhook, answers 204 (or 503 while it is made unavailable), and
// records every delivery it answered, so the checker can count the
// acknowledged ones per ce-source, ce-id and generation.
type Receiver struct {
	Verifier webhook.Verifier

	mu       sync.Mutex
	down     bool
	got      []Received
	rejected int
}

// SetDown makes the receiver answer 503 (down) or 204 (up).
func (r *Receiver) SetDown(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
}

// ServeHTTP answers one delivery.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	d, err := r.Verifier.Verify(req)
	if err != nil {
		r.mu.Lock()
		r.rejected++
		r.mu.Unlock()
		http.Error(w, "rejected", http.StatusUnauthorized)
		return
	}
	var body struct {
		RecordID string `json:"recordId"`
		Revision int64  `json:"revision"`
	}
	_ = json.Unmarshal(d.Event.Data, &body) // the envelope was checked; data may have no record
	rec := Received{Source: d.Source, ID: d.ID, Generation: d.Generation, Attempt: d.Attempt, Type: d.Type,
		Record: body.RecordID, Revision: body.Revision, At: time.Now(), SignatureOK: true}
	r.mu.Lock()
	rec.Status = http.StatusNoContent
	if r.down {
		rec.Status = http.StatusServiceUnavailable
	}
	r.got = append(r.got, rec)
	r.mu.Unlock()
	w.WriteHeader(rec.Status)
}

// Received returns a copy of every delivery answered so far.
func (r *Receiver) Received() []Received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Received(nil), r.got...)
}

// Rejected counts deliveries that did not verify.
func (r *Receiver) Rejected() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rejected
}

// Acknowledged counts the distinct (source, id, generation) acknowledged.
func (r *Receiver) Acknowledged() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[[3]any]bool{}
	for _, g := range r.got {
		if g.Status < 300 {
			seen[[3]any{g.Source, g.ID, g.Generation}] = true
		}
	}
	return len(seen)
}
