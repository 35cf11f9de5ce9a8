package generate

import (
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/registrum/registrum/model"
)

// checkOpenAPI validates the document with an independent OpenAPI 3.1
// implementation: it must build into a model (every reference resolves) and
// validate against the OpenAPI 3.1 specification's schema.
func checkOpenAPI(t *testing.T, doc []byte) {
	t.Helper()
	if problems := openAPIProblems(doc); len(problems) > 0 {
		t.Fatalf("not a valid OpenAPI 3.1 document:\n%s", strings.Join(problems, "\n"))
	}
}

// openAPIProblems returns what libopenapi finds wrong with the document.
func openAPIProblems(doc []byte) []string {
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		return []string{"libopenapi: " + err.Error()}
	}
	if v := d.GetVersion(); v != OpenAPIVersion {
		return []string{"openapi version " + v}
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		return []string{"libopenapi model: " + errors.Join(errs...).Error()}
	}
	ok, verrs := v.ValidateDocument()
	if ok {
		return nil
	}
	msgs := []string{"invalid"}
	for _, e := range verrs {
		msgs = append(msgs, e.Error())
		for _, se := range e.SchemaValidationErrors {
			msgs = append(msgs, "  "+se.FieldPath+" "+se.KeywordLocation+": "+se.Reason)
		}
	}
	return msgs
}

// TestOpenAPICheckerRefusesBrokenDocuments proves the checker is not vacuous.
func TestOpenAPICheckerRefusesBrokenDocuments(t *testing.T) {
	good, err := OpenAPI(testPackage())
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(good, &d); err != nil {
		t.Fatal(err)
	}
	breakers := map[string]func(map[string]any){
		"no info":      func(d map[string]any) { delete(d, "info") },
		"bad path key": func(d map[string]any) { d["paths"].(map[string]any)["v1/no-slash"] = map[string]any{} },
		"bad parameter": func(d map[string]any) {
			d["components"].(map[string]any)["parameters"].(map[string]any)["select"].(map[string]any)["in"] = "body"
		},
		"bad response": func(d map[string]any) {
			d["components"].(map[string]any)["responses"].(map[string]any)["NotFound"] = map[string]any{"content": 1}
		},
	}
	for name, breakDoc := range breakers {
		var c map[string]any
		if err := json.Unmarshal(good, &c); err != nil {
			t.Fatal(err)
		}
		breakDoc(c)
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if len(openAPIProblems(b)) == 0 {
			t.Errorf("%s: the checker accepted a broken document", name)
		}
	}
}

