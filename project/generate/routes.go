package generate

import (
	"regexp"
	"sort"
	"strings"

	"github.com/registrum/registrum/model"
)

// entityOperations returns the routes of one entity.
func entityOperations(p *model.Package, e *model.Entity) []operation {
	base := "/v1/records/" + e.Route
	item := base + "/{recordId}"
	tag := e.ID
	ap := accessProfileParam(entityProfiles(p, e.ID))
	collection := []any{ap, paramRef("select"), paramRef("filter"), paramRef("orderby"), paramRef("count"), paramRef("top"), paramRef("skiptoken")}
	if e.GeoJSON != nil {
		collection = append(collection, paramRef("bbox"))
	}
	envelope := response("The record.", schemaRef(cEnvelope(e)), true, recordHeaders(false))
	list := response("A page of records.", schemaRef(cCollection(e)), true, obj{"Link": ref("headers", "Link")})
	notModified := obj{"description": "The current revision is one the client holds (If-None-Match); no body.",
		"headers": obj{"ETag": ref("headers", "ETag"), "Link": ref("headers", "Link")}}

	readParams := []any{paramRef("recordId"), ap, paramRef("select"), paramRef("ifNoneMatch")}
	if e.IsRequestEntity() {
		readParams = append(readParams, paramRef("requestHistoryAfterProposalVersion"))
	}
	records := model.CapRecords
	if e.IsRequestEntity() {
		// The records of a request entity are change requests.
		records = model.CapChangeRequests
	}
	ops := []operation{
		{method: "get", path: base, id: e.ID + ".list", tag: tag, summary: "List " + e.ID + " records.",
			params: collection, responses: withProblems(obj{"200": list}, 400, 401, 404, 503)},
		{method: "post", path: base, id: e.ID + ".create", tag: tag, summary: "Create a " + e.ID + " record.",
			params: []any{ap, paramRef("idempotencyKey")}, body: jsonBody(schemaRef(cCreate(e))),
			responses: withProblems(obj{"201": response("The created record.", schemaRef(cEnvelope(e)), true, recordHeaders(true))}, 400, 401, 404, 409, 503)},
		{method: "get", path: item, id: e.ID + ".read", tag: tag, summary: "Read a " + e.ID + " record.",
			params: readParams, responses: withProblems(obj{"200": envelope, "304": notModified}, 400, 401, 404, 503)},
	}
	ops = tagged(ops, records, e.ID, "")
	ops = append(ops, tagged([]operation{
		{method: "get", path: item + "/revisions", id: e.ID + ".revisions.list", tag: tag, summary: "List the revisions of a " + e.ID + " record (at most 100 per read).",
			params: []any{paramRef("recordId"), ap, paramRef("select"), paramRef("top"), paramRef("skiptoken")}, responses: withProblems(obj{"200": list}, 400, 401, 404, 503)},
		{method: "get", path: item + "/revisions/{revision}", id: e.ID + ".revisions.read", tag: tag, summary: "Read one revision of a " + e.ID + " record.",
			params: []any{paramRef("recordId"), paramRef("revision"), ap, paramRef("select")}, responses: withProblems(obj{"200": envelope}, 400, 401, 404, 503)},
	}, model.CapRevisions, e.ID, "")...)
	if e.MutationMode == model.Mutable {
		ops = append(ops, tagged1(operation{method: "patch", path: item, id: e.ID + ".patch", tag: tag, summary: "Patch a " + e.ID + " record with JSON Patch.",
			params: []any{paramRef("recordId"), ap, paramRef("ifMatch"), paramRef("idempotencyKey")},
			body:   obj{"required": true, "content": obj{"application/json-patch+json": obj{"schema": schemaRef(cPatch(e))}}},
			responses: withProblems(obj{"200": response("The new revision of the record.", schemaRef(cEnvelope(e)), true, recordHeaders(false))},
				400, 401, 404, 409, 412, 428, 503)}, records, e.ID))
	}
	if e.Tombstone {
		ops = append(ops, tagged1(operation{method: "delete", path: item, id: e.ID + ".tombstone", tag: tag, summary: "Tombstone a " + e.ID + " record.",
			params: []any{paramRef("recordId"), ap, paramRef("ifMatch"), paramRef("idempotencyKey")},
			responses: withProblems(obj{"200": response("The final revision, marking the record tombstoned.", schemaRef(cEnvelope(e)), true, recordHeaders(false))},
				400, 401, 404, 409, 412, 428, 503)}, records, e.ID))
	}
	if e.Batch != nil {
		ops = append(ops, tagged1(operation{method: "post", path: base + ":batch", id: e.ID + ".batch", tag: tag, summary: "Write a transactional batch of " + e.ID + " records.",
			params: []any{ap, paramRef("idempotencyKey")}, body: jsonBody(schemaRef(cBatch(e))),
			responses: withProblems(obj{"200": response("The batch result.", schemaRef(cBatchResp(e)), false, nil)}, 400, 401, 404, 409, 412, 503)}, records, e.ID))
		ops = append(ops, tagged(ingestionOperations(e, ap), model.CapIngestionRuns, e.ID, "")...)
	}
	if e.Temporal != nil {
		ops = append(ops, tagged([]operation{
			{method: "get", path: base + ":current", id: e.ID + ".current", tag: tag, summary: "List the " + e.ID + " records whose interval contains now.",
				params: collection, responses: withProblems(obj{"200": list}, 400, 401, 404, 503)},
			{method: "get", path: base + ":as-of", id: e.ID + ".asOf", tag: tag, summary: "List the " + e.ID + " records whose interval contains asOf.",
				params: append([]any{paramRef("asOf")}, collection...), responses: withProblems(obj{"200": list}, 400, 401, 404, 503)},
		}, model.CapTemporalReads, e.ID, "")...)
	}
	if grantsOperation(p, e.ID, model.OpSnapshot) {
		params := []any{paramRef("snapshot"), ap, paramRef("select"), paramRef("top"), paramRef("skiptoken")}
		if e.Temporal != nil {
			params = append(params, validAtParam(e))
		}
		ops = append(ops, tagged1(operation{method: "get", path: base + ":snapshot", id: e.ID + ".snapshot", tag: tag,
			summary: "Read the " + e.ID + " collection as recorded at a snapshot.", params: params,
			responses: withProblems(obj{"200": list}, 400, 401, 404, 503)}, model.CapSnapshot, e.ID))
	}
	if e.IsRequestEntity() {
		ops = append(ops, tagged(requestOperations(e, ap), model.CapChangeRequests, e.ID, "")...)
		ops = append(ops, tagged(attachmentOperations(e, ap), model.CapAttachments, e.ID, "")...)
	}
	return ops
}

