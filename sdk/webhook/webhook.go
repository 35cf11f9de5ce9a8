// Package webhook verifies the signed event deliveries of a Registrum host
// on the receiving side: the v1 signature (compared in constant time), the
// skew of the delivery time, the expected source, type and data schema, the
// exact body envelope, and deduplication on ce-source plus ce-id.
//
// It is written apart from the host's sender, from the protocol as the
// specification states it, so that each checks the other against the
// known-answer vectors in testdata.
package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// signedHeaders are the headers the signature covers, in signing order,
// before the method, path, content type, idempotency key and body.
var signedHeaders = []string{
	"Ce-Specversion", "Ce-Id", "Ce-Source", "Ce-Type", "Ce-Time", "Ce-Dataschema",
	"X-Registry-Event-Generation", "X-Registry-Delivery-Attempt", "X-Registry-Delivery-Time",
}

const (
	signaturePrefix = "engine-webhook-signature-v1"
	maxBodyBytes    = 1 << 20
	timeLayout      = "2006-01-02T15:04:05.000Z"
)

// ErrRejected wraps every verification failure.
var ErrRejected = errors.New("webhook: delivery rejected")

// Verifier checks deliveries for one destination.
type Verifier struct {
	// Key is the destination's signing key, its exact bytes.
	Key []byte
	// Path is the request path the destination is configured with.
	Path string
	// Source is the expected ce-source; "" accepts any.
	Source string
	// Types, when not empty, are the accepted ce-type values, each mapped
	// to its expected ce-dataschema ("" accepts any schema).
	Types map[string]string
	// MaxSkew bounds |now - X-Registry-Delivery-Time| (default 5 minutes).
	MaxSkew time.Duration
	// Now returns the receiver's clock (default time.Now).
	Now func() time.Time
}

// Delivery is a verified delivery.
type Delivery struct {
	ID, Source, Type, Time, DataSchema string
	Generation, Attempt                int
	DeliveryTime                       time.Time
	IdempotencyKey                     string
	// Body is the exact body; Event its decoded envelope.
	Body  []byte
	Event Event
}

// Event is the body envelope: exactly eight members.
type Event struct {
	Causation struct {
		Hop  int    `json:"hop"`
		Root string `json:"root"`
	} `json:"causation"`
	Data       json.RawMessage `json:"data"`
	DataSchema string          `json:"dataschema"`
	ID         string          `json:"id"`
	Source     string          `json:"source"`
	Subject    struct {
		RecordReference string `json:"recordReference"`
		RecordRevision  int64  `json:"recordRevision"`
	} `json:"subject"`
	Time string `json:"time"`
	Type string `json:"type"`
}

func reject(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRejected, fmt.Sprintf(format, args...))
}