// pathSet returns "METHOD path" for every operation of the document.
func pathSet(t *testing.T, doc []byte) []string {
	t.Helper()
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for path, item := range d.Paths {
		for method := range item {
			out = append(out, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(out)
	return out
}

// openAPIOf returns the document of every route the package declares,
// served or not: the inventory tests below describe what each declaration
// brings once its capability is served (OpenAPI leaves out the rest; see
// TestOpenAPIListsOnlyServedRoutes).
func openAPIOf(t *testing.T, p *model.Package) []byte {
	t.Helper()
	doc, err := declaredOpenAPI(p)
	if err != nil {
		t.Fatal(err)
	}
	checkOpenAPI(t, doc)
	return doc
}

func minimalPackage(entities ...*model.Entity) *model.Package {
	p := testPackage()
	p.Entities = entities
	p.Profiles = nil
	p.Actions = nil
	return p
}

func plainEntity(id, route string) *model.Entity {
	return &model.Entity{ID: id, Route: route, Dataset: "d", MutationMode: model.Mutable, MaximumBodyBytes: 1024,
		Fields: []*model.Field{{ID: "name", APIName: "name", Type: model.TypeString, Required: true, MaxLength: ptr(10)}}}
}

var metadataRoutes = []string{"GET /openapi.json", "GET /v1/registry"}

func expect(routes ...string) []string {
	out := append(slices.Clone(metadataRoutes), routes...)
	sort.Strings(out)
	return out
}

func TestOpenAPIPathSetIsExactForThePackage(t *testing.T) {
	recordRoutes := func(r string) []string {
		return []string{
			"GET /v1/records/" + r, "POST /v1/records/" + r, "GET /v1/records/" + r + "/{recordId}",
			"GET /v1/records/" + r + "/{recordId}/revisions", "GET /v1/records/" + r + "/{recordId}/revisions/{revision}",
		}
	}
	ingestion := func(r string) []string {
		b := "/v1/records/" + r + "/ingestion-runs"
		return []string{"POST " + b, "GET " + b, "GET " + b + "/{runId}", "POST " + b + "/{runId}/chunks",
			"POST " + b + "/{runId}/cancel", "GET " + b + "/{runId}/chunks/{chunkIndex}/receipt"}
	}
	gis := []string{"GET /v1/gis", "GET /v1/gis/api", "GET /v1/gis/conformance", "GET /v1/gis/collections"}

	createOnly := plainEntity("note", "notes")
	createOnly.MutationMode = model.CreateOnly

	tomb := plainEntity("site", "sites")
	tomb.Tombstone = true

	batch := plainEntity("item", "items")
	batch.Batch = &model.Batch{MaximumItems: 10, MaximumBytes: 4096}

	temporal := plainEntity("period", "periods")
	temporal.Fields = append(temporal.Fields,
		&model.Field{ID: "from", APIName: "from", Type: model.TypeTimestamp, Required: true},
		&model.Field{ID: "to", APIName: "to", Type: model.TypeTimestamp})
	temporal.Temporal = &model.Temporal{StartField: "from", EndField: "to", Type: model.TypeTimestamp}

	geo := plainEntity("place", "places")
	geo.Fields = append(geo.Fields, &model.Field{ID: "at", APIName: "at", Type: model.TypeCRS84Point})
	geo.GeoJSON = &model.GeoJSON{GeometryField: "at"}

	cases := []struct {
		name string
		p    *model.Package
		want []string
	}{
		{"mutable without tombstone", minimalPackage(plainEntity("thing", "things")),
			expect(append(recordRoutes("things"), "PATCH /v1/records/things/{recordId}", "GET /v1/schemas/thing")...)},
		{"create-only", minimalPackage(createOnly),
			expect(append(recordRoutes("notes"), "GET /v1/schemas/note")...)},
		{"tombstone", minimalPackage(tomb),
			expect(append(recordRoutes("sites"), "PATCH /v1/records/sites/{recordId}", "DELETE /v1/records/sites/{recordId}", "GET /v1/schemas/site")...)},
		{"batch", minimalPackage(batch),
			expect(append(append(recordRoutes("items"), ingestion("items")...), "PATCH /v1/records/items/{recordId}", "POST /v1/records/items:batch", "GET /v1/schemas/item")...)},
		{"temporal", minimalPackage(temporal),
			expect(append(recordRoutes("periods"), "PATCH /v1/records/periods/{recordId}", "GET /v1/records/periods:current", "GET /v1/records/periods:as-of", "GET /v1/schemas/period")...)},
		{"geojson", minimalPackage(geo),
			expect(append(append(recordRoutes("places"), gis...), "PATCH /v1/records/places/{recordId}", "GET /v1/gis/collections/places", "GET /v1/gis/collections/places/items", "GET /v1/schemas/place")...)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := pathSet(t, openAPIOf(t, c.p))
			if !slices.Equal(got, c.want) {
				t.Fatalf("routes differ\n got: %q\nwant: %q", got, c.want)
			}
			routes, err := DeclaredRoutes(c.p)
			if err != nil {
				t.Fatal(err)
			}
			var inv []string
			for _, r := range routes {
				inv = append(inv, r.Method+" "+r.Path)
			}
			sort.Strings(inv)
			if !slices.Equal(inv, c.want) {
				t.Fatalf("Routes differs from the document\n got: %q\nwant: %q", inv, c.want)
			}
		})
	}
}

func TestOpenAPISnapshotRouteFollowsGrants(t *testing.T) {
	p := minimalPackage(plainEntity("thing", "things"))
	if slices.Contains(pathSet(t, openAPIOf(t, p)), "GET /v1/records/things:snapshot") {
		t.Fatal("snapshot route listed although no profile grants snapshot")
	}
	p.Profiles = []*model.Profile{{ID: "reader", RequiredScopes: []string{"r"}, Grants: []*model.Grant{
		{Entity: "thing", Operations: []string{model.OpGet, model.OpSnapshot}, RowBoundaries: model.RowBoundaries{Unrestricted: true}}}}}
	if !slices.Contains(pathSet(t, openAPIOf(t, p)), "GET /v1/records/things:snapshot") {
		t.Fatal("snapshot route missing although a profile grants snapshot")
	}
}

func TestOpenAPIFullPackage(t *testing.T) {
	p := testPackage()
	p.Forms = []*model.Form{applicationForm()}
	doc := openAPIOf(t, p)
	got := pathSet(t, doc)
	for _, want := range []string{
		"GET /v1/records/persons:snapshot",
		"POST /v1/records/applications/{recordId}/actions/submit",
		"POST /v1/records/applications/{recordId}/actions/revise",
		"POST /v1/records/applications/{recordId}/actions/cancel",
		"POST /v1/records/applications/{recordId}/actions/apply",
		"PATCH /v1/records/applications/{recordId}/attachments/evidence",
		"DELETE /v1/records/applications/{recordId}/attachments/photo",
		"GET /v1/records/applications/{recordId}/attachments/photo",
		"POST /v1/actions/close-person",
		"POST /v1/actions/close-person/target-conditions",
		"GET /v1/gis/collections/districts/items",
		"GET /v1/schemas/application",
		"GET /metadata/forms/child-support-application/schema.json",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("route %s missing", want)
		}
	}
	for _, absent := range []string{
		"PATCH /v1/records/districts/{recordId}",            // create-only
		"DELETE /v1/records/applications/{recordId}",        // no tombstone
		"POST /v1/records/applications:batch",               // no batch
		"GET /v1/records/persons:current",                   // not temporal
		"GET /v1/records/districts:snapshot",                // no snapshot grant
		"POST /v1/records/persons/{recordId}/actions/apply", // not a request entity
		"GET /v1/gis/collections/persons",                   // no geojson
	} {
		if slices.Contains(got, absent) {
			t.Errorf("route %s listed, but the package does not enable it", absent)
		}
	}
	var d map[string]any
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	sec, _ := json.Marshal(d["security"])
	if string(sec) != `[{"bearer":[]},{}]` {
		t.Errorf("security = %s, want bearer or none (the package has an anonymous profile)", sec)
	}
}

// TestOpenAPIDescribesRequestsAndResponses checks the document's schemas
// through libopenapi-validator: a real create request and response, a patch
// and a problem document are validated against the operations they target.
func TestOpenAPIDescribesRequestsAndResponses(t *testing.T) {
	doc := openAPIOf(t, testPackage())
	var d struct {
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas    map[string]any `json:"schemas"`
			Parameters map[string]any `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	create := d.Paths["/v1/records/persons"]["post"]
	resp := create["responses"].(map[string]any)
	for _, status := range []string{"201", "400", "401", "404", "409"} {
		if _, ok := resp[status]; !ok {
			t.Errorf("create lacks response %s", status)
		}
	}
	patch := d.Paths["/v1/records/persons/{recordId}"]["patch"]
	body, _ := json.Marshal(patch["requestBody"])
	if !strings.Contains(string(body), "application/json-patch+json") {
		t.Errorf("patch body = %s, want application/json-patch+json", body)
	}
	presp := patch["responses"].(map[string]any)
	for _, status := range []string{"200", "412", "428"} {
		if _, ok := presp[status]; !ok {
			t.Errorf("patch lacks response %s", status)
		}
	}
	params, _ := json.Marshal(patch["parameters"])
	for _, p := range []string{"ifMatch", "idempotencyKey", "recordId", "accessProfile"} {
		if !strings.Contains(string(params), p) {
			t.Errorf("patch parameters %s lack %s", params, p)
		}
	}
	list, _ := json.Marshal(d.Paths["/v1/records/persons"]["get"]["parameters"])
	for _, p := range []string{"select", "filter", "orderby", "count", "top", "skiptoken", "accessProfile"} {
		if !strings.Contains(string(list), p) {
			t.Errorf("list parameters %s lack %s", list, p)
		}
	}
	apply, _ := json.Marshal(d.Paths["/v1/records/applications/{recordId}/actions/apply"]["post"]["parameters"])
	if !strings.Contains(string(apply), "idempotencyKeyRequired") || !strings.Contains(string(apply), "ifMatch") {
		t.Errorf("apply parameters %s, want If-Match and Idempotency-Key required", apply)
	}
	if _, ok := d.Components.Schemas["person.BatchBody"]; !ok {
		t.Error("batch body schema missing")
	}
	if _, ok := d.Components.Schemas["application.BatchBody"]; ok {
		t.Error("batch body schema for an entity without batch")
	}
}

func TestFormRoutePath(t *testing.T) {
	p := testPackage()
	if got := model.FormRoutePath(p, "f"); got != "/metadata/forms/f/schema.json" {
		t.Errorf("FormRoutePath = %s", got)
	}
	p.Registry.URLs.MetadataBase = "https://registry.example.test"
	if got := model.FormRoutePath(p, "f"); got != "/forms/f/schema.json" {
		t.Errorf("FormRoutePath without a base path = %s", got)
	}
}

func TestOpenAPIIsDeterministic(t *testing.T) {
	a, err := OpenAPI(testPackage())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		b, err := OpenAPI(testPackage())
		if err != nil {
			t.Fatal(err)
		}
		if string(a) != string(b) {
			t.Fatal("two generations of the same package differ")
		}
	}
}

// TestOpenAPIHoldsOnlyUsedComponents: every component is referenced, so the
// document describes nothing the package does not enable.
func TestOpenAPIHoldsOnlyUsedComponents(t *testing.T) {
	for _, p := range []*model.Package{testPackage(), minimalPackage(plainEntity("thing", "things"))} {
		doc := openAPIOf(t, p)
		var d struct {
			Components map[string]map[string]json.RawMessage `json:"components"`
		}
		if err := json.Unmarshal(doc, &d); err != nil {
			t.Fatal(err)
		}
		for kind, members := range d.Components {
			if kind == "securitySchemes" {
				continue
			}
			for name := range members {
				if !strings.Contains(string(doc), `"#/components/`+kind+`/`+name+`"`) {
					t.Errorf("component %s/%s is never referenced", kind, name)
				}
			}
		}
	}
	doc := openAPIOf(t, minimalPackage(plainEntity("thing", "things")))
	for _, absent := range []string{"IngestionRun", "ChangeContext", "ChangeRequest", "FeatureCollection", "ActionResult", `"Gone"`} {
		if strings.Contains(string(doc), absent) {
			t.Errorf("a package without batch, requests, GIS or actions describes %s", absent)
		}
	}
}

// TestOpenAPIListsOnlyServedRoutes checks that the published document
// holds exactly the routes of the capabilities the host serves, that every
// declared route of another capability is reported by Unserved, and that
// flipping one entry of the capability table brings its routes back.
func TestOpenAPIListsOnlyServedRoutes(t *testing.T) {
	p := testPackage()
	p.Forms = []*model.Form{applicationForm()}
	doc, err := OpenAPI(p)
	if err != nil {
		t.Fatal(err)
	}
	checkOpenAPI(t, doc)
	got := pathSet(t, doc)
	declared, err := DeclaredRoutes(p)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	left := map[string]bool{}
	for _, r := range declared {
		if r.Served {
			want = append(want, r.Method+" "+r.Path)
		} else {
			left[r.Method+" "+r.Path] = true
		}
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("document routes\n got: %q\nwant: %q", got, want)
	}
	for _, unserved := range []string{} {
		if slices.Contains(got, unserved) {
			t.Errorf("%s is in the document, but the host does not serve it", unserved)
		}
		if !left[unserved] {
			t.Errorf("%s is not among the declared, unserved routes", unserved)
		}
	}
	// History reads are served: revisions of every entity, :current and
	// :as-of of temporal ones, :snapshot where a profile grants it.
	for _, served := range []string{
		"GET /v1/records/persons:snapshot",
		"GET /v1/records/persons/{recordId}/revisions",
		"GET /v1/records/persons/{recordId}/revisions/{revision}",
		"GET /v1/records/districts:as-of",
		"GET /v1/records/districts:current",
		// The spatial adapter is served.
		"GET /v1/gis",
		"GET /v1/gis/collections/districts/items",
		"PATCH /v1/records/applications/{recordId}/attachments/evidence",
		"DELETE /v1/records/applications/{recordId}/attachments/evidence",
		"GET /v1/records/applications/{recordId}/attachments/evidence",
		"POST /v1/actions/close-person",
	} {
		if !slices.Contains(got, served) {
			t.Errorf("%s is not in the document, but the host serves it", served)
		}
	}
	uses, err := Unserved(p)
	if err != nil {
		t.Fatal(err)
	}
	reported := map[string]bool{}
	var caps []string
	for _, u := range uses {
		caps = append(caps, u.Capability.ID+":"+u.Entity+u.Action)
		for _, r := range u.Routes {
			reported[r] = true
		}
		if !strings.Contains(u.Message(), "declared, not yet served by this host") {
			t.Errorf("message %q", u.Message())
		}
	}
	for r := range left {
		if !reported[r] && !strings.Contains(r, "/revisions") {
			t.Errorf("unserved route %s is not reported", r)
		}
	}
	for _, want := range []string{} { // every capability is served
		if !slices.Contains(caps, want) {
			t.Errorf("Unserved lacks %s: %q", want, caps)
		}
	}

	// The change-request service serves request records and their actions.
	for _, served := range []string{"POST /v1/records/applications", "POST /v1/records/applications/{recordId}/actions/apply"} {
		if !slices.Contains(got, served) {
			t.Errorf("%s is served, but not in the document", served)
		}
	}

	// Serving a capability is one entry of the table: taking one out of
	// service takes its routes out of the document and reports its uses.
	defer func(was func() []model.ServiceCapability) { serviceCapabilities = was }(serviceCapabilities)
	serviceCapabilities = func() []model.ServiceCapability {
		table := model.ServiceCapabilities()
		for i := range table {
			if table[i].ID == model.CapImmediateActions {
				table[i].Served = false
			}
		}
		return table
	}
	doc, err = OpenAPI(p)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(pathSet(t, doc), "POST /v1/actions/close-person") {
		t.Error("an unserved capability's route is in the document")
	}
	uses, _ = Unserved(p)
	reportedActions := false
	for _, u := range uses {
		reportedActions = reportedActions || (u.Capability.ID == model.CapImmediateActions && u.Action == "close-person")
	}
	if !reportedActions {
		t.Error("an unserved capability's use is not reported")
	}
}
