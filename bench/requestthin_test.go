package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// thinHost is the thinnest HTTP host of the floor's requests: a net/http
// server (httptest, as the report serves the record host) whose two routes
// each run one transaction of the database floor, submit or apply, on a
// connection of the floor's, and answer the record host's action response
// of the same size. It reads the body and nothing more: no token check, no
// parsing, no reads, no locks, no planner, no snapshot. Any host adds at
// least these two HTTP exchanges to the floor, so its rate bounds every
// host's from above.
type thinHost struct {
	f     *requestFloor
	conns chan *pgx.Conn
	// submitted are the drafts submitted and not yet applied, by id.
	submitted sync.Map
	srv       *httptest.Server
	client    *benchClient
}

// newThinHost serves the floor f's transactions over HTTP, with the floor's
// connections as its pool, and a client built as the record host's (c).
func newThinHost(f *requestFloor, c *benchClient) *thinHost {
	h := &thinHost{f: f, conns: make(chan *pgx.Conn, len(f.conns))}
	for _, conn := range f.conns {
		h.conns <- conn
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /submit", h.submit)
	mux.HandleFunc("POST /apply/{id}", h.apply)
	h.srv = httptest.NewServer(mux)
	h.client = &benchClient{base: h.srv.URL, token: c.token, http: c.http}
	return h
}

func (h *thinHost) close() { h.srv.Close() }

// submit runs the floor's submit of the next prepared draft and answers
// where to apply it.
func (h *thinHost) submit(w http.ResponseWriter, r *http.Request) {
	d, err := h.f.nextDraft()
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if h.run(w, r, d, h.f.submit) {
		h.submitted.Store(d.id, d)
		w.Header().Set("Location", "/apply/"+d.id)
		h.answer(w, h.f.host.submitOutcome.Body)
	}
}

// apply runs the floor's apply of a submitted draft.
func (h *thinHost) apply(w http.ResponseWriter, r *http.Request) {
	v, ok := h.submitted.LoadAndDelete(r.PathValue("id"))
	if !ok {
		http.Error(w, "no such submitted draft", http.StatusNotFound)
		return
	}
	d := v.(*floorDraft)
	if h.run(w, r, d, h.f.apply) {
		h.f.sample.CompareAndSwap(nil, &d.id)
		h.answer(w, h.f.host.applyOutcome.Body)
	}
}

// run reads the body, then runs tx on d with a connection of the pool; it
// answers the failure and reports false when either fails.
func (h *thinHost) run(w http.ResponseWriter, r *http.Request, d *floorDraft, tx func(context.Context, *pgx.Conn, *floorDraft) error) bool {
	if _, err := io.ReadAll(io.LimitReader(r.Body, 64<<10)); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	conn := <-h.conns
	err := tx(r.Context(), conn, d)
	h.conns <- conn
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return false
	}
	return true
}

// answer writes a 200 with body and a validator shaped as the host's.
func (h *thinHost) answer(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", `"engine-hmac-sha256:`+floorHex(32)+`"`)
	w.Write(body)
}

// request is one client's submit and apply through the thin host, with the
// headers and bodies the report's client sends the record host.
func (h *thinHost) request() error {
	hdr, _, err := h.client.post("/submit", `{"actorReference":"bench"}`, http.StatusOK,
		"If-Match", `"engine-hmac-sha256:`+floorHex(32)+`"`, "Idempotency-Key", uuid.NewString())
	if err != nil {
		return err
	}
	_, _, err = h.client.post(hdr.Get("Location"), applyBody(h.f.host.effectDigest), http.StatusOK,
		"If-Match", hdr.Get("ETag"), "Idempotency-Key", uuid.NewString())
	return err
}
