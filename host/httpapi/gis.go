package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/registrum/registrum/host/gis"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
)

// gisRoutes registers the spatial adapter when the capability is served
// and some entity has a geojson geometry field: the landing, API and
// conformance documents (public, like /openapi.json), the collections the
// caller may list, and per entity its collection and its items.
func (a *API) gisRoutes(r chi.Router) {
	if c, _ := model.ServiceCapabilityByID(model.CapGIS); !c.Served || a.gis == nil {
		return
	}
	served := false
	for _, e := range a.pkg.Entities {
		if e.GeoJSON == nil {
			continue
		}
		served = true
		c := "/v1/gis/collections/" + e.Route
		r.Get(c, labelled("/v1/gis/collections/{collection}", withParam("collection", e.Route, a.gisCollection)))
		r.Get(c+"/items", labelled("/v1/gis/collections/{collection}/items", withParam("collection", e.Route, a.gisItems)))
	}
	if !served {
		return
	}
	r.Get("/v1/gis", a.gisLanding)
	r.Get("/v1/gis/api", a.openapiDocument)
	r.Get("/v1/gis/conformance", func(w http.ResponseWriter, r *http.Request) {
		writePublic(w, "application/json", gis.Conformance())
	})
	r.Get("/v1/gis/collections", a.gisCollections)
}

func (a *API) gisLanding(w http.ResponseWriter, r *http.Request) {
	b, err := a.gis.Landing()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writePublic(w, "application/json", b)
}

// openapiDocument answers /v1/gis/api with the package's OpenAPI document,
// which describes the adapter's routes with every other.
func (a *API) openapiDocument(w http.ResponseWriter, r *http.Request) {
	if a.docs == nil {
		a.fail(w, r, problem.NotFound())
		return
	}
	a.openapi(w, r)
}

func (a *API) gisCollections(w http.ResponseWriter, r *http.Request) {
	b, err := a.gis.Collections(r.Context(), a.call(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeRaw(w, http.StatusOK, "application/json", b)
}

func (a *API) gisCollection(w http.ResponseWriter, r *http.Request) {
	e, err := a.gis.Entity(chi.URLParam(r, "collection"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	b, err := a.gis.CollectionDocument(r.Context(), a.call(r), e)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeRaw(w, http.StatusOK, "application/json", b)
}

func (a *API) gisItems(w http.ResponseWriter, r *http.Request) {
	e, err := a.gis.Entity(chi.URLParam(r, "collection"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	opts := query.RawOptions(r.URL.Query())
	delete(opts, "accessProfile")
	b, err := a.gis.Items(r.Context(), a.call(r), e, opts)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeRaw(w, http.StatusOK, gis.MediaType, b)
}
