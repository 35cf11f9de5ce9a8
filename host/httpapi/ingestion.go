package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/registrum/registrum/host/ingest"
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

// answerRun writes an ingestion result as JSON.
func answerRun(w http.ResponseWriter, res *records.Result) {
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeRaw(w, res.Status, "application/json", res.Body)
}

// run answers the result of an ingestion call, or returns its refusal.
func run(w http.ResponseWriter, res *records.Result, err error) error {
	if err != nil {
		return err
	}
	answerRun(w, res)
	return nil
}

// createRun serves POST /v1/records/{route}/ingestion-runs.
func (a *API) createRun(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
	res, err := a.ingest.CreateRun(r.Context(), a.call(r), e, readBody(r, maxRunBodyBytes, "application/json"))
	return run(w, res, err)
}

// listRuns serves GET /v1/records/{route}/ingestion-runs.
func (a *API) listRuns(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
	res, err := a.ingest.ListRuns(r.Context(), a.call(r), e, ingest.RunQueryOf(query.RawOptions(r.URL.Query())))
	return run(w, res, err)
}

// readRun serves GET /v1/records/{route}/ingestion-runs/{runId}.
func (a *API) readRun(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
	res, err := a.ingest.GetRun(r.Context(), a.call(r), e, chi.URLParam(r, "runId"))
	return run(w, res, err)
}

// cancelRun serves POST /v1/records/{route}/ingestion-runs/{runId}/cancel.
func (a *API) cancelRun(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
	res, err := a.ingest.CancelRun(r.Context(), a.call(r), e, chi.URLParam(r, "runId"))
	return run(w, res, err)
}

// submitChunk serves POST /v1/records/{route}/ingestion-runs/{runId}/chunks.
func (a *API) submitChunk(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
	res, err := a.ingest.Chunk(r.Context(), a.call(r), e, chi.URLParam(r, "runId"), readBody(r, chunkBodyLimit(e), "application/json"))
	return run(w, res, err)
}

// chunkReceipt serves GET
// /v1/records/{route}/ingestion-runs/{runId}/chunks/{chunkIndex}/receipt.
func (a *API) chunkReceipt(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
	res, err := a.ingest.Receipt(r.Context(), a.call(r), e, chi.URLParam(r, "runId"), chi.URLParam(r, "chunkIndex"))
	return run(w, res, err)
}
