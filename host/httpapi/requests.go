package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/host/requests"
	"github.com/registrum/registrum/model"
)

// requestAction serves POST /v1/records/{route}/{recordId}/actions/{action}:
// submit, revise, cancel or apply a change request. The answer is the
// action response of the specification, not a record envelope.
func (a *API) requestAction(action string) entityHandler {
	return func(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
		c := a.call(r)
		body := readBody(r, records.MaxActionBodyBytes, "application/json")
		res, err := a.requests.Act(r.Context(), c, e, chi.URLParam(r, "recordId"), action, r.Header.Get("If-Match"), requests.ReceivedBody(body))
		if err != nil {
			return err
		}
		h := w.Header()
		h.Set("ETag", res.ETag)
		if res.Replayed {
			h.Set("Idempotent-Replayed", "true")
		}
		writeRaw(w, res.Status, "application/json", res.Body)
		return nil
	}
}
