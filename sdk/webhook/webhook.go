// Package webhook verifies the signed event deliveries of a Registrum host
// on the receiving side: the v1 signature (compared in constant time), the
// skew of the delivery time, the expected source, type and data schema, the
// exact body envelope, and deduplication on ce-source plus ce-id.
//
// Every delivery carries two signatures: the registry's own
// X-Registry-Signature, and the Standard Webhooks headers webhook-id,
// webhook-timestamp and webhook-signature. A Verifier accepts either, under
// its Key or its PreviousKey, so a receiver keeps accepting deliveries while
// the sender rotates its key (the sender then signs webhook-signature with
// both keys).
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

// Standard Webhooks header names (canonical form) and secret prefix.
const (
	headerWebhookID        = "Webhook-Id"
	headerWebhookTimestamp = "Webhook-Timestamp"
	headerWebhookSignature = "Webhook-Signature"
	// SecretPrefix starts the textual form of a Standard Webhooks secret:
	// "whsec_" and the standard base64 of the key's bytes.
	SecretPrefix = "whsec_"
)

// Signature schemes a delivery can be verified under.
const (
	// SchemeRegistry is X-Registry-Signature: it covers every CloudEvents
	// and X-Registry header, the method, path, content type, idempotency
	// key and body.
	SchemeRegistry = "registry-v1"
	// SchemeStandard is the Standard Webhooks v1 signature: it covers
	// webhook-id, webhook-timestamp and the body only.
	SchemeStandard = "standard-webhooks-v1"
)

// ErrRejected wraps every verification failure.
var ErrRejected = errors.New("webhook: delivery rejected")

// Verifier checks deliveries for one destination.
type Verifier struct {
	// Key is the destination's signing key, its exact bytes (a "whsec_"
	// secret decodes to them: see DecodeSecret).
	Key []byte
	// PreviousKey, while the receiver itself changes keys, is a second
	// accepted key (nil: none). A receiver needs it only when it cannot
	// switch to the new key at the instant the sender does: during the
	// sender's rotation, deliveries carry a Standard Webhooks signature
	// under each of the sender's keys, and either one verifies.
	PreviousKey []byte
	// Path is the request path the destination is configured with.
	Path string
	// Source is the expected ce-source; "" accepts any.
	Source string
	// Types, when not empty, are the accepted ce-type values, each mapped
	// to its expected ce-dataschema ("" accepts any schema).
	Types map[string]string
	// MaxSkew bounds |now - X-Registry-Delivery-Time| under SchemeRegistry
	// and |now - webhook-timestamp| under SchemeStandard (default 5
	// minutes, the Standard Webhooks libraries' tolerance).
	MaxSkew time.Duration
	// Now returns the receiver's clock (default time.Now).
	Now func() time.Time
}

