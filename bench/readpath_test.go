package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

// bareRead is the HTTP ceiling of a single-record read of e: the store's
// read (store.Store.Get) behind a bare net/http handler, without
// authentication, access decision, ETag or envelope, answering the
// record's values as JSON.
func bareRead(st *store.Store, e *model.Entity) http.Handler {
	prefix := "/v1/records/" + e.Route + "/"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, prefix)
		rec, err := st.Get(r.Context(), e, id)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": id, "revision": rec.Revision, "data": rec.Values})
	})
}

// BenchmarkReadPath serves one record's read in the test's process,
// without a socket: through the record host's handler (token, access
// decision, ETag, envelope) and through bareRead, so that -benchmem shows
// what the host's read adds per request in allocations (both share the
// store's read and its round trip to PostgreSQL, which dominate the time):
//
//	go test -run '^$' -bench BenchmarkReadPath -benchmem ./bench/
func BenchmarkReadPath(b *testing.B) {
	ctx := context.Background()
	is, auth := hosttest.TokenIssuer(b)
	dsn := storetest.NewDatabase(b)
	h, srv := hosttest.Serve(b, hosttest.Deployment(b, "testdata/perf", dsn, auth))
	token := is.Token(b, issuertest.StandardClientID)
	loc, _ := hosttest.Caller{URL: srv.URL, Token: token}.Create(b, "items", `{"code":"r-1","category":"c","amount":1}`)
	req := httptest.NewRequest("GET", loc[strings.Index(loc, "/v1/"):], nil)
	pool, err := store.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	st := storetest.Open(b, pool, h.Package())
	for _, c := range []struct {
		name    string
		handler http.Handler
		token   string
	}{{"host", h.Handler(), token}, {"bare", bareRead(st, h.Package().EntityByID("item")), ""}} {
		b.Run(c.name, func(b *testing.B) {
			req.Header.Set("Authorization", "Bearer "+c.token)
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				c.handler.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
