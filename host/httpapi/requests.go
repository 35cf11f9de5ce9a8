package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// maxActionBodyBytes bounds a change-request action body.
const maxActionBodyBytes = 64 << 10

// requestAction serves POST /v1/records/{route}/{recordId}/actions/{action}:
// submit, revise, cancel or apply a change request. The answer is the
// action response of the specification, not a record envelope.
func (a *API) requestAction(w http.ResponseWriter, r *http.Request) {
	e, err := a.records.EntityForRoute(chi.URLParam(r, "route"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	body, err := readBody(r, maxActionBodyBytes, "application/json")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c := a.call(r)
	res, err := a.records.Act(r.Context(), c, e, chi.URLParam(r, "recordId"), chi.URLParam(r, "action"), r.Header.Get("If-Match"), body)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("ETag", res.ETag)
	if res.Replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	writeRaw(w, res.Status, "application/json", res.Body)
}
