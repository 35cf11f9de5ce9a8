package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
)

// History reads (docs/history.md): a record's revisions, one revision, and
// the :current and :as-of reads of temporal entities.

// listRevisions serves GET /v1/records/{route}/{recordId}/revisions.
func (a *API) listRevisions(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
	c := a.call(r)
	res, err := a.history.Revisions(r.Context(), c, e, chi.URLParam(r, "recordId"), query.RawOptions(r.URL.Query()))
	if err != nil {
		return err
	}
	a.answerCollection(w, e, c.Representation, res)
	return nil
}

// readRevision serves GET /v1/records/{route}/{recordId}/revisions/{revision}.
func (a *API) readRevision(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
	c := a.call(r)
	res, err := a.history.Revision(r.Context(), c, e, chi.URLParam(r, "recordId"), chi.URLParam(r, "revision"), query.RawOptions(r.URL.Query()))
	if err != nil {
		return err
	}
	a.answerCollection(w, e, c.Representation, res)
	return nil
}

// temporalRead serves GET /v1/records/{route}:current (current) and
// GET /v1/records/{route}:as-of?asOf=.
func (a *API) temporalRead(current bool) entityHandler {
	return func(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
		c := a.call(r)
		opts := query.RawOptions(r.URL.Query())
		delete(opts, "accessProfile")
		res, err := a.history.Temporal(r.Context(), c, e, current, opts)
		if err != nil {
			return err
		}
		a.answerCollection(w, e, c.Representation, res)
		return nil
	}
}

// snapshotRead serves GET /v1/records/{route}:snapshot.
func (a *API) snapshotRead(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
	c := a.call(r)
	res, err := a.history.Snapshot(r.Context(), c, e, query.RawOptions(r.URL.Query()))
	if err != nil {
		return err
	}
	a.answerCollection(w, e, c.Representation, res)
	return nil
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
