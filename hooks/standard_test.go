package hooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/registrum/registrum/store"
)

// The known answer of the Standard Webhooks reference library
// (standard-webhooks/standard-webhooks, libraries/go/webhook_test.go,
// TestSign): secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, that message id,
// timestamp and payload.
func TestStandardSignatureMatchesTheReferenceLibrary(t *testing.T) {
	key, err := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := StandardSignature(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
	if s := string(StandardSigningInput("msg_1", 1614265330, []byte("{}"))); s != "msg_1.1614265330.{}" {
		t.Fatalf("signing input %q", s)
	}
	two := StandardSignatures([][]byte{key, []byte("other")}, "m", 1, []byte("b"))
	if parts := strings.Split(two, " "); len(parts) != 2 || parts[0] != StandardSignature(key, "m", 1, []byte("b")) ||
		parts[1] != StandardSignature([]byte("other"), "m", 1, []byte("b")) {
		t.Fatalf("two signatures: %q", two)
	}
}

// received is one request as an httptest receiver saw it.
type received struct {
	header http.Header
	path   string
	body   []byte
}

// recorder is a real HTTP receiver that keeps every request and answers
// 204.
type recorder struct {
	mu  sync.Mutex
	got []received
	srv *httptest.Server
}

func newRecorder(t *testing.T) *recorder {
	rc := &recorder{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{header: r.Header.Clone(), path: r.URL.Path, body: b})
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *recorder) last(t *testing.T) received {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.got) == 0 {
		t.Fatal("the receiver got nothing")
	}
	return rc.got[len(rc.got)-1]
}

// standardVerifies is a Standard Webhooks v1 check written from the
// specification, apart from the sender: HMAC-SHA-256 of
// "<webhook-id>.<webhook-timestamp>.<body>" under key, base64, compared in
// constant time with each space-separated "v1," entry.
func standardVerifies(key []byte, r received) bool {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(r.header.Get("Webhook-Id") + "." + r.header.Get("Webhook-Timestamp") + "."))
	m.Write(r.body)
	want := []byte("v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)))
	for _, e := range strings.Split(r.header.Get("Webhook-Signature"), " ") {
		if hmac.Equal(want, []byte(e)) {
			return true
		}
	}
	return false
}

// seedHeaders are the seed's headers of every delivery (Events, "Delivery
// request"), as Go writes their names.
var seedHeaders = []string{"Ce-Specversion", "Ce-Id", "Ce-Source", "Ce-Type", "Ce-Time", "Ce-Dataschema", "X-Registry-Event-Generation",
	"X-Registry-Delivery-Attempt", "X-Registry-Delivery-Time", "Idempotency-Key", "X-Registry-Signature", "Content-Type"}

