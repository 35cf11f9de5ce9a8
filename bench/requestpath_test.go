package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// BenchmarkRequestPath serves the submit and the apply of a prepared draft
// request in the test's process, without a socket, through the record
// host's handler, with the tengo and with the WebAssembly planner of the
// requests report (TestChangeRequestReport), so that -benchmem shows what
// the host allocates per request; the drafts are created before the timer
// starts. Each iteration is one submit and one apply, whose time is
// dominated by their round trips to PostgreSQL:
//
//	go test -run '^$' -bench BenchmarkRequestPath -benchmem ./bench/
func BenchmarkRequestPath(b *testing.B) {
	is, auth := hosttest.TokenIssuer(b)
	dsn := storetest.NewDatabase(b)
	h, _ := hosttest.Serve(b, hosttest.Deployment(b, requestPerfProject(b), dsn, auth))
	handler := h.Handler()
	token := "Bearer " + is.Token(b, issuertest.StandardClientID)
	post := func(b *testing.B, path, body string, want int, hdr ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Authorization", token)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec
	}
	var n int
	for _, route := range []string{"item-requests", "item-requests-wasm"} {
		b.Run(route, func(b *testing.B) {
			type draft struct{ loc, etag string }
			drafts := make([]draft, b.N)
			for i := range drafts {
				n++
				rec := post(b, "/v1/records/"+route, fmt.Sprintf(`{"data":{"code":"p-%d","amount":%d}}`, n, n), http.StatusCreated)
				loc := rec.Header().Get("Location")
				drafts[i] = draft{loc[strings.Index(loc, "/v1/"):], rec.Header().Get("ETag")}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for _, d := range drafts {
				sub := post(b, d.loc+"/actions/submit", `{"actorReference":"bench"}`, http.StatusOK,
					"If-Match", d.etag, "Idempotency-Key", uuid.NewString())
				var answer struct {
					Request struct {
						EffectDigest string `json:"effectDigest"`
					} `json:"request"`
				}
				if err := json.Unmarshal(sub.Body.Bytes(), &answer); err != nil || answer.Request.EffectDigest == "" {
					b.Fatalf("submit answered %s", sub.Body)
				}
				post(b, d.loc+"/actions/apply", applyBody(answer.Request.EffectDigest), http.StatusOK,
					"If-Match", sub.Header().Get("ETag"), "Idempotency-Key", uuid.NewString())
			}
		})
	}
}