// Expected returns the signature the sender computes for a request with
// these header values and body (the header map as received).
func Expected(key []byte, h http.Header, method, path string, body []byte) string {
	var in bytes.Buffer
	in.WriteString(signaturePrefix)
	field := func(v string) {
		var n [8]byte
		l := uint64(len(v))
		for i := 7; i >= 0; i-- {
			n[i] = byte(l)
			l >>= 8
		}
		in.Write(n[:])
		in.WriteString(v)
	}
	for _, name := range signedHeaders {
		field(h.Get(name))
	}
	field(method)
	field(path)
	field(h.Get("Content-Type"))
	field(h.Get("Idempotency-Key"))
	field(string(body))
	mac := hmac.New(sha256.New, key)
	mac.Write(in.Bytes())
	return "v1=" + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Verify reads and checks one delivery request. Every refusal wraps
// ErrRejected; the receiver should answer it with a 4xx status.
func (v *Verifier) Verify(r *http.Request) (*Delivery, error) {
	if r.Method != http.MethodPost {
		return nil, reject("method %s", r.Method)
	}
	if r.URL.Path != v.Path || r.URL.RawQuery != "" {
		return nil, reject("unexpected path or query")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return nil, reject("read body: %v", err)
	}
	if len(body) > maxBodyBytes {
		return nil, reject("body too large")
	}
	h := r.Header
	for _, name := range append(slicesClone(signedHeaders), "Idempotency-Key", "X-Registry-Signature", "Content-Type") {
		if len(h.Values(name)) != 1 {
			return nil, reject("header %s must be present once", name)
		}
	}
	if h.Get("Content-Type") != "application/json" || h.Get("Ce-Specversion") != "1.0" {
		return nil, reject("content type or spec version")
	}
	want := Expected(v.Key, h, r.Method, v.Path, body)
	if !hmac.Equal([]byte(want), []byte(h.Get("X-Registry-Signature"))) {
		return nil, reject("signature does not verify")
	}
	d := &Delivery{ID: h.Get("Ce-Id"), Source: h.Get("Ce-Source"), Type: h.Get("Ce-Type"), Time: h.Get("Ce-Time"),
		DataSchema: h.Get("Ce-Dataschema"), IdempotencyKey: h.Get("Idempotency-Key"), Body: body}
	if d.Generation, err = positive(h.Get("X-Registry-Event-Generation")); err != nil {
		return nil, err
	}
	if d.Attempt, err = positive(h.Get("X-Registry-Delivery-Attempt")); err != nil {
		return nil, err
	}
	if d.DeliveryTime, err = time.Parse(timeLayout, h.Get("X-Registry-Delivery-Time")); err != nil {
		return nil, reject("X-Registry-Delivery-Time is not an RFC 3339 UTC time with milliseconds")
	}
	now, skew := time.Now, v.MaxSkew
	if v.Now != nil {
		now = v.Now
	}
	if skew == 0 {
		skew = 5 * time.Minute
	}
	if diff := now().Sub(d.DeliveryTime); diff > skew || diff < -skew {
		return nil, reject("delivery time outside the accepted skew")
	}
	if v.Source != "" && d.Source != v.Source {
		return nil, reject("unexpected source")
	}
	if len(v.Types) > 0 {
		schema, ok := v.Types[d.Type]
		if !ok || (schema != "" && schema != d.DataSchema) {
			return nil, reject("unexpected type or data schema")
		}
	}
	if err := checkEnvelope(body, d); err != nil {
		return nil, err
	}
	return d, nil
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

func positive(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || strconv.Itoa(n) != s {
		return 0, reject("generation and attempt must be positive decimal integers")
	}
	return n, nil
}

// checkEnvelope decodes the body: exactly the eight members, restating
// the headers' event identity.
func checkEnvelope(body []byte, d *Delivery) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		return reject("body is not a JSON object")
	}
	want := []string{"causation", "data", "dataschema", "id", "source", "subject", "time", "type"}
	if len(members) != len(want) {
		return reject("body must have exactly eight members")
	}
	for _, m := range want {
		if _, ok := members[m]; !ok {
			return reject("body lacks %s", m)
		}
	}
	if err := json.Unmarshal(body, &d.Event); err != nil {
		return reject("body members: %v", err)
	}
	e := d.Event
	if e.ID != d.ID || e.Source != d.Source || e.Type != d.Type || e.Time != d.Time || e.DataSchema != d.DataSchema {
		return reject("body does not restate the headers' event identity")
	}
	if !strings.HasPrefix(e.Subject.RecordReference, "hmac-sha256:") {
		return reject("subject.recordReference is not a keyed reference")
	}
	return nil
}

// Deduplicator remembers the events a receiver has acted on, by ce-source
// and ce-id: a retry or a replay of an event it already handled is
// recognised whatever its generation or idempotency key. It keeps entries
// for TTL (default 30 days) and at most Max entries (default 100000).
type Deduplicator struct {
	TTL time.Duration
	Max int

	mu   sync.Mutex
	seen map[string]time.Time
}

// First reports whether d is the first delivery of its event, and records
// it. Call it after Verify and act only when it returns true (or make the
// action itself idempotent on the same key).
func (x *Deduplicator) First(d *Delivery) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	ttl, max := x.TTL, x.Max
	if ttl == 0 {
		ttl = 30 * 24 * time.Hour
	}
	if max == 0 {
		max = 100000
	}
	if x.seen == nil {
		x.seen = map[string]time.Time{}
	}
	now := time.Now()
	key := strconv.Itoa(len(d.Source)) + ":" + d.Source + d.ID
	if t, ok := x.seen[key]; ok && now.Sub(t) < ttl {
		return false
	}
	if len(x.seen) >= max {
		for k, t := range x.seen {
			if now.Sub(t) >= ttl {
				delete(x.seen, k)
			}
		}
		if len(x.seen) >= max {
			for k := range x.seen { // evict an arbitrary entry
				delete(x.seen, k)
				break
			}
		}
	}
	x.seen[key] = now
	return true
}