// tagged marks operations as routes of a capability declared by an entity
// or an action.
func tagged(ops []operation, capability, entity, action string) []operation {
	for i := range ops {
		ops[i].capability, ops[i].entity, ops[i].action = capability, entity, action
	}
	return ops
}

// tagged1 marks one operation as a route of a capability declared by an entity.
func tagged1(o operation, capability, entity string) operation {
	o.capability, o.entity = capability, entity
	return o
}

// validAtParam is the validAt parameter of a temporal entity's snapshot: a
// calendar date for a date interval, a UTC timestamp for a timestamp interval.
func validAtParam(e *model.Entity) obj {
	s := obj{"type": "string", "format": "date-time", "pattern": TimestampPattern}
	if e.Temporal.Type == model.TypeDate {
		s = obj{"type": "string", "format": "date", "pattern": DatePattern}
	}
	return obj{"name": "validAt", "in": "query", "required": false, "description": "Validity instant of the snapshot read.", "schema": s}
}

// ingestionOperations returns the ingestion run routes of a batch entity.
func ingestionOperations(e *model.Entity, ap obj) []operation {
	runs := "/v1/records/" + e.Route + "/ingestion-runs"
	run := runs + "/{runId}"
	run200 := response("The run document.", schemaRef("IngestionRun"), false, nil)
	return []operation{
		{method: "post", path: runs, id: e.ID + ".ingestionRuns.create", tag: e.ID, summary: "Open an ingestion run.",
			params: []any{ap}, body: jsonBody(schemaRef("IngestionRunCreate")),
			responses: withProblems(obj{"201": response("The opened run.", schemaRef("IngestionRun"), false, nil)}, 400, 401, 404, 409)},
		{method: "get", path: runs, id: e.ID + ".ingestionRuns.list", tag: e.ID, summary: "List the caller's ingestion runs.",
			params:    []any{ap, paramRef("runLimit"), paramRef("runAfter"), paramRef("runStatus"), paramRef("runInputDigest")},
			responses: withProblems(obj{"200": response("A page of runs.", schemaRef("IngestionRunList"), false, nil)}, 400, 401, 404)},
		{method: "get", path: run, id: e.ID + ".ingestionRuns.read", tag: e.ID, summary: "Read an ingestion run.",
			params: []any{paramRef("runId"), ap}, responses: withProblems(obj{"200": run200}, 400, 401, 404)},
		{method: "post", path: run + "/chunks", id: e.ID + ".ingestionRuns.chunk", tag: e.ID, summary: "Submit the next chunk of an ingestion run.",
			params: []any{paramRef("runId"), ap}, body: jsonBody(schemaRef(e.ID + ".IngestionChunk")),
			responses: withProblems(obj{"200": response("The chunk's batch result.", schemaRef(cBatchResp(e)), false, nil)}, 400, 401, 404, 409, 412)},
		{method: "post", path: run + "/cancel", id: e.ID + ".ingestionRuns.cancel", tag: e.ID, summary: "Cancel an open or blocked ingestion run.",
			params: []any{paramRef("runId"), ap}, responses: withProblems(obj{"200": run200}, 400, 401, 404, 409)},
		{method: "get", path: run + "/chunks/{chunkIndex}/receipt", id: e.ID + ".ingestionRuns.receipt", tag: e.ID, summary: "Read the stored batch result of a committed chunk.",
			params:    []any{paramRef("runId"), paramRef("chunkIndex"), ap},
			responses: withProblems(obj{"200": response("The stored batch result.", schemaRef(cBatchResp(e)), false, nil)}, 400, 401, 404, 410)},
	}
}

