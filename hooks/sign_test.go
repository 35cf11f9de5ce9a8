package hooks

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"testing"
)

// The sender's signature and idempotency key match the known-answer
// vectors the receiver SDK is tested against (computed apart from both).
func TestSenderMatchesTheKnownAnswerVectors(t *testing.T) {
	b, err := os.ReadFile("../sdk/webhook/testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Vectors []struct {
			Name            string
			KeyBase64       string
			Path            string
			Headers         map[string]string
			Body            string
			SigningInputHex string
			Signature       string
			Idempotency     struct {
				EventID, DeliveryID, PayloadDigest, BindingDigest, Key string
				Generation                                             int
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Vectors) < 3 {
		t.Fatal("too few vectors")
	}
	for _, v := range doc.Vectors {
		key, _ := base64.StdEncoding.DecodeString(v.KeyBase64)
		h := v.Headers
		gen, _ := strconv.Atoi(h["X-Registry-Event-Generation"])
		att, _ := strconv.Atoi(h["X-Registry-Delivery-Attempt"])
		i := v.Idempotency
		k := IdempotencyKey(i.EventID, i.DeliveryID, i.Generation, i.PayloadDigest, i.BindingDigest)
		if k != i.Key || k != h["Idempotency-Key"] {
			t.Fatalf("%s: idempotency key %s, want %s", v.Name, k, i.Key)
		}
		env := Envelope{ID: h["ce-id"], Source: h["ce-source"], Type: h["ce-type"], Time: h["ce-time"], DataSchema: h["ce-dataschema"],
			Generation: gen, Attempt: att, DeliveryTime: h["X-Registry-Delivery-Time"], Path: v.Path, IdempotencyKey: k}
		if got := hex.EncodeToString(SigningInput(env, []byte(v.Body))); got != v.SigningInputHex {
			t.Fatalf("%s: signing input differs", v.Name)
		}
		if got := Sign(key, env, []byte(v.Body)); got != v.Signature {
			t.Fatalf("%s: signature %s, want %s", v.Name, got, v.Signature)
		}
	}
}
