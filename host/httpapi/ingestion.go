package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
)

// maxRunBodyBytes bounds the body that opens an ingestion run.
const maxRunBodyBytes = 4 << 10

// chunkBodyLimit bounds a chunk submission: the run's canonical batch bound
// is checked by the service; the envelope may carry whitespace and its own
// members beside the items.
func chunkBodyLimit(e *model.Entity) int64 {
	return 2*e.Batch.MaximumBytes + 64<<10
}

// ingestionRoutes registers the ingestion run routes of a batch entity.
func (a *API) ingestionRoutes(r chi.Router, e *model.Entity) {
	runs := "/v1/records/" + e.Route + "/ingestion-runs"
	run := runs + "/{runId}"
	a.entityRoute(r, http.MethodPost, runs, e, a.createRun)
	a.entityRoute(r, http.MethodGet, runs, e, a.listRuns)
	a.entityRoute(r, http.MethodGet, run, e, a.readRun)
	a.entityRoute(r, http.MethodPost, run+"/chunks", e, a.submitChunk)
	a.entityRoute(r, http.MethodPost, run+"/cancel", e, a.cancelRun)
	a.entityRoute(r, http.MethodGet, run+"/chunks/{chunkIndex}/receipt", e, a.chunkReceipt)
}

// answer writes a service result as JSON, or its refusal.
func (a *API) answerRun(w http.ResponseWriter, r *http.Request, res *records.Result, err error) {
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeRaw(w, res.Status, "application/json", res.Body)
}

func (a *API) createRun(w http.ResponseWriter, r *http.Request) {
	e, err := a.records.EntityForRoute(chi.URLParam(r, "route"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	body, err := readBody(r, maxRunBodyBytes, "application/json")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.records.CreateRun(r.Context(), a.call(r), e, body)
	a.answerRun(w, r, res, err)
}

func (a *API) listRuns(w http.ResponseWriter, r *http.Request) {
	e, err := a.records.EntityForRoute(chi.URLParam(r, "route"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.records.ListRuns(r.Context(), a.call(r), e, records.RunQueryOf(query.RawOptions(r.URL.Query())))
	a.answerRun(w, r, res, err)
}

func (a *API) readRun(w http.ResponseWriter, r *http.Request) {
	e, err := a.records.EntityForRoute(chi.URLParam(r, "route"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.records.GetRun(r.Context(), a.call(r), e, chi.URLParam(r, "runId"))
	a.answerRun(w, r, res, err)
}

func (a *API) cancelRun(w http.ResponseWriter, r *http.Request) {
	e, err := a.records.EntityForRoute(chi.URLParam(r, "route"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.records.CancelRun(r.Context(), a.call(r), e, chi.URLParam(r, "runId"))
	a.answerRun(w, r, res, err)
}

func (a *API) submitChunk(w http.ResponseWriter, r *http.Request) {
	e, err := a.records.EntityForRoute(chi.URLParam(r, "route"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	body, err := readBody(r, chunkBodyLimit(e), "application/json")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.records.Chunk(r.Context(), a.call(r), e, chi.URLParam(r, "runId"), body)
	if err == nil && res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	a.answerRun(w, r, res, err)
}

func (a *API) chunkReceipt(w http.ResponseWriter, r *http.Request) {
	e, err := a.records.EntityForRoute(chi.URLParam(r, "route"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.records.Receipt(r.Context(), a.call(r), e, chi.URLParam(r, "runId"), chi.URLParam(r, "chunkIndex"))
	a.answerRun(w, r, res, err)
}