// Change request actions: the path segment under actions/ and the request body.
var requestActions = []struct{ name, summary, body string }{
	{"submit", "Submit the draft request for review.", "RequestSubmitBody"},
	{"revise", "Revise or rebase a submitted request back to a draft.", "RequestReviseBody"},
	{"cancel", "Cancel a draft or submitted request.", "RequestCancelBody"},
	{"apply", "Apply the approved proposal's effects.", "RequestApplyBody"},
}

// requestOperations returns the change request action routes of a request entity.
func requestOperations(e *model.Entity, ap obj) []operation {
	var ops []operation
	for _, a := range requestActions {
		ops = append(ops, operation{method: "post", path: "/v1/records/" + e.Route + "/{recordId}/actions/" + a.name,
			id: e.ID + ".request." + a.name, tag: e.ID, summary: a.summary,
			params: []any{paramRef("recordId"), ap, paramRef("ifMatch"), paramRef("idempotencyKeyRequired")},
			body:   jsonBody(schemaRef(a.body)),
			responses: withProblems(obj{"200": response("The request after the action.", schemaRef("RequestActionResponse"), false, nil)},
				400, 401, 404, 409, 412, 428, 503)})
	}
	return ops
}

// attachmentOperations returns the upload, removal and download routes of
// each attachment slot of a request entity.
func attachmentOperations(e *model.Entity, ap obj) []operation {
	var ops []operation
	for _, s := range e.Attachments {
		path := "/v1/records/" + e.Route + "/{recordId}/attachments/" + s.ID
		upload := obj{}
		download := obj{}
		for _, t := range s.ContentTypes {
			upload[t] = obj{"schema": obj{"type": "string", "contentMediaType": t, "maxLength": s.MaximumBytes, "minLength": 1}}
			download[t] = obj{"schema": obj{"type": "string", "contentMediaType": t}}
		}
		mutation := response("The request record after the change.", schemaRef(cEnvelope(e)), true, recordHeaders(false))
		ops = append(ops,
			operation{method: "patch", path: path, id: e.ID + ".attachments." + s.ID + ".upload", tag: e.ID, summary: "Upload the content of slot " + s.ID + ".",
				params:    []any{paramRef("recordId"), ap, paramRef("ifMatch"), paramRef("idempotencyKeyRequired")},
				body:      obj{"required": true, "content": upload},
				responses: withProblems(obj{"200": mutation}, 400, 401, 404, 409, 412, 428, 503)},
			operation{method: "delete", path: path, id: e.ID + ".attachments." + s.ID + ".remove", tag: e.ID, summary: "Remove the content of slot " + s.ID + ".",
				params:    []any{paramRef("recordId"), ap, paramRef("ifMatch"), paramRef("idempotencyKeyRequired")},
				responses: withProblems(obj{"200": mutation}, 400, 401, 404, 409, 412, 428)},
			operation{method: "get", path: path, id: e.ID + ".attachments." + s.ID + ".download", tag: e.ID, summary: "Download the verified content of slot " + s.ID + ".",
				params: []any{paramRef("recordId"), ap, paramRef("proposalVersion")},
				responses: withProblems(obj{"200": obj{"description": "The complete, integrity-verified content, as an attachment.",
					"headers": obj{"Content-Disposition": ref("headers", "ContentDisposition"), "Cache-Control": ref("headers", "CacheControlNoStore"), "X-Content-Type-Options": ref("headers", "NoSniff")},
					"content": download}}, 400, 401, 404)},
		)
	}
	return ops
}

