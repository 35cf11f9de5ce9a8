package webhook

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

type vector struct {
	Name      string            `json:"name"`
	KeyBase64 string            `json:"keyBase64"`
	Path      string            `json:"path"`
	Headers   map[string]string `json:"headers"`
	Body      string            `json:"body"`
	Signature string            `json:"signature"`
}

func vectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Vectors []vector }
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Vectors
}

func request(v vector) *http.Request {
	r := httptest.NewRequest(http.MethodPost, v.Path, strings.NewReader(v.Body))
	for k, val := range v.Headers {
		r.Header.Set(k, val)
	}
	r.Header.Set("X-Registry-Signature", v.Signature)
	return r
}

func verifier(t *testing.T, v vector) *Verifier {
	key, err := base64.StdEncoding.DecodeString(v.KeyBase64)
	if err != nil {
		t.Fatal(err)
	}
	dt, _ := time.Parse(timeLayout, v.Headers["X-Registry-Delivery-Time"])
	return &Verifier{Key: key, Path: v.Path, Source: v.Headers["ce-source"],
		Types:   map[string]string{v.Headers["ce-type"]: v.Headers["ce-dataschema"]},
		MaxSkew: time.Minute, Now: func() time.Time { return dt.Add(30 * time.Second) }}
}

func TestVerifierAcceptsTheKnownAnswerVectors(t *testing.T) {
	for _, v := range vectors(t) {
		d, err := verifier(t, v).Verify(request(v))
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if d.Event.ID != v.Headers["ce-id"] || string(d.Body) != v.Body {
			t.Fatalf("%s: delivery %+v", v.Name, d)
		}
	}
}

func TestVerifierRefusesEveryAlteration(t *testing.T) {
	v := vectors(t)[1]
	cases := map[string]func(r *http.Request, ver *Verifier){
		"signature":          func(r *http.Request, _ *Verifier) { r.Header.Set("X-Registry-Signature", "v1=AAAA") },
		"trimmed key":        func(_ *http.Request, ver *Verifier) { ver.Key = []byte(strings.TrimSpace(string(ver.Key))) },
		"attempt":            func(r *http.Request, _ *Verifier) { r.Header.Set("X-Registry-Delivery-Attempt", "4") },
		"idempotency key":    func(r *http.Request, _ *Verifier) { r.Header.Set("Idempotency-Key", "sha256:00") },
		"path":               func(_ *http.Request, ver *Verifier) { ver.Path = "/other" },
		"source":             func(_ *http.Request, ver *Verifier) { ver.Source = "urn:engine:registry:x:instance:y" },
		"schema":             func(_ *http.Request, ver *Verifier) { ver.Types = map[string]string{v.Headers["ce-type"]: "urn:other"} },
		"skew":               func(_ *http.Request, ver *Verifier) { ver.Now = func() time.Time { return time.Now() } },
		"duplicated header":  func(r *http.Request, _ *Verifier) { r.Header.Add("Ce-Id", "x") },
		"missing generation": func(r *http.Request, _ *Verifier) { r.Header.Del("X-Registry-Event-Generation") },
	}
	for name, alter := range cases {
		r, ver := request(v), verifier(t, v)
		alter(r, ver)
		if _, err := ver.Verify(r); !errors.Is(err, ErrRejected) {
			t.Errorf("%s: got %v, want a rejection", name, err)
		}
	}
}

func TestDeduplicatorKeysOnSourceAndID(t *testing.T) {
	var x Deduplicator
	a := &Delivery{Source: "urn:a", ID: "1", Generation: 1, IdempotencyKey: "k1"}
	if !x.First(a) {
		t.Fatal("first delivery not first")
	}
	replay := &Delivery{Source: "urn:a", ID: "1", Generation: 2, IdempotencyKey: "k2"}
	if x.First(replay) {
		t.Fatal("a replay of a handled event must be recognised")
	}
	if !x.First(&Delivery{Source: "urn:b", ID: "1"}) {
		t.Fatal("the same id from another source is another event")
	}
}
