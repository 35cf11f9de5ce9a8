package hooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"strconv"
)

// Wire constants of the webhook protocol (signature scheme v1).
const (
	// SpecVersion is the CloudEvents version of every delivery.
	SpecVersion = "1.0"
	// ContentType is the body's media type.
	ContentType = "application/json"
	// SignatureDomain starts the signing input.
	SignatureDomain = "engine-webhook-signature-v1"
	// IdempotencyDomain starts the input of an idempotency key.
	IdempotencyDomain = "engine-webhook-idempotency-v1"
	// MinKeyBytes is the shortest signing key.
	MinKeyBytes = 32
)

// Envelope is what one attempt's headers carry besides the body: the event
// identity (restated from the body) and the attempt's own values.
type Envelope struct {
	ID, Source, Type, Time, DataSchema string
	Generation, Attempt                int
	// DeliveryTime is X-Registry-Delivery-Time.
	DeliveryTime string
	// Path is the destination's configured request path.
	Path           string
	IdempotencyKey string
}

// appendLP appends v preceded by its length as an unsigned 64-bit
// big-endian integer.
func appendLP(b []byte, v []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(v)))
	return append(b, v...)
}

// SigningInput returns the bytes the signature covers: the domain, then
// each header value, the method, the path, the content type, the
// idempotency key and the exact body, each length-prefixed.
func SigningInput(e Envelope, body []byte) []byte {
	b := make([]byte, 0, len(SignatureDomain)+len(body)+512)
	b = append(b, SignatureDomain...)
	for _, v := range []string{SpecVersion, e.ID, e.Source, e.Type, e.Time, e.DataSchema,
		strconv.Itoa(e.Generation), strconv.Itoa(e.Attempt), e.DeliveryTime, "POST", e.Path, ContentType, e.IdempotencyKey} {
		b = appendLP(b, []byte(v))
	}
	return appendLP(b, body)
}

// Sign returns X-Registry-Signature: "v1=" and the unpadded base64url
// HMAC-SHA-256 of the signing input, keyed with key's exact bytes.
func Sign(key []byte, e Envelope, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(SigningInput(e, body))
	return "v1=" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// IdempotencyKey returns the Idempotency-Key of one delivery generation:
// "sha256:" and the hex SHA-256 of the domain and the length-prefixed event
// id, delivery id, generation, payload digest and destination binding
// digest. Retries of a generation share it; a replay's generation has its
// own.
func IdempotencyKey(eventID, deliveryID string, generation int, payloadDigest, bindingDigest string) string {
	b := []byte(IdempotencyDomain)
	for _, v := range []string{eventID, deliveryID, strconv.Itoa(generation), payloadDigest, bindingDigest} {
		b = appendLP(b, []byte(v))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
