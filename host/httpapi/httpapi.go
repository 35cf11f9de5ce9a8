// Package httpapi is the record host's HTTP edge: routing, request parsing,
// content negotiation, headers and problem documents. It turns requests into
// calls of the core services and their results or refusals into responses.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/actions"
	"github.com/registrum/registrum/host/auth"
	"github.com/registrum/registrum/host/gis"
	"github.com/registrum/registrum/host/history"
	"github.com/registrum/registrum/host/ingest"
	"github.com/registrum/registrum/host/metadata"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/host/requests"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
)

// DefaultMaximumBodyBytes bounds a write body when the entity sets no bound.
const DefaultMaximumBodyBytes = 1 << 20

// Options configure the edge.
type Options struct {
	// Records is the record kernel. Required.
	Records *records.Service
	// GIS is the spatial adapter; nil serves no /v1/gis routes.
	GIS *gis.Service
	// History serves the revision, temporal and snapshot reads. Required.
	History *history.Service
	// Actions serves the immediate actions; nil serves no /v1/actions routes.
	Actions *actions.Service
	// Ingest serves the ingestion runs; nil serves no ingestion routes.
	Ingest *ingest.Service
	// Requests serves the change-request workflow and attachment slots;
	// nil serves no action or attachment routes.
	Requests *requests.Service
	// Documents are the package's published documents (OpenAPI, schemas, forms).
	Documents *metadata.Documents
	// Access decides what the registry document shows each caller.
	Access  access.Decider
	Logger  *slog.Logger
	Metrics *Metrics
	// Ready reports whether the host can serve (the database answers).
	Ready func(ctx context.Context) error
	// CORS admits browser applications of other origins; nil admits none.
	CORS *CORS
	// RateLimit limits each client's calls of /v1; nil limits nothing.
	RateLimit *RateLimit
}

// API is the HTTP edge of the record host.
type API struct {
	records  *records.Service
	gis      *gis.Service
	history  *history.Service
	actions  *actions.Service
	ingest   *ingest.Service
	requests *requests.Service
	docs     *metadata.Documents
	access   access.Decider
	pkg      *model.Package
	log      *slog.Logger
	metrics  *Metrics
	ready    func(ctx context.Context) error
	typeBase string
	handler  http.Handler
	router   chi.Router
	links    map[string][]string // entity id → Link header values of its records
}

// New builds the edge.
func New(o Options) *API {
	a := &API{records: o.Records, gis: o.GIS, history: o.History, actions: o.Actions, ingest: o.Ingest, requests: o.Requests, docs: o.Documents, access: o.Access, pkg: o.Records.Package(), log: o.Logger, metrics: o.Metrics, ready: o.Ready}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.typeBase = a.pkg.Registry.URLs.ProblemTypeBase
	a.links = make(map[string][]string, len(a.pkg.Entities))
	for _, e := range a.pkg.Entities {
		a.links[e.ID] = []string{a.link(e)}
	}
	r := chi.NewRouter()
	r.NotFound(a.notFound)
	r.MethodNotAllowed(a.notFound)
	r.Get("/health", a.health)
	r.Get("/ready", a.readiness)
	if a.docs != nil {
		a.documentRoutes(r)
	}
	if a.access != nil {
		r.Get("/v1/registry", a.registry)
	}
	a.recordRoutes(r)
	a.gisRoutes(r)
	a.actionRoutes(r)
	a.router = r
	a.handler = a.observe(newCORSPolicy(o.CORS).cors(a.rateLimit(o.RateLimit, r)))
	return a
}

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }

func (a *API) notFound(w http.ResponseWriter, r *http.Request) {
	a.fail(w, r, problem.Concealed(problem.ReasonUnknownPath))
}

// fail renders a refusal; an unexpected error is logged with its cause and
// answered without it. The reason behind a concealed not-found or a
// refused token is logged at debug level, never answered.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	pe := problem.Wrap(records.Refusal(err))
	if err == nil {
		pe = problem.Wrap(errors.New("panic"))
	}
	switch pe.Code {
	case problem.Internal:
		a.log.ErrorContext(r.Context(), "request failed", "trace_id", TraceID(r.Context()), "error", pe.Cause)
	case problem.SourceUnavailable:
		a.log.WarnContext(r.Context(), "database unavailable", "trace_id", TraceID(r.Context()), "error", pe.Cause)
	case problem.ResourceNotFound, problem.AuthenticationRefused:
		if a.log.Enabled(r.Context(), slog.LevelDebug) {
			reason := string(pe.Reason)
			if reason == "" {
				reason = "unspecified"
			}
			a.log.DebugContext(r.Context(), "refusal concealed", "trace_id", TraceID(r.Context()),
				"status", pe.Code.Status(), "reason", reason)
		}
	}
	challenge(w, pe)
	problem.Write(w, pe, a.typeBase, TraceID(r.Context()))
}