// actionOperations returns the routes of an immediate action.
func actionOperations(p *model.Package, a *model.Action) []operation {
	base := "/v1/actions/" + a.ID
	ap := accessProfileParam(actionProfiles(p, a.ID))
	return tagged([]operation{
		{method: "post", path: base, id: "action." + a.ID + ".invoke", tag: "actions", summary: "Invoke action " + a.ID + ".",
			params: []any{ap, paramRef("idempotencyKeyRequired")}, body: jsonBody(schemaRef(cAction(a))),
			responses: withProblems(obj{"200": response("The effects written.", schemaRef("ActionResult"), false, nil)}, actionProblems(a)...)},
		{method: "post", path: base + "/target-conditions", id: "action." + a.ID + ".targetConditions", tag: "actions", summary: "Show the records action " + a.ID + " would touch and their ifMatch.",
			params: []any{ap}, body: jsonBody(schemaRef(cConditions(a))),
			responses: withProblems(obj{"200": response("The target conditions.", schemaRef("ActionTargetConditions"), false, nil)}, 400, 401, 404)},
	}, model.CapImmediateActions, "", a.ID)
}

// gisOperations returns the spatial adapter routes when some entity has a
// GeoJSON geometry field.
func gisOperations(p *model.Package) []operation {
	var geo []*model.Entity
	for _, e := range p.Entities {
		if e.GeoJSON != nil {
			geo = append(geo, e)
		}
	}
	if len(geo) == 0 {
		return nil
	}
	doc := func(d string) obj { return response(d, obj{"type": "object"}, false, nil) }
	ops := []operation{
		{method: "get", path: "/v1/gis", id: "gis.landing", tag: "gis", summary: "Spatial adapter landing document (public).", noAuth: true,
			responses: withProblems(obj{"200": doc("The landing document: links to the API description, the conformance document and the collections.")}, 404)},
		{method: "get", path: "/v1/gis/api", id: "gis.api", tag: "gis", summary: "Spatial adapter API description: this OpenAPI document (public).", noAuth: true,
			responses: withProblems(obj{"200": obj{"description": "The OpenAPI document of the compiled package.",
				"content": obj{"application/vnd.oai.openapi+json": obj{"schema": obj{"type": "object"}}}}}, 404)},
		{method: "get", path: "/v1/gis/conformance", id: "gis.conformance", tag: "gis", summary: "Declared spatial adapter profile (public).", noAuth: true,
			responses: withProblems(obj{"200": response("The declared profile.", schemaRef("GisConformance"), false, nil)}, 404)},
		{method: "get", path: "/v1/gis/collections", id: "gis.collections", tag: "gis", summary: "Spatial collections the caller's profile may list.",
			params: []any{accessProfileParam(nil)}, responses: withProblems(obj{"200": doc("The collections the profile may read.")}, 401, 404)},
	}
	ops = tagged(ops, model.CapGIS, "", "")
	for _, e := range geo {
		c := "/v1/gis/collections/" + e.Route
		ap := accessProfileParam(entityProfiles(p, e.ID))
		ops = append(ops, tagged([]operation{
			{method: "get", path: c, id: "gis." + e.ID + ".collection", tag: "gis", summary: "Spatial collection of " + e.ID + " records.",
				params: []any{ap}, responses: withProblems(obj{"200": doc("The collection.")}, 400, 401, 404)},
			{method: "get", path: c + "/items", id: "gis." + e.ID + ".items", tag: "gis", summary: "GeoJSON features of " + e.ID + " records.",
				params: []any{ap, paramRef("bbox"), paramRef("gisLimit"), paramRef("gisCursor")},
				responses: withProblems(obj{"200": obj{"description": "A GeoJSON feature collection.",
					"content": obj{"application/geo+json": obj{"schema": schemaRef("FeatureCollection")}}}}, 400, 401, 404, 503)},
		}, model.CapGIS, e.ID, "")...)
	}
	return ops
}

