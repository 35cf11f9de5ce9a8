package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
)

// History reads (docs/history.md): a record's revisions, one revision, and
// the :current and :as-of reads of temporal entities.

// listRevisions serves GET /v1/records/{route}/{recordId}/revisions.
func (a *API) listRevisions(w http.ResponseWriter, r *http.Request) {
	a.historyRead(w, r, func(c records.Call, opts query.RawOptions) (*records.Result, error) {
		e, err := a.records.EntityForRoute(chi.URLParam(r, "route"))
		if err != nil {
			return nil, err
		}
		return a.records.Revisions(r.Context(), c, e, chi.URLParam(r, "recordId"), opts)
	})
}

// readRevision serves GET /v1/records/{route}/{recordId}/revisions/{revision}.
func (a *API) readRevision(w http.ResponseWriter, r *http.Request) {
	a.historyRead(w, r, func(c records.Call, opts query.RawOptions) (*records.Result, error) {
		e, err := a.records.EntityForRoute(chi.URLParam(r, "route"))
		if err != nil {
			return nil, err
		}
		return a.records.Revision(r.Context(), c, e, chi.URLParam(r, "recordId"), chi.URLParam(r, "revision"), opts)
	})
}

// temporalRead serves GET /v1/records/{route}:current (current) and
// GET /v1/records/{route}:as-of?asOf=.
func (a *API) temporalRead(current bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a.historyRead(w, r, func(c records.Call, opts query.RawOptions) (*records.Result, error) {
			e, err := a.records.EntityForRoute(chi.URLParam(r, "route"))
			if err != nil {
				return nil, err
			}
			asOf := ""
			if !current {
				if v := opts["asOf"]; len(v) == 1 {
					asOf = v[0]
				}
				delete(opts, "asOf")
			}
			delete(opts, "accessProfile")
			return a.records.Temporal(r.Context(), c, e, current, asOf, opts)
		})
	}
}

func (a *API) historyRead(w http.ResponseWriter, r *http.Request, read func(records.Call, query.RawOptions) (*records.Result, error)) {
	c := a.call(r)
	res, err := read(c, query.RawOptions(r.URL.Query()))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	e, _ := a.records.EntityForRoute(chi.URLParam(r, "route"))
	w.Header().Set("Link", a.link(e))
	w.Header().Set("Vary", "Accept")
	writeRaw(w, res.Status, contentType(c.Representation), res.Body)
}

// snapshotRead serves GET /v1/records/{route}:snapshot.
func (a *API) snapshotRead(w http.ResponseWriter, r *http.Request) {
	a.historyRead(w, r, func(c records.Call, opts query.RawOptions) (*records.Result, error) {
		e, err := a.records.EntityForRoute(chi.URLParam(r, "route"))
		if err != nil {
			return nil, err
		}
		return a.records.Snapshot(r.Context(), c, e, opts)
	})
}

// snapshotGranted reports whether some profile grants snapshot on e, as
// the generated document routes :snapshot.
func (a *API) snapshotGranted(e *model.Entity) bool {
	for _, pr := range a.pkg.Profiles {
		if g := pr.Grant(e.ID); g != nil && g.Allows(model.OpSnapshot) {
			return true
		}
	}
	return false
}
