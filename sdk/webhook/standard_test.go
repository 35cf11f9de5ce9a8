package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The known answer of the Standard Webhooks reference library
// (standard-webhooks/standard-webhooks, libraries/go/webhook_test.go,
// TestSign).
func TestExpectedStandardMatchesTheReferenceLibrary(t *testing.T) {
	key, err := DecodeSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"test": 2432232314}`)
	want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	if got := ExpectedStandard(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body); got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
	// Several entries, another version among them: the v1 one verifies.
	ts, err := VerifyStandard([][]byte{key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "v1a,AAAA v1,bm90IHRoaXM= "+want, body)
	if err != nil || ts.Unix() != 1614265330 {
		t.Fatalf("VerifyStandard: %v %v", ts, err)
	}
	for name, tc := range map[string][2]string{
		"signed timestamp changed": {"1614265331", want},
		"timestamp with a sign":    {"+1614265330", want},
		"timestamp with a zero":    {"01614265330", want},
		"v1a only":                 {"1614265330", "v1a," + strings.TrimPrefix(want, "v1,")},
		"no entry":                 {"1614265330", ""},
	} {
		if _, err := VerifyStandard([][]byte{key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", tc[0], tc[1], body); !errors.Is(err, ErrRejected) {
			t.Errorf("%s: %v, want a rejection", name, err)
		}
	}
	if EncodeSecret(key) != "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" {
		t.Fatalf("EncodeSecret %q", EncodeSecret(key))
	}
	if _, err := DecodeSecret("whsec_not base64!"); err == nil || strings.Contains(err.Error(), "not base64!") {
		t.Fatalf("DecodeSecret of a bad secret: %v (it must fail and never repeat the secret)", err)
	}
}

// rotation is a delivery as the host sends it during a key rotation, built
// here from the protocol: X-Registry-Signature under the new key only;
// webhook-signature under the new key, then the old one.
type rotation struct {
	v            vector
	oldKey       []byte
	newKey       []byte
	deliveryTime time.Time
}

func newRotation(t *testing.T) rotation {
	v := vectors(t)[1]
	dt, err := time.Parse(timeLayout, v.Headers["X-Registry-Delivery-Time"])
	if err != nil {
		t.Fatal(err)
	}
	return rotation{v: v, oldKey: bytes.Repeat([]byte("old-"), 8), newKey: []byte("the new key, 40 bytes, kept as is:  \t \n"), deliveryTime: dt}
}

// standardEntry is HMAC-SHA-256 of "<id>.<timestamp>.<body>" in base64,
// written from the Standard Webhooks specification.
func standardEntry(key []byte, id, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// request returns the delivery; edit may change its headers before the
// signatures are made, and its body.
func (rt rotation) request(edit func(h http.Header, body *[]byte)) *http.Request {
	h := http.Header{}
	for k, val := range rt.v.Headers {
		h.Set(k, val)
	}
	body := []byte(rt.v.Body)
	id, ts := h.Get("Ce-Id"), strconv.FormatInt(rt.deliveryTime.Unix(), 10)
	h.Set("Webhook-Id", id)
	h.Set("Webhook-Timestamp", ts)
	if edit != nil {
		edit(h, &body)
		id, ts = h.Get("Webhook-Id"), h.Get("Webhook-Timestamp")
	}
	h.Set("X-Registry-Signature", Expected(rt.newKey, h, http.MethodPost, rt.v.Path, []byte(rt.v.Body)))
	if h.Get("Webhook-Signature") == "" {
		h.Set("Webhook-Signature", standardEntry(rt.newKey, id, ts, []byte(rt.v.Body))+" "+standardEntry(rt.oldKey, id, ts, []byte(rt.v.Body)))
	}
	r := httptest.NewRequest(http.MethodPost, rt.v.Path, bytes.NewReader(body))
	r.Header = h
	return r
}

// serveVerifier runs ver behind a real HTTP server and returns a function
// that sends r to it and reports what Verify returned.
func serveVerifier(t *testing.T, ver *Verifier) func(r *http.Request) (*Delivery, error) {
	type result struct {
		d   *Delivery
		err error
	}
	out := make(chan result, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := ver.Verify(r)
		out <- result{d, err}
		if err != nil {
			http.Error(w, "rejected", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return func(r *http.Request) (*Delivery, error) {
		t.Helper()
		req, err := http.NewRequest(r.Method, srv.URL+r.URL.Path, r.Body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = r.Header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		res := <-out
		if (res.err == nil) != (resp.StatusCode == http.StatusNoContent) {
			t.Fatalf("status %d for %v", resp.StatusCode, res.err)
		}
		return res.d, res.err
	}
}

func (rt rotation) verifier(key, previous []byte) *Verifier {
	return &Verifier{Key: key, PreviousKey: previous, Path: rt.v.Path, Source: rt.v.Headers["ce-source"],
		Types: map[string]string{rt.v.Headers["ce-type"]: rt.v.Headers["ce-dataschema"]}, MaxSkew: time.Minute,
		Now: func() time.Time { return rt.deliveryTime.Add(30 * time.Second) }}
}

// During a rotation a receiver configured with the old key, the new key or
// both accepts the delivery: the new key through X-Registry-Signature (every
// header covered), the old one through webhook-signature (id, timestamp and
// body covered; the fields it does not cover are left zero).
func TestAReceiverWithEitherKeyAcceptsADeliveryDuringARotation(t *testing.T) {
	rt := newRotation(t)
	for _, tc := range []struct {
		name      string
		key, prev []byte
		scheme    string
	}{
		{"the new key", rt.newKey, nil, SchemeRegistry},
		{"the old key", rt.oldKey, nil, SchemeStandard},
		{"the old key, the new one as previous", rt.oldKey, rt.newKey, SchemeRegistry},
		{"the new key, the old one as previous", rt.newKey, rt.oldKey, SchemeRegistry},
	} {
		send := serveVerifier(t, rt.verifier(tc.key, tc.prev))
		d, err := send(rt.request(nil))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if d.Scheme != tc.scheme || d.ID != rt.v.Headers["ce-id"] || d.Event.ID != d.ID || string(d.Body) != rt.v.Body {
			t.Fatalf("%s: scheme %s (want %s), id %s", tc.name, d.Scheme, tc.scheme, d.ID)
		}
		switch d.Scheme {
		case SchemeRegistry:
			if d.Generation != 1 || d.Attempt != 3 || d.IdempotencyKey != rt.v.Headers["Idempotency-Key"] || !d.DeliveryTime.Equal(rt.deliveryTime) {
				t.Fatalf("%s: registry fields %d %d %s %v", tc.name, d.Generation, d.Attempt, d.IdempotencyKey, d.DeliveryTime)
			}
		case SchemeStandard:
			if d.Generation != 0 || d.Attempt != 0 || d.IdempotencyKey != "" || d.DeliveryTime.Unix() != rt.deliveryTime.Unix() {
				t.Fatalf("%s: fields the standard signature does not cover must be zero: %d %d %q %v", tc.name, d.Generation, d.Attempt, d.IdempotencyKey, d.DeliveryTime)
			}
		}
	}
	// Before the rotation the sender signed with the old key alone; a
	// receiver already moved to the new key keeps the old as previous.
	before := rt
	before.newKey = rt.oldKey
	r := before.request(func(h http.Header, _ *[]byte) {
		h.Set("Webhook-Signature", standardEntry(rt.oldKey, h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), []byte(rt.v.Body)))
	})
	if d, err := serveVerifier(t, rt.verifier(rt.newKey, rt.oldKey))(r); err != nil || d.Scheme != SchemeRegistry {
		t.Fatalf("a pre-rotation delivery under the previous key: %v %v", d != nil && d.Scheme == SchemeRegistry, err)
	}
}

// What the Standard Webhooks path refuses: each case breaks one rule for a
// receiver holding only the old key (so X-Registry-Signature never
// verifies and webhook-signature decides).
func TestTheStandardSchemeRefusesEveryAlteration(t *testing.T) {
	rt := newRotation(t)
	stale := strconv.FormatInt(rt.deliveryTime.Add(-2*time.Minute).Unix(), 10)
	cases := map[string]struct {
		edit func(h http.Header, body *[]byte)
		ver  *Verifier
	}{
		"an unrelated key": {nil, rt.verifier(bytes.Repeat([]byte{1}, 32), nil)},
		"a changed body": {func(_ http.Header, b *[]byte) {
			*b = bytes.Replace(*b, []byte(`"revision":1`), []byte(`"revision":2`), 1)
		}, nil},
		"a webhook-id other than the event id": {func(h http.Header, _ *[]byte) { h.Set("Webhook-Id", "another-id") }, nil},
		"a timestamp outside the skew":         {func(h http.Header, _ *[]byte) { h.Set("Webhook-Timestamp", stale) }, nil},
		"a timestamp that is not decimal":      {func(h http.Header, _ *[]byte) { h.Set("Webhook-Timestamp", "1e9") }, nil},
		"only another version's entry": {func(h http.Header, _ *[]byte) {
			h.Set("Webhook-Signature", "v1a,"+strings.TrimPrefix(standardEntry(rt.oldKey, h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), []byte(rt.v.Body)), "v1,"))
		}, nil},
		"a repeated webhook-signature": {func(h http.Header, _ *[]byte) {
			e := standardEntry(rt.oldKey, h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), []byte(rt.v.Body))
			h["Webhook-Signature"] = []string{e, e}
		}, nil},
		"no webhook-signature": {func(h http.Header, _ *[]byte) { h.Set("Webhook-Signature", "v1,") }, nil},
		"too many entries": {func(h http.Header, _ *[]byte) {
			h.Set("Webhook-Signature", strings.Repeat("v1,AAAA ", 16)+standardEntry(rt.oldKey, h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), []byte(rt.v.Body)))
		}, nil},
	}
	for name, tc := range cases {
		ver := tc.ver
		if ver == nil {
			ver = rt.verifier(rt.oldKey, nil)
		}
		if _, err := serveVerifier(t, ver)(rt.request(tc.edit)); !errors.Is(err, ErrRejected) {
			t.Errorf("%s: got %v, want a rejection", name, err)
		}
	}
	// The same request unaltered is accepted: the cases above fail for
	// their one reason.
	if _, err := serveVerifier(t, rt.verifier(rt.oldKey, nil))(rt.request(nil)); err != nil {
		t.Fatal(err)
	}
}
