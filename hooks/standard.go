package hooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
)

// Standard Webhooks (https://github.com/standard-webhooks/standard-webhooks,
// spec/standard-webhooks.md) headers, sent on every delivery beside the
// seed's own. The seed's headers, X-Registry-Signature included, are not
// changed by them.
const (
	// HeaderWebhookID is the message id: the event id (ce-id), the same on
	// every attempt and every replay of the event.
	HeaderWebhookID = "Webhook-Id"
	// HeaderWebhookTimestamp is the attempt's delivery time
	// (X-Registry-Delivery-Time) in whole seconds since the Unix epoch.
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	// HeaderWebhookSignature is the space-separated list of "v1,<base64>"
	// signatures, one per key the destination holds, the current key first.
	HeaderWebhookSignature = "Webhook-Signature"
	// StandardSignatureVersion is the symmetric (HMAC-SHA-256) scheme's
	// identifier.
	StandardSignatureVersion = "v1"
)

// StandardSigningInput returns what a Standard Webhooks signature covers:
// the message id, ".", the decimal timestamp, "." and the exact body.
func StandardSigningInput(id string, timestamp int64, body []byte) []byte {
	ts := strconv.FormatInt(timestamp, 10)
	b := make([]byte, 0, len(id)+len(ts)+len(body)+2)
	b = append(b, id...)
	b = append(b, '.')
	b = append(b, ts...)
	b = append(b, '.')
	return append(b, body...)
}

// StandardSignature returns one Standard Webhooks signature entry: "v1,"
// and the padded standard base64 of the HMAC-SHA-256 of the signing input,
// keyed with key's exact bytes (the bytes a receiver's "whsec_" secret
// decodes to).
func StandardSignature(key []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(StandardSigningInput(id, timestamp, body))
	return StandardSignatureVersion + "," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// StandardSignatures returns the webhook-signature header value: one entry
// per key, in the order given, separated by single spaces.
func StandardSignatures(keys [][]byte, id string, timestamp int64, body []byte) string {
	entries := make([]string, 0, len(keys))
	for _, k := range keys {
		entries = append(entries, StandardSignature(k, id, timestamp, body))
	}
	return strings.Join(entries, " ")
}