// metadataOperations returns the registry metadata, schema and OpenAPI routes.
func metadataOperations(p *model.Package) []operation {
	ops := []operation{
		{method: "get", path: "/v1/registry", id: "registry.read", tag: "metadata", summary: "Registry metadata, filtered per caller profile.",
			params: []any{accessProfileParam(nil)}, responses: withProblems(obj{"200": response("The registry metadata.", obj{"type": "object"}, false, nil)}, 400, 401, 404)},
		{method: "get", path: "/openapi.json", id: "openapi.read", tag: "metadata", summary: "This OpenAPI document.", noAuth: true,
			responses: withProblems(obj{"200": obj{"description": "The OpenAPI document of the compiled package.",
				"content": obj{"application/vnd.oai.openapi+json": obj{"schema": obj{"type": "object"}}}}}, 404)},
	}
	for _, f := range p.Forms {
		ops = append(ops, operation{method: "get", path: model.FormRoutePath(p, f.ID), id: "forms." + f.ID + ".read", tag: "metadata",
			summary: "JSON Schema of form " + f.ID + ".", noAuth: true,
			responses: withProblems(obj{"200": obj{"description": "The form's JSON Schema.",
				"content": obj{"application/schema+json": obj{"schema": obj{"type": "object"}}}}}, 404)})
	}
	for _, e := range p.Entities {
		ops = append(ops, operation{method: "get", path: "/v1/schemas/" + e.ID, id: "schemas." + e.ID + ".read", tag: "metadata",
			summary: "JSON Schema of " + e.ID + " domain data.", noAuth: true,
			responses: withProblems(obj{"200": obj{"description": "The entity's JSON Schema.",
				"content": obj{"application/schema+json": obj{"schema": obj{"type": "object"}}}}}, 404)})
	}
	return tagged(ops, model.CapMetadata, "", "")
}

// patchPathPattern matches JSON Patch paths that name a field of the entity:
// /data/ then the field's apiName, optionally followed by a deeper pointer.
func patchPathPattern(e *model.Entity) string {
	names := make([]string, 0, len(e.Fields))
	for _, f := range e.Fields {
		names = append(names, regexp.QuoteMeta(f.APIName))
	}
	sort.Strings(names)
	return `^/data/(` + strings.Join(names, "|") + `)(/.*)?$`
}

// actionProblems are the problem statuses of an action's invocation: a
// handler adds its declared refusals (422) and its failures (503).
func actionProblems(a *model.Action) []int {
	statuses := []int{400, 401, 404, 409, 412, 428}
	if a.Handler != nil {
		statuses = append(statuses, 422, 503)
	}
	return statuses
}