// Delivery is a verified delivery.
type Delivery struct {
	// Scheme is the signature that verified: SchemeRegistry or
	// SchemeStandard.
	Scheme string
	// ID, Source, Type, Time and DataSchema are the ce-* headers, which the
	// body restates (checked) under either scheme.
	ID, Source, Type, Time, DataSchema string
	// Generation, Attempt and IdempotencyKey are set under SchemeRegistry
	// only: the Standard Webhooks signature does not cover them, so under
	// SchemeStandard they are left zero rather than taken unauthenticated.
	Generation, Attempt int
	IdempotencyKey      string
	// DeliveryTime is X-Registry-Delivery-Time under SchemeRegistry and
	// webhook-timestamp (whole seconds) under SchemeStandard.
	DeliveryTime time.Time
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

// Verify reads and checks one delivery request: X-Registry-Signature
// under Key or PreviousKey, or else the Standard Webhooks webhook-signature
// (any of its v1 entries) under either, every comparison in constant time;
// then the skew of the signed delivery time, the source, type and schema,
// and the envelope. Every refusal wraps ErrRejected; the receiver should
// answer it with a 4xx status.
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
	for _, name := range append(slicesClone(signedHeaders), "Idempotency-Key", "Content-Type") {
		if len(h.Values(name)) != 1 {
			return nil, reject("header %s must be present once", name)
		}
	}
	for _, name := range []string{"X-Registry-Signature", headerWebhookID, headerWebhookTimestamp, headerWebhookSignature} {
		if len(h.Values(name)) > 1 {
			return nil, reject("header %s must not be repeated", name)
		}
	}
	if h.Get("Content-Type") != "application/json" || h.Get("Ce-Specversion") != "1.0" {
		return nil, reject("content type or spec version")
	}
	keys := v.keys()
	if len(keys) == 0 {
		return nil, reject("the verifier has no key")
	}
	d := &Delivery{ID: h.Get("Ce-Id"), Source: h.Get("Ce-Source"), Type: h.Get("Ce-Type"), Time: h.Get("Ce-Time"),
		DataSchema: h.Get("Ce-Dataschema"), Body: body}
	switch {
	case v.registrySignatureVerifies(keys, h, r.Method, body):
		d.Scheme, d.IdempotencyKey = SchemeRegistry, h.Get("Idempotency-Key")
		if d.Generation, err = positive(h.Get("X-Registry-Event-Generation")); err != nil {
			return nil, err
		}
		if d.Attempt, err = positive(h.Get("X-Registry-Delivery-Attempt")); err != nil {
			return nil, err
		}
		if d.DeliveryTime, err = time.Parse(timeLayout, h.Get("X-Registry-Delivery-Time")); err != nil {
			return nil, reject("X-Registry-Delivery-Time is not an RFC 3339 UTC time with milliseconds")
		}
	case h.Get(headerWebhookSignature) != "":
		ts, err := VerifyStandard(keys, h.Get(headerWebhookID), h.Get(headerWebhookTimestamp), h.Get(headerWebhookSignature), body)
		if err != nil {
			return nil, err
		}
		// webhook-id is the event id: signed here, and ce-id is checked
		// against the body below, so all three name one event.
		if h.Get(headerWebhookID) != d.ID {
			return nil, reject("webhook-id is not the event id")
		}
		d.Scheme, d.DeliveryTime = SchemeStandard, ts
	default:
		return nil, reject("signature does not verify")
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

// keys returns the configured keys, Key first.
func (v *Verifier) keys() [][]byte {
	var ks [][]byte
	for _, k := range [][]byte{v.Key, v.PreviousKey} {
		if len(k) > 0 {
			ks = append(ks, k)
		}
	}
	return ks
}

// registrySignatureVerifies reports whether X-Registry-Signature is the
// signature under one of keys, compared in constant time.
func (v *Verifier) registrySignatureVerifies(keys [][]byte, h http.Header, method string, body []byte) bool {
	got := h.Get("X-Registry-Signature")
	if got == "" {
		return false
	}
	ok := false
	for _, k := range keys {
		if hmac.Equal([]byte(Expected(k, h, method, v.Path, body)), []byte(got)) {
			ok = true
		}
	}
	return ok
}

// ExpectedStandard returns the Standard Webhooks v1 signature entry the
// sender computes under key: "v1," and the standard base64 of the
// HMAC-SHA-256 of id, ".", the decimal timestamp, "." and the exact body.
func ExpectedStandard(key []byte, id string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// VerifyStandard checks Standard Webhooks headers as received: webhook-id,
// webhook-timestamp (decimal seconds since the epoch) and webhook-signature
// (space-separated entries; entries of versions other than v1 are
// ignored), against body under each of keys, in constant time. It returns
// the signed timestamp; the caller bounds its skew.
func VerifyStandard(keys [][]byte, id, timestamp, signatures string, body []byte) (time.Time, error) {
	if id == "" || strings.Contains(id, ".") {
		return time.Time{}, reject("webhook-id is empty or holds a dot")
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || ts < 0 || strconv.FormatInt(ts, 10) != timestamp {
		return time.Time{}, reject("webhook-timestamp is not decimal seconds")
	}
	entries := strings.Split(signatures, " ")
	if len(entries) > maxSignatureEntries {
		return time.Time{}, reject("webhook-signature has too many entries")
	}
	ok := false
	for _, k := range keys {
		want := []byte(ExpectedStandard(k, id, ts, body))
		for _, e := range entries {
			if strings.HasPrefix(e, "v1,") && hmac.Equal(want, []byte(e)) {
				ok = true
			}
		}
	}
	if !ok {
		return time.Time{}, reject("signature does not verify")
	}
	return time.Unix(ts, 0).UTC(), nil
}

// maxSignatureEntries bounds the work one webhook-signature header can ask
// for.
const maxSignatureEntries = 16

// EncodeSecret returns the Standard Webhooks textual form of a key:
// "whsec_" and the standard base64 of its exact bytes. It is a secret: keep
// it where the key file is kept and never log it.
func EncodeSecret(key []byte) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// DecodeSecret returns the key bytes of a Standard Webhooks secret
// ("whsec_" and standard base64; the prefix may be left out, as the
// Standard Webhooks libraries allow). The error never repeats the secret.
func DecodeSecret(secret string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(k) == 0 {
		return nil, errors.New("webhook: the secret is not \"whsec_\" and standard base64 of the key")
	}
	return k, nil
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
