package httpapi

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/registrum/registrum/model"
)

// The record routes are spelled out per entity (/v1/records/children, not
// /v1/records/{route}), exactly as the OpenAPI document lists them, so the
// router's route table is the inventory of what the host serves: a route a
// package does not enable (a patch of a create-only entity, a batch of an
// entity without batch bounds) is not in it and answers the concealed 404,
// and routes_test.go compares the table with the served /openapi.json in
// both directions. Each handler gets its entity bound at registration.

// recordRoutes registers the record routes of every entity the host serves.
func (a *API) recordRoutes(r chi.Router) {
	requests, _ := model.ServiceCapabilityByID(model.CapChangeRequests)
	ingestion, _ := model.ServiceCapabilityByID(model.CapIngestionRuns)
	revisions, _ := model.ServiceCapabilityByID(model.CapRevisions)
	temporal, _ := model.ServiceCapabilityByID(model.CapTemporalReads)
	attachments, _ := model.ServiceCapabilityByID(model.CapAttachments)
	snapshot, _ := model.ServiceCapabilityByID(model.CapSnapshot)
	for _, e := range a.pkg.Entities {
		if e.IsRequestEntity() && !requests.Served {
			continue
		}
		base := "/v1/records/" + e.Route
		item := base + "/{recordId}"
		a.entityRoute(r, http.MethodGet, base, e, a.listRecords)
		a.entityRoute(r, http.MethodPost, base, e, a.createRecord)
		a.entityRoute(r, http.MethodGet, item, e, a.getRecord)
		if revisions.Served {
			a.entityRoute(r, http.MethodGet, item+"/revisions", e, a.listRevisions)
			a.entityRoute(r, http.MethodGet, item+"/revisions/{revision}", e, a.readRevision)
		}
		if e.Temporal != nil && temporal.Served {
			a.entityRoute(r, http.MethodGet, base+":current", e, a.temporalRead(true))
			a.entityRoute(r, http.MethodGet, base+":as-of", e, a.temporalRead(false))
		}
		if snapshot.Served && a.snapshotGranted(e) {
			a.entityRoute(r, http.MethodGet, base+":snapshot", e, a.snapshotRead)
		}
		if e.MutationMode == model.Mutable {
			a.entityRoute(r, http.MethodPatch, item, e, a.patchRecord)
		}
		if e.Tombstone {
			a.entityRoute(r, http.MethodDelete, item, e, a.tombstoneRecord)
		}
		if e.Batch != nil {
			a.entityRoute(r, http.MethodPost, base+":batch", e, a.batch)
			if ingestion.Served && a.ingest != nil {
				a.ingestionRoutes(r, e)
			}
		}
		if e.IsRequestEntity() && a.requests != nil {
			for _, action := range requestActions {
				a.entityRoute(r, http.MethodPost, item+"/actions/"+action, e, a.requestAction(action))
			}
			if attachments.Served {
				a.attachmentRoutes(r, item, e)
			}
		}
	}
}

// requestActions are the change request actions, each at
// /v1/records/{route}/{recordId}/actions/<action>.
var requestActions = []string{"submit", "revise", "cancel", "apply"}

// entityHandler serves a route of entity e, bound when the route was
// registered. It answers the request itself, or returns the refusal for
// the one wrapper, serveEntity, to render.
type entityHandler func(w http.ResponseWriter, r *http.Request, e *model.Entity) error

// entityRoute registers h at pattern, a path spelled out for entity e, with
// e bound. The request log and metrics name the generic pattern
// (/v1/records/{route}/...), so their labels stay one per kind of route.
func (a *API) entityRoute(r chi.Router, method, pattern string, e *model.Entity, h entityHandler) {
	generic := "/v1/records/{route}" + strings.TrimPrefix(pattern, "/v1/records/"+e.Route)
	r.Method(method, pattern, labelled(generic, a.serveEntity(e, h)))
}

// serveEntity serves h with its entity and renders the refusal it returns.
func (a *API) serveEntity(e *model.Entity, h entityHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r, e); err != nil {
			a.fail(w, r, err)
		}
	}
}

// labelled serves h under the generic pattern in the request log and the
// metrics.
func labelled(generic string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if rctx := chi.RouteContext(r.Context()); rctx != nil && len(rctx.RoutePatterns) > 0 {
			rctx.RoutePatterns[len(rctx.RoutePatterns)-1] = generic
		}
		h(w, r)
	}
}

// documentRoutes registers the published documents: the OpenAPI document,
// one schema per entity and the form schemas.
func (a *API) documentRoutes(r chi.Router) {
	r.Get("/openapi.json", a.openapi)
	for _, e := range a.pkg.Entities {
		r.Get("/v1/schemas/"+e.ID, labelled("/v1/schemas/{entity}", func(w http.ResponseWriter, r *http.Request) {
			b, err := a.docs.EntitySchema(e.ID)
			if err != nil {
				a.fail(w, r, err)
				return
			}
			writePublic(w, "application/schema+json", b)
		}))
	}
	for path, body := range a.docs.Forms() {
		r.Get(path, func(w http.ResponseWriter, r *http.Request) { writePublic(w, "application/schema+json", body) })
	}
}

// withParam serves h with a URL parameter that the spelled-out route fixes.
func withParam(key, value string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if rctx := chi.RouteContext(r.Context()); rctx != nil {
			rctx.URLParams.Add(key, value)
		}
		h(w, r)
	}
}

// Router returns the route table, for chi.Walk: every method and path the
// host serves (HEAD is answered wherever GET is, by the GET handler).
func (a *API) Router() chi.Routes { return a.router }
