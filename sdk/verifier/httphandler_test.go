package verifier_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/registrum/registrum/sdk/verifier"
)

// wordScanner rejects content holding "virus", fails on "broken" and
// approves the rest, reading only as far as it needs.
type wordScanner struct{}

func (wordScanner) Verify(_ context.Context, att verifier.Attachment, content io.Reader) (verifier.Verdict, error) {
	b, err := io.ReadAll(content)
	switch {
	case err != nil || bytes.Contains(b, []byte("broken")):
		return verifier.Verdict{}, errors.New("scanner failed")
	case att.SlotID != "" || int64(len(b)) != att.DeclaredSize:
		return verifier.Verdict{}, errors.New("unexpected attachment")
	case bytes.Contains(b, []byte("virus")):
		return verifier.Reject(verifier.ReasonMalware), nil
	}
	return verifier.Approve(), nil
}

func attachmentFor(b []byte, mediaType string) verifier.Attachment {
	sum := sha256.Sum256(b)
	return verifier.Attachment{SlotID: "evidence", MediaType: mediaType, DeclaredSize: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
}

// TestHTTPHandlerSpeaksTheHTTPKind: verdicts as the host's http kind reads
// them, and every request that is not the protocol refused, sent by hand
// over real HTTP. (cmd/registrum/internal/dev's scanner test runs the
// host's own http verifier client against it.)
func TestHTTPHandlerSpeaksTheHTTPKind(t *testing.T) {
	srv := httptest.NewServer(verifier.HTTPHandler(wordScanner{}, func() ([]byte, error) { return []byte("tok"), nil }, 16))
	defer srv.Close()
	send := func(method, body, auth string, att verifier.Attachment) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL, strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		req.Header.Set("Content-Type", att.MediaType)
		req.Header.Set("X-Content-Sha256", att.SHA256)
		req.ContentLength = att.DeclaredSize
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := `{"verdict":"approved"}`
		if strings.Contains(body, "virus") {
			want = `{"verdict":"rejected"}`
		}
		if resp.StatusCode == 200 && string(b) != want {
			t.Errorf("answer %q, want %s", b, want)
		}
		return resp.StatusCode
	}
	exact := strings.Repeat("x", 16)
	ok := attachmentFor([]byte(exact), "text/plain")
	cases := []struct {
		name, method, body, auth string
		att                      verifier.Attachment
		want                     int
	}{
		{"exactly the limit", "POST", exact, "Bearer tok", ok, 200},
		{"a virus", "POST", "a virus inside", "Bearer tok", attachmentFor([]byte("a virus inside"), "text/plain"), 200},
		{"a failing scanner", "POST", "a broken file", "Bearer tok", attachmentFor([]byte("a broken file"), "text/plain"), 503},
		{"one byte over the limit", "POST", exact + "x", "Bearer tok", attachmentFor([]byte(exact+"x"), "text/plain"), 413},
		{"no credential", "POST", exact, "", ok, 401},
		{"another credential", "POST", exact, "Bearer toK", ok, 401},
		{"GET", "GET", "", "Bearer tok", verifier.Attachment{}, 405},
		{"bad digest", "POST", exact, "Bearer tok", verifier.Attachment{MediaType: "text/plain", DeclaredSize: 16, SHA256: strings.Repeat("0", 64)}, 503},
		{"no media type", "POST", exact, "Bearer tok", verifier.Attachment{DeclaredSize: 16, SHA256: ok.SHA256}, 400},
		{"empty", "POST", "", "Bearer tok", attachmentFor(nil, "text/plain"), 400},
	}
	for _, c := range cases {
		if got := send(c.method, c.body, c.auth, c.att); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
