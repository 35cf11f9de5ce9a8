package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/model"
)

// actionRoutes registers the routes of every immediate action:
// POST /v1/actions/{action} and POST /v1/actions/{action}/target-conditions.
func (a *API) actionRoutes(r chi.Router) {
	if c, _ := model.ServiceCapabilityByID(model.CapImmediateActions); !c.Served || a.actions == nil {
		return
	}
	for _, act := range a.pkg.Actions {
		base := "/v1/actions/" + act.ID
		r.Method(http.MethodPost, base, withParam("action", act.ID, labelled("/v1/actions/{action}", a.invokeAction)))
		r.Method(http.MethodPost, base+"/target-conditions", withParam("action", act.ID, labelled("/v1/actions/{action}/target-conditions", a.actionConditions)))
	}
}

// invokeAction serves POST /v1/actions/{action}.
func (a *API) invokeAction(w http.ResponseWriter, r *http.Request) {
	res, err := a.actions.Invoke(r.Context(), a.call(r), chi.URLParam(r, "action"), readBody(r, records.MaxActionBodyBytes, "application/json"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeRaw(w, res.Status, "application/json", res.Body)
}

// actionConditions serves POST /v1/actions/{action}/target-conditions.
func (a *API) actionConditions(w http.ResponseWriter, r *http.Request) {
	res, err := a.actions.TargetConditions(r.Context(), a.call(r), chi.URLParam(r, "action"), readBody(r, records.MaxActionBodyBytes, "application/json"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeRaw(w, res.Status, "application/json", res.Body)
}
