package soak

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/registrum/registrum/internal/canonjson"
)

// Authority is the soak's review authority, speaking the protocol of the
// notes' §5.4 as the host's client uses it: POST /v1/review-requests
// accepts a submission once per Idempotency-Key and approves it at once;
// GET /v1/review-requests/{id}/result answers the approval. While down it
// answers 503 to everything.
type Authority struct {
	mu      sync.Mutex
	down    bool
	posts   int
	byKey   map[string]string
	results map[string][]byte
}

// NewAuthority returns an authority that approves every submission.
func NewAuthority() *Authority {
	return &Authority{byKey: map[string]string{}, results: map[string][]byte{}}
}

// SetDown makes the authority answer 503 (down) or serve (up).
func (a *Authority) SetDown(down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = down
}

// Counts returns the submissions sent and the distinct ones accepted.
func (a *Authority) Counts() (posts, accepted int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.posts, len(a.byKey)
}

// ServeHTTP answers the host's review client.
func (a *Authority) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	down := a.down
	a.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		http.Error(w, "unauthenticated", http.StatusUnauthorized)
		return
	}
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/review-requests":
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, "not JSON", http.StatusBadRequest)
			return
		}
		canon, err := canonjson.Transform(raw)
		if err != nil {
			http.Error(w, "not JSON", http.StatusBadRequest)
			return
		}
		sum := sha256.Sum256(canon)
		digest := "sha256:" + hex.EncodeToString(sum[:])
		a.mu.Lock()
		a.posts++
		key := r.Header.Get("Idempotency-Key")
		id, seen := a.byKey[key]
		if !seen {
			id = fmt.Sprintf("rr-%d", len(a.byKey)+1)
			a.byKey[key] = id
			now := time.Now().UTC()
			a.results[id], _ = json.Marshal(map[string]any{"resultId": "res-" + id, "requestId": id, "subject": body["subject"],
				"policy": map[string]any{"id": body["kind"]}, "submissionDigest": digest, "status": "approved",
				"completedAt": now.Format(time.RFC3339), "availableUntil": now.Add(24 * time.Hour).Format(time.RFC3339)})
		}
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"requestId": id, "subject": body["subject"], "policy": map[string]any{"id": body["kind"]}, "submissionDigest": digest})
	case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/v1/review-requests/") && strings.HasSuffix(r.URL.Path, "/result"):
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/review-requests/"), "/result")
		a.mu.Lock()
		b, ok := a.results[id]
		a.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	default:
		http.NotFound(w, r)
	}
}