func (a *API) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, "application/json", map[string]string{"status": "ok"})
}

func (a *API) readiness(w http.ResponseWriter, r *http.Request) {
	if a.ready != nil {
		if err := a.ready(r.Context()); err != nil {
			a.log.WarnContext(r.Context(), "not ready", "error", err)
			writeJSON(w, http.StatusServiceUnavailable, "application/json", map[string]string{"status": "unavailable"})
			return
		}
	}
	writeJSON(w, http.StatusOK, "application/json", map[string]string{"status": "ready"})
}

// call collects what the core needs from a request.
func (a *API) call(r *http.Request) records.Call {
	c := records.Call{TraceID: TraceID(r.Context()), Profile: r.URL.Query().Get("accessProfile"), Representation: records.JSON}
	tok, presented := auth.BearerToken(r.Header.Get("Authorization"))
	c.Bearer = tok
	c.UnusableCredential = presented && tok == ""
	c.IdempotencyKey = r.Header.Get("Idempotency-Key")
	if acceptsLD(r.Header.Get("Accept")) {
		c.Representation = records.JSONLD
	}
	return c
}

// link returns the Link header of an entity's records: its profile and
// its schema.
func (a *API) link(e *model.Entity) string {
	if l, ok := a.links[e.ID]; ok {
		return l[0]
	}
	return fmt.Sprintf(`<%s>; rel="profile", </v1/schemas/%s>; rel="describedby"`, a.pkg.Registry.URLs.Profile, e.ID)
}

// acceptsLD reports whether the client asked for JSON-LD.
func acceptsLD(accept string) bool {
	if !strings.Contains(accept, "ld+json") {
		return false
	}
	for _, part := range strings.Split(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err == nil && mt == "application/ld+json" {
			return true
		}
	}
	return false
}

func contentType(rep records.Representation) string { return contentTypes(rep)[0] }

// contentTypes is the Content-Type header value of rep, shared by every
// answer (see varyAccept).
func contentTypes(rep records.Representation) []string {
	if rep == records.JSONLD {
		return typeJSONLD
	}
	return typeJSON
}

// readBody receives a body of at most limit bytes sent as wantType,
// without judging it: a wrong Content-Type or a declared Content-Length
// over the limit is not read at all, a longer body is read no further
// than limit+1 bytes, and what is wrong is kept as the body's fault. The
// core judges the body only once it has decided the caller's access
// (records.Body), so that a caller who may not use the route gets the
// concealed not-found, whatever it sent.
func readBody(r *http.Request, limit int64, wantType string) records.Body {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != wantType {
		return records.FaultyBody(problem.At(problem.RequestInvalid, "", "the body must be sent with Content-Type %s", wantType))
	}
	if r.ContentLength > limit {
		return records.FaultyBody(problem.At(problem.RequestInvalid, "", "the body is larger than %d bytes", limit))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return records.FaultyBody(problem.At(problem.RequestInvalid, "", "the body could not be read"))
	}
	if int64(len(body)) > limit {
		return records.FaultyBody(problem.At(problem.RequestInvalid, "", "the body is larger than %d bytes", limit))
	}
	return records.BodyOf(body)
}

func bodyLimit(e *model.Entity) int64 {
	if e.MaximumBodyBytes > 0 {
		return e.MaximumBodyBytes
	}
	return DefaultMaximumBodyBytes
}

// createRecord serves POST /v1/records/{route}.
func (a *API) createRecord(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
	c := a.call(r)
	res, err := a.records.Create(r.Context(), c, e, readBody(r, bodyLimit(e), "application/json"))
	if err != nil {
		return err
	}
	a.answer(w, e, c.Representation, res)
	return nil
}

func (a *API) registry(w http.ResponseWriter, r *http.Request) {
	c := a.call(r)
	b, err := metadata.Registry(r.Context(), a.pkg, a.access, access.Request{Bearer: c.Bearer, UnusableCredential: c.UnusableCredential, Profile: c.Profile})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeRaw(w, http.StatusOK, "application/json", b)
}

func (a *API) openapi(w http.ResponseWriter, r *http.Request) {
	writePublic(w, "application/vnd.oai.openapi+json", a.docs.OpenAPI())
}

