package verifier

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"net/http"
	"strings"

	"github.com/registrum/registrum/plugins/verifier/proto"
)

// HTTPHandler serves v as a scanner of the host's http verifier kind
// (docs/verifiers.md): a POST of the exact bytes with Content-Type (the
// media type), Content-Length, X-Content-Sha256 (64 lowercase hex) and
// "Authorization: Bearer <credential>", answered 200 with exactly
// {"verdict":"approved"} or {"verdict":"rejected"}.
//
// credential returns the expected bearer credential; it is called on every
// request (so the secret can be rotated in place) and compared in constant
// time. A missing or wrong credential answers 401, a malformed request 400 or
// 413 (at most maxBytes, capped at 16 MiB), and everything that is not a
// verdict — an error, a panic or a retry from Verify, bytes that do not match
// the declared size or sha256 — answers 503, which the host treats as a
// retry. The bytes are streamed to Verify, never buffered whole; the verdict
// is sent only once all of them have been read and checked. Verify sees an
// Attachment with an empty SlotID: the http kind does not carry the slot.
func HTTPHandler(v Verifier, credential func() ([]byte, error), maxBytes int64) http.Handler {
	if maxBytes <= 0 || maxBytes > proto.MaxContentBytes {
		maxBytes = proto.MaxContentBytes
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		want, err := credential()
		got, hasBearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if err != nil || len(want) == 0 || !hasBearer || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		att := Attachment{MediaType: r.Header.Get("Content-Type"), DeclaredSize: r.ContentLength, SHA256: r.Header.Get("X-Content-Sha256")}
		if att.DeclaredSize > maxBytes {
			http.Error(w, "content too large", http.StatusRequestEntityTooLarge)
			return
		}
		probe := att
		probe.SlotID = "http" // the http kind carries no slot; everything else is checked
		if err := probe.Validate(maxBytes); err != nil {
			http.Error(w, "malformed request", http.StatusBadRequest)
			return
		}
		sum, seen := sha256.New(), new(counter)
		body := io.TeeReader(io.LimitReader(r.Body, att.DeclaredSize+1), io.MultiWriter(sum, seen))
		verdict, ok := verifyHTTP(r.Context(), v, att, io.LimitReader(body, att.DeclaredSize))
		// The verdict counts only for exactly the declared bytes: read what
		// Verify left (one byte more than declared is enough to refuse).
		_, err = io.Copy(io.Discard, body)
		if !ok || err != nil || int64(*seen) != att.DeclaredSize || hex.EncodeToString(sum.Sum(nil)) != att.SHA256 {
			http.Error(w, "no verdict", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = io.WriteString(w, `{"verdict":"`+string(verdict.Outcome)+`"}`)
	})
}

// counter counts the bytes written to it.
type counter int64

func (c *counter) Write(p []byte) (int, error) {
	*c += counter(len(p))
	return len(p), nil
}

// verifyHTTP calls v, turning an error, a panic, a retry or a malformed
// verdict into no verdict.
func verifyHTTP(ctx context.Context, v Verifier, att Attachment, content io.Reader) (verdict Verdict, ok bool) {
	defer func() {
		if recover() != nil {
			verdict, ok = Verdict{}, false
		}
	}()
	verdict, err := v.Verify(ctx, att, content)
	if err != nil || !verdict.Valid() || verdict.Outcome == Retry {
		return Verdict{}, false
	}
	return verdict, true
}