// A delivery carries the seed's headers exactly as before and the Standard
// Webhooks headers beside them: webhook-id the event id (the same on a
// retry), webhook-timestamp the attempt's delivery time, webhook-signature
// one entry per key. During a rotation both keys sign webhook-signature and
// the current key alone signs X-Registry-Signature; once the old key is
// retired its entry is gone.
func TestDeliveriesCarryStandardWebhooksSignaturesUnderEveryKey(t *testing.T) {
	rc := newRecorder(t)
	d := newDestination("crm")
	d.URL, _ = url.Parse(rc.srv.URL + "/registry/crm")
	d.Network = NetworkLoopback
	oldKey := bytes.Repeat([]byte{7}, MinKeyBytes)
	newKey := []byte("a new key of 40 bytes, kept as is:  \t \n")
	d.Key, d.PreviousKey = newKey, oldKey
	ev, err := New(configFor(eventsPackage(urlHook("person-created", "crm")), d))
	if err != nil {
		t.Fatal(err)
	}
	eventID := uuid.NewString()
	payload := []byte(`{"causation":{"hop":0,"root":"` + eventID + `"},"data":{"name":"Ada"},"dataschema":"urn:test:event:person:person-created","id":"` + eventID +
		`","source":"urn:engine:registry:test:instance:host-1","subject":{"recordReference":"ref:person:1","recordRevision":1},"time":"2025-03-01T12:00:00.000Z","type":"person-created-v1"}`)
	l := &store.Lease{Delivery: &store.Delivery{DeliveryID: uuid.NewString(), EventID: eventID, HookID: "person-created",
		HandlerKind: "url", DestinationID: "crm", BindingDigest: d.BindingDigest(), Generation: 1, Attempt: 1, AttemptTimeoutMs: 5000,
		Payload: payload, PayloadDigest: "sha256:p"}, DeliveryTime: time.Date(2025, 3, 1, 12, 0, 1, 999e6, time.UTC)}

	if res := ev.attempt(context.Background(), l); !res.Delivered {
		t.Fatalf("attempt: %+v", res)
	}
	r := rc.last(t)
	var names []string
	for name, vals := range r.header {
		if len(vals) != 1 {
			t.Fatalf("header %s sent %d times", name, len(vals))
		}
		names = append(names, name)
	}
	want := append(slices.Clone(seedHeaders), "Webhook-Id", "Webhook-Timestamp", "Webhook-Signature", "User-Agent", "Content-Length", "Accept-Encoding")
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("headers %v, want %v", names, want)
	}
	// The seed's signature is unchanged: the current key, one value.
	env := Envelope{ID: eventID, Source: "urn:engine:registry:test:instance:host-1", Type: "person-created-v1", Time: "2025-03-01T12:00:00.000Z",
		DataSchema: "urn:test:event:person:person-created", Generation: 1, Attempt: 1, DeliveryTime: "2025-03-01T12:00:01.999Z", Path: "/registry/crm",
		IdempotencyKey: r.header.Get("Idempotency-Key")}
	if got := r.header.Get("X-Registry-Signature"); got != Sign(newKey, env, payload) || got == Sign(oldKey, env, payload) {
		t.Fatalf("X-Registry-Signature %q is not the current key's signature", got)
	}
	if r.header.Get("X-Registry-Delivery-Time") != "2025-03-01T12:00:01.999Z" {
		t.Fatalf("X-Registry-Delivery-Time %q", r.header.Get("X-Registry-Delivery-Time"))
	}
	if r.header.Get("Webhook-Id") != eventID || r.header.Get("Webhook-Timestamp") != strconv.FormatInt(l.DeliveryTime.Unix(), 10) {
		t.Fatalf("webhook-id %q, webhook-timestamp %q", r.header.Get("Webhook-Id"), r.header.Get("Webhook-Timestamp"))
	}
	if !bytes.Equal(r.body, payload) {
		t.Fatal("the body is not the captured bytes")
	}
	sigs := strings.Split(r.header.Get("Webhook-Signature"), " ")
	if len(sigs) != 2 || !strings.HasPrefix(sigs[0], "v1,") || !strings.HasPrefix(sigs[1], "v1,") {
		t.Fatalf("webhook-signature %q: want two v1 entries", r.header.Get("Webhook-Signature"))
	}
	for name, k := range map[string][]byte{"current": newKey, "previous": oldKey} {
		if !standardVerifies(k, r) {
			t.Fatalf("the %s key does not verify webhook-signature", name)
		}
	}
	if standardVerifies(bytes.Repeat([]byte{8}, MinKeyBytes), r) {
		t.Fatal("an unrelated key verifies")
	}
	tampered := r
	tampered.body = append(bytes.Clone(r.body[:len(r.body)-1]), ' ', '}')
	if standardVerifies(newKey, tampered) {
		t.Fatal("a changed body verifies")
	}

	// A retry of the same generation: the same webhook-id, its own time.
	l.Attempt, l.DeliveryTime = 2, l.DeliveryTime.Add(7*time.Second)
	if res := ev.attempt(context.Background(), l); !res.Delivered {
		t.Fatalf("retry: %+v", res)
	}
	r2 := rc.last(t)
	if r2.header.Get("Webhook-Id") != eventID || r2.header.Get("Webhook-Timestamp") != strconv.FormatInt(l.DeliveryTime.Unix(), 10) ||
		r2.header.Get("Idempotency-Key") != r.header.Get("Idempotency-Key") || !standardVerifies(oldKey, r2) {
		t.Fatalf("retry headers %v", r2.header)
	}

	// The old key retired: one entry, the current key's.
	d.PreviousKey = nil
	l.Attempt = 3
	if res := ev.attempt(context.Background(), l); !res.Delivered {
		t.Fatalf("after retirement: %+v", res)
	}
	r3 := rc.last(t)
	if n := len(strings.Split(r3.header.Get("Webhook-Signature"), " ")); n != 1 || !standardVerifies(newKey, r3) || standardVerifies(oldKey, r3) {
		t.Fatalf("after retirement webhook-signature %q", r3.header.Get("Webhook-Signature"))
	}
}

// New refuses a previous key it could not sign with, and one that is the
// current key again.
func TestNewRefusesAPreviousKeyThatIsShortOrTheCurrentOne(t *testing.T) {
	for name, tc := range map[string]struct {
		prev []byte
		want string
	}{
		"short":       {bytes.Repeat([]byte{9}, MinKeyBytes-1), "the previous signing key must hold at least 32 bytes"},
		"the current": {bytes.Repeat([]byte{7}, MinKeyBytes), "the previous signing key is the current one"},
	} {
		d := newDestination("crm")
		d.PreviousKey = tc.prev
		if _, err := New(configFor(eventsPackage(urlHook("person-created", "crm")), d)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	d := newDestination("crm")
	d.PreviousKey = bytes.Repeat([]byte{9}, MinKeyBytes)
	if _, err := New(configFor(eventsPackage(urlHook("person-created", "crm")), d)); err != nil {
		t.Fatalf("a distinct previous key of %d bytes: %v", MinKeyBytes, err)
	}
}