// writePublic answers a published document, which caches may keep briefly.
func writePublic(w http.ResponseWriter, ct string, body []byte) {
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	setLength(w.Header(), body)
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// batch serves POST /v1/records/{route}:batch.
func (a *API) batch(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
	if e.Batch == nil {
		return problem.NotFound()
	}
	res, err := a.records.Batch(r.Context(), a.call(r), e, readBody(r, e.Batch.MaximumBytes, "application/json"))
	if err != nil {
		return err
	}
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeRaw(w, res.Status, "application/json", res.Body)
	return nil
}

// listRecords serves GET /v1/records/{route}.
func (a *API) listRecords(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
	c := a.call(r)
	opts := query.RawOptions(r.URL.Query())
	delete(opts, "accessProfile")
	res, err := a.records.List(r.Context(), c, e, opts)
	if err != nil {
		return err
	}
	a.answerCollection(w, e, c.Representation, res)
	return nil
}

// answerCollection writes a collection read of e (a page of records,
// revisions or a snapshot) with its Link header.
func (a *API) answerCollection(w http.ResponseWriter, e *model.Entity, rep records.Representation, res *records.Result) {
	w.Header().Set("Link", a.link(e))
	w.Header().Set("Vary", "Accept")
	writeRaw(w, res.Status, contentType(rep), res.Body)
}

// getRecord serves GET /v1/records/{route}/{recordId}.
func (a *API) getRecord(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
	c := a.call(r)
	res, err := a.records.Read(r.Context(), c, e, chi.URLParam(r, "recordId"), query.RawOptions(r.URL.Query()))
	if err != nil {
		return err
	}
	if notModified(r.Header.Get("If-None-Match"), res.ETag) {
		h := w.Header()
		h.Set("ETag", res.ETag)
		h.Set("Link", a.link(e))
		h.Set("Vary", "Accept")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	a.answer(w, e, c.Representation, res)
	return nil
}

// patchRecord serves PATCH /v1/records/{route}/{recordId}.
func (a *API) patchRecord(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
	c := a.call(r)
	res, err := a.records.Patch(r.Context(), c, e, chi.URLParam(r, "recordId"), r.Header.Get("If-Match"), readBody(r, bodyLimit(e), "application/json-patch+json"))
	if err != nil {
		return err
	}
	a.answer(w, e, c.Representation, res)
	return nil
}

// tombstoneRecord serves DELETE /v1/records/{route}/{recordId}.
func (a *API) tombstoneRecord(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
	c := a.call(r)
	res, err := a.records.Tombstone(r.Context(), c, e, chi.URLParam(r, "recordId"), r.Header.Get("If-Match"))
	if err != nil {
		return err
	}
	a.answer(w, e, c.Representation, res)
	return nil
}

// answer writes a record result of e with its ETag, Location and Link
// headers.
func (a *API) answer(w http.ResponseWriter, e *model.Entity, rep records.Representation, res *records.Result) {
	// The header's canonical keys, assigned directly, and the values every
	// answer shares: the hottest answer of the host sets only the ETag's
	// own value.
	h := w.Header()
	h["Etag"] = []string{res.ETag}
	if res.Location != "" {
		h["Location"] = []string{res.Location}
	}
	if l, ok := a.links[e.ID]; ok {
		h["Link"] = l
	} else {
		h.Set("Link", a.link(e))
	}
	h["Vary"] = varyAccept
	if res.Replayed {
		h["Idempotent-Replayed"] = replayedTrue
	}
	h["Content-Type"] = contentTypes(rep)
	h["Cache-Control"] = noStore
	setLength(h, res.Body)
	w.WriteHeader(res.Status)
	w.Write(res.Body)
}

// Header values shared by every answer that carries them. net/http only
// reads a header's values, and appending to one of these (its capacity is
// its length) copies it, so no answer changes another's.
var (
	varyAccept   = []string{"Accept"}
	replayedTrue = []string{"true"}
	typeJSON     = []string{"application/json"}
	typeJSONLD   = []string{"application/ld+json"}
	noStore      = []string{"no-store"}
)

func writeRaw(w http.ResponseWriter, status int, ct string, body []byte) {
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-store")
	setLength(w.Header(), body)
	w.WriteHeader(status)
	w.Write(body)
}

// setLength declares the length of a body written whole in one Write.
// net/http declares it itself only for bodies that fit its 2 KiB buffer
// and sends larger ones chunked, in one more write to the connection (a
// system call) and framing the client must undo.
func setLength(h http.Header, body []byte) {
	if len(body) > 0 {
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
}

func writeJSON(w http.ResponseWriter, status int, ct string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{}`)
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-store")
	setLength(w.Header(), b)
	w.WriteHeader(status)
	w.Write(b)
}
