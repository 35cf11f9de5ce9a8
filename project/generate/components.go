package generate

import (
	"fmt"

	"github.com/registrum/registrum/model"
)

// problemResponse names the problem response of one HTTP status and the codes
// the specification gives it.
type problemResponse struct {
	name  string
	codes []string
}

// problemResponses are the problem documents the host answers, by status.
var problemResponses = map[int]problemResponse{
	400: {"BadRequest", []string{"request.invalid", "query.invalid", "query.cursor_invalid", "request.plan_refused"}},
	401: {"Unauthorized", []string{"authentication.refused"}},
	404: {"NotFound", []string{"resource.not_found"}},
	409: {"Conflict", []string{"idempotency.conflict", "idempotency.outcome_erased", "mutation.conflict"}},
	410: {"Gone", []string{"ingestion.receipt_erased"}},
	412: {"PreconditionFailed", []string{"precondition.failed"}},
	422: {"UnprocessableContent", []string{"action.refused"}},
	428: {"PreconditionRequired", []string{"precondition.required"}},
	429: {"TooManyRequests", []string{"rate_limit.exceeded"}},
	503: {"ServiceUnavailable", []string{"source.unavailable", "service.unavailable"}},
}

// Component names of an entity.
func cData(e *model.Entity) string       { return e.ID + ".Data" }
func cReadData(e *model.Entity) string   { return e.ID + ".ReadData" }
func cEnvelope(e *model.Entity) string   { return e.ID + ".Envelope" }
func cCollection(e *model.Entity) string { return e.ID + ".Collection" }
func cCreate(e *model.Entity) string     { return e.ID + ".CreateBody" }
func cPatch(e *model.Entity) string      { return e.ID + ".Patch" }
func cBatch(e *model.Entity) string      { return e.ID + ".BatchBody" }
func cBatchResp(e *model.Entity) string  { return e.ID + ".BatchResult" }
func cAction(a *model.Action) string     { return "action." + a.ID + ".Body" }
func cActionIn(a *model.Action) string   { return "action." + a.ID + ".Input" }
func cConditions(a *model.Action) string { return "action." + a.ID + ".TargetConditionsBody" }

// components returns the components of the OpenAPI document.
func components(p *model.Package) (obj, error) {
	schemas := commonSchemas(p)
	for _, e := range p.Entities {
		if err := entityComponents(p, e, schemas); err != nil {
			return nil, err
		}
	}
	for _, a := range p.Actions {
		if err := actionComponents(a, schemas); err != nil {
			return nil, err
		}
	}
	responses := obj{}
	for status, r := range problemResponses {
		codes := make([]any, len(r.codes))
		for i, c := range r.codes {
			codes[i] = c
		}
		resp := obj{
			"description": fmt.Sprintf("Problem document (status %d).", status),
			"content": obj{"application/problem+json": obj{"schema": obj{
				"allOf": []any{schemaRef("Problem"), obj{"properties": obj{"status": obj{"const": status}, "code": obj{"enum": codes}}}},
			}}},
		}
		switch status {
		case 401:
			resp["headers"] = obj{"WWW-Authenticate": ref("headers", "WWWAuthenticate")}
		case 429, 503:
			resp["headers"] = obj{"Retry-After": ref("headers", "RetryAfter")}
		}
		responses[r.name] = resp
	}
	return obj{
		"schemas":         schemas,
		"responses":       responses,
		"parameters":      parameters(),
		"headers":         headers(),
		"securitySchemes": obj{"bearer": obj{"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
	}, nil
}

// parameters are the shared parameters.
func parameters() obj {
	q := func(name, desc string, schema obj) obj {
		return obj{"name": name, "in": "query", "required": false, "description": desc, "schema": schema}
	}
	path := func(name, desc string, schema obj) obj {
		return obj{"name": name, "in": "path", "required": true, "description": desc, "schema": schema}
	}
	header := func(name, desc string, required bool, schema obj) obj {
		return obj{"name": name, "in": "header", "required": required, "description": desc, "schema": schema}
	}
	str := obj{"type": "string"}
	key := obj{"type": "string", "minLength": 1, "maxLength": 256}
	etag := obj{"type": "string", "pattern": ETagPattern}
	return obj{
		"select":                             q("$select", "Fields (apiNames) from the grant's readable fields, comma separated.", str),
		"filter":                             q("$filter", "Filter expression over the grant's filterable fields.", str),
		"orderby":                            q("$orderby", "Sort fields from the grant's sortable fields.", str),
		"count":                              q("$count", "Adds the matching total beside the page; needs allowCount.", obj{"type": "boolean"}),
		"top":                                q("$top", "Page size, 1 to 100 (default 25).", obj{"type": "integer", "minimum": 1, "maximum": 100, "default": 25}),
		"skiptoken":                          q("$skiptoken", "Cursor of the next page; sent alone with only accessProfile.", str),
		"bbox":                               q("bbox", "Four CRS84 degrees: west, south, east, north; west above east crosses the antimeridian; edges included.", obj{"type": "string", "maxLength": 128, "pattern": `^-?[0-9]+(\.[0-9]+)?(,-?[0-9]+(\.[0-9]+)?){3}$`}),
		"asOf":                               obj{"name": "asOf", "in": "query", "required": true, "description": "UTC RFC 3339 timestamp the intervals must contain.", "schema": obj{"type": "string", "format": "date-time", "pattern": TimestampPattern}},
		"snapshot":                           q("snapshot", "Snapshot token to reproduce; without it the latest committed state is captured.", obj{"type": "string", "maxLength": 4096}),
		"requestHistoryAfterProposalVersion": q("requestHistoryAfterProposalVersion", "Continue the retained request history after this proposal version.", obj{"type": "integer", "minimum": 0}),
		"proposalVersion":                    obj{"name": "proposalVersion", "in": "query", "required": true, "description": "Proposal version of the attachment.", "schema": obj{"type": "integer", "minimum": 1}},
		"runLimit":                           q("limit", "Page size (default 25).", obj{"type": "integer", "minimum": 1, "maximum": 100, "default": 25}),
		"runAfter":                           q("after", "Run id after which the page starts.", str),
		"runStatus":                          q("status", "Only runs in this status.", obj{"type": "string", "enum": []any{"open", "complete", "cancelled", "blocked"}}),
		"runInputDigest":                     q("inputDigest", "Only runs of this input digest.", obj{"type": "string", "pattern": HexDigestPattern}),
		"gisLimit":                           q("limit", "Page size, 1 to 10000 (default 100).", obj{"type": "integer", "minimum": 1, "maximum": 10000, "default": 100}),
		"gisCursor":                          q("cursor", "Cursor of the next page (from the next link); sent alone with only accessProfile.", str),
		"recordId":                           path("recordId", "Record identifier.", obj{"type": "string", "format": "uuid", "pattern": UUIDPattern}),
		"revision":                           path("revision", "Revision number.", obj{"type": "string", "pattern": RevisionPattern}),
		"runId":                              path("runId", "Ingestion run identifier.", str),
		"chunkIndex":                         path("chunkIndex", "Chunk index.", obj{"type": "integer", "minimum": 0}),
		"ifNoneMatch":                        header("If-None-Match", "ETags the client holds; when one is current the answer is 304 Not Modified.", false, obj{"type": "string"}),
		"ifMatch":                            header("If-Match", "Required: the ETag (or an action's ifMatch) of the current revision.", true, etag),
		"idempotencyKey":                     header("Idempotency-Key", "Replays of the same request return the stored response.", false, key),
		"idempotencyKeyRequired":             header("Idempotency-Key", "Required: replays of the same request return the stored response.", true, key),
	}
}

// headers are the shared response headers.
func headers() obj {
	h := func(desc string, schema obj) obj { return obj{"description": desc, "schema": schema} }
	return obj{
		"ETag":                h("Strong validator of the current revision; send it back in If-Match.", obj{"type": "string", "pattern": ETagPattern}),
		"Link":                h(`<{profile_url}>; rel="profile", then </v1/schemas/{entity}>; rel="describedby".`, obj{"type": "string"}),
		"Location":            h("Path of the created record.", obj{"type": "string"}),
		"ContentDisposition":  h("Attachment disposition.", obj{"type": "string"}),
		"CacheControlNoStore": h("no-store", obj{"const": "no-store"}),
		"NoSniff":             h("nosniff", obj{"const": "nosniff"}),
		"RetryAfter":          h("Seconds to wait before retrying.", obj{"type": "string", "pattern": "^[0-9]+$"}),
		"WWWAuthenticate":     h(`Bearer challenge of RFC 6750 with error="invalid_token".`, obj{"type": "string"}),
	}
}

// Patterns of the protocol's own values.
const (
	// ETagPattern is a quoted engine-hmac-sha256 validator.
	ETagPattern = `^"engine-hmac-sha256:[0-9a-f]{64}"$`
	// RevisionPattern is a revision counter compared as a string.
	RevisionPattern = `^[1-9][0-9]*$`
	// HexDigestPattern is a bare SHA-256 digest: 64 lowercase hex digits.
	HexDigestPattern = `^[0-9a-f]{64}$`
)

// commonSchemas are the component schemas shared by every entity.
func commonSchemas(p *model.Package) obj {
	str := obj{"type": "string"}
	nullable := func(s obj) obj { return obj{"anyOf": []any{s, obj{"type": "null"}}} }
	integer := obj{"type": "integer"}
	digest := obj{"type": "string", "pattern": DigestPattern}
	hex := obj{"type": "string", "pattern": HexDigestPattern}
	ts := obj{"type": "string", "format": "date-time"}
	return obj{
		"Problem": obj{
			"type":     "object",
			"required": []any{"type", "title", "status", "detail", "code", "traceId", "fieldPath"},
			"properties": obj{
				"type":      obj{"type": "string", "format": "uri-reference", "description": "{problem_type_base}/ then the code with dots read as path segments."},
				"title":     str,
				"status":    obj{"type": "integer", "minimum": 400, "maximum": 599},
				"detail":    str,
				"code":      str,
				"traceId":   obj{"type": "string", "pattern": `^[0-9a-f]{32}$`},
				"fieldPath": nullable(str),
			},
		},
		"Meta": obj{
			"type":     "object",
			"required": []any{"registryIdentifier", "datasetIdentifier", "entityTypeIdentifier"},
			"properties": obj{
				"registryIdentifier":   obj{"const": p.Registry.ID},
				"datasetIdentifier":    str,
				"entityTypeIdentifier": str,
			},
		},
		"PageInfo": obj{
			"type":       "object",
			"required":   []any{"nextCursor"},
			"properties": obj{"nextCursor": nullable(str)},
		},
		"JSONPatchOperation": obj{
			"type":     "object",
			"required": []any{"op", "path"},
			"properties": obj{
				"op":    obj{"type": "string", "enum": []any{"add", "remove", "replace", "move", "copy", "test"}},
				"path":  str,
				"from":  str,
				"value": obj{},
			},
		},
		"ChangeContext": obj{
			"type":                 "object",
			"additionalProperties": false,
			"required":             []any{"kind"},
			"properties": obj{
				"kind":             str,
				"reasonCode":       obj{"type": "string", "maxLength": 64, "description": "At most 64 UTF-8 bytes; required nonempty for kind correction."},
				"reasonText":       obj{"type": "string", "maxLength": 4096, "description": "At most 4 KiB."},
				"sourceReferences": obj{"type": "array", "maxItems": 16, "items": obj{"type": "string", "maxLength": 256}},
			},
		},
		"IngestionRunCreate": obj{
			"type":                 "object",
			"additionalProperties": false,
			"required":             []any{"operation", "profileId", "packageRevision", "schemaFingerprint", "inputDigest", "inputLength", "itemCount", "chunkCount", "chunkAlgorithmVersion"},
			"properties": obj{
				"operation":             obj{"type": "string", "enum": []any{"create", "patch"}},
				"profileId":             str,
				"packageRevision":       digest,
				"schemaFingerprint":     digest,
				"inputDigest":           hex,
				"inputLength":           obj{"type": "integer", "minimum": 0},
				"itemCount":             obj{"type": "integer", "minimum": 1},
				"chunkCount":            obj{"type": "integer", "minimum": 1},
				"chunkAlgorithmVersion": obj{"const": "greedy-canonical-http-batch-v1"},
			},
		},
		"IngestionRun": obj{
			"type": "object",
			"required": []any{"runId", "status", "entityId", "operation", "profileId", "packageRevision", "schemaFingerprint",
				"inputDigest", "inputLength", "itemCount", "chunkCount", "chunkAlgorithmVersion", "maximumItems", "maximumBytes",
				"nextChunkIndex", "committedItems", "committedPrefixDigest", "lastAttempt", "createdAt", "updatedAt", "complete"},
			"properties": obj{
				"runId":                 str,
				"status":                obj{"type": "string", "enum": []any{"open", "complete", "cancelled", "blocked"}},
				"blockedReason":         obj{"const": "activePackageChanged"},
				"entityId":              str,
				"operation":             obj{"type": "string", "enum": []any{"create", "patch"}},
				"profileId":             str,
				"packageRevision":       digest,
				"schemaFingerprint":     digest,
				"inputDigest":           hex,
				"inputLength":           integer,
				"itemCount":             integer,
				"chunkCount":            integer,
				"chunkAlgorithmVersion": obj{"const": "greedy-canonical-http-batch-v1"},
				"maximumItems":          integer,
				"maximumBytes":          integer,
				"nextChunkIndex":        integer,
				"committedItems":        integer,
				"committedPrefixDigest": hex,
				"lastAttempt": nullable(obj{
					"type":     "object",
					"required": []any{"outcome", "chunkIndex"},
					"properties": obj{
						"outcome":    obj{"type": "string", "enum": []any{"committed", "replayed", "invalidItem", "refused", "bindingChanged", "chunkMismatch", "runNotOpen", "unavailable"}},
						"chunkIndex": integer,
					},
				}),
				"createdAt": ts,
				"updatedAt": ts,
				"complete":  obj{"type": "boolean"},
			},
		},
		"IngestionRunList": obj{
			"type":     "object",
			"required": []any{"runs"},
			"properties": obj{
				"runs":      obj{"type": "array", "items": schemaRef("IngestionRun")},
				"hasMore":   obj{"type": "boolean"},
				"nextAfter": nullable(str),
			},
		},
		"ChangeRequest":         changeRequestSchema(),
		"RequestActionResponse": requestActionResponseSchema(),
		"RequestSubmitBody":     obj{"type": "object", "additionalProperties": false, "properties": obj{"actorReference": actorReference}},
		"RequestCancelBody":     obj{"type": "object", "additionalProperties": false, "properties": obj{"actorReference": actorReference}},
		"RequestReviseBody": obj{
			"type":                 "object",
			"additionalProperties": false,
			"properties": obj{
				"rebase":         obj{"type": "boolean", "description": "Optional: absent means the value the offered revise_request carries; another value is refused."},
				"actorReference": actorReference,
			},
		},
		"RequestApplyBody": obj{
			"type":                 "object",
			"additionalProperties": false,
			"required":             []any{"proposalVersion", "effectDigest"},
			"properties": obj{
				"proposalVersion": obj{"type": "integer", "minimum": 1},
				"effectDigest":    digest,
				"reason":          obj{"type": "string", "maxLength": 4096},
				"actorReference":  actorReference,
			},
		},
		"ActionResult": obj{
			"type":     "object",
			"required": []any{"action", "applicationId", "results"},
			"properties": obj{
				"action":        str,
				"applicationId": str,
				"results": obj{"type": "array", "items": obj{
					"type":     "object",
					"required": []any{"entity", "recordId", "revision"},
					"properties": obj{
						"entity":   str,
						"recordId": obj{"type": "string", "format": "uuid"},
						"revision": obj{"type": "integer", "minimum": 1},
					},
				}},
			},
		},
		"ActionTargetConditions": obj{
			"type":     "object",
			"required": []any{"preconditions"},
			"properties": obj{
				"preconditions": obj{"type": "object", "additionalProperties": obj{
					"type":     "object",
					"required": []any{"entity", "recordId", "ifMatch"},
					"properties": obj{
						"entity":   str,
						"recordId": obj{"type": "string", "format": "uuid"},
						"ifMatch":  str,
					},
				}},
			},
		},
		"GisConformance": obj{
			"type":       "object",
			"required":   []any{"conformsTo"},
			"properties": obj{"conformsTo": obj{"type": "array", "items": str}},
		},
		"FeatureCollection": obj{
			"type":     "object",
			"required": []any{"type", "features"},
			"properties": obj{
				"type": obj{"const": "FeatureCollection"},
				"features": obj{"type": "array", "items": obj{
					"type":     "object",
					"required": []any{"type", "id", "geometry", "properties"},
					"properties": obj{
						"type":       obj{"const": "Feature"},
						"id":         obj{"type": "string", "format": "uuid"},
						"geometry":   nullable(pointSchema()),
						"properties": obj{"type": "object"},
					},
				}},
				"numberReturned": obj{"type": "integer", "minimum": 0},
				"links": obj{"type": "array", "items": obj{
					"type":       "object",
					"required":   []any{"rel", "href"},
					"properties": obj{"rel": str, "href": str, "type": str},
				}},
			},
		},
	}
}

// changeRequestSchema is data.request on change request records.
func changeRequestSchema() obj {
	str := obj{"type": "string"}
	digest := obj{"type": "string", "pattern": DigestPattern}
	return obj{
		"type":     "object",
		"required": []any{"engineState", "proposalVersion", "editable", "actions"},
		"properties": obj{
			"engineState":     obj{"type": "string", "enum": []any{"draft", "submitted", "applied", "cancelled"}},
			"proposalVersion": obj{"type": "integer", "minimum": 1},
			"effectDigest":    digest,
			"proposal":        obj{"type": "object"},
			"review":          obj{"type": "object"},
			"editable":        obj{"type": "boolean"},
			"actions": obj{"type": "array", "items": obj{
				"type":     "object",
				"required": []any{"operation", "href"},
				"properties": obj{
					"operation":       str,
					"href":            str,
					"ifMatch":         str,
					"proposalVersion": obj{"type": "integer"},
					"effectDigest":    digest,
					"rebase":          obj{"type": "boolean"},
				},
			}},
			"history":      obj{"type": "object"},
			"detailErased": obj{"type": "boolean"},
			"application": obj{"anyOf": []any{obj{"type": "null"}, obj{
				"type":     "object",
				"required": []any{"applicationId", "proposalVersion", "effectDigest", "appliedAt", "reasonPresent"},
				"properties": obj{
					"applicationId":   str,
					"proposalVersion": obj{"type": "integer"},
					"effectDigest":    digest,
					"appliedAt":       obj{"type": "string", "format": "date-time"},
					"reasonPresent":   obj{"type": "boolean"},
					"reason":          str,
				},
			}}},
			"submitterReference": str,
			"applierReference":   str,
		},
	}
}

// actorReference is the optional member of every change-request action
// body: who acts, recorded with the action; without it the host records the
// caller's keyed principal reference. JSON Schema counts characters, the
// host bytes: the bound in bytes is in the description.
var actorReference = obj{"type": "string", "minLength": 1, "maxLength": 256, "description": "Optional: at most 256 UTF-8 bytes, no control characters; absent means the caller's principal reference."}

// requestActionResponseSchema is the answer of a change request action.
func requestActionResponseSchema() obj {
	return obj{
		"type":     "object",
		"required": []any{"id", "revision", "snapshot", "request", "actorReference"},
		"properties": obj{
			"id":             obj{"type": "string", "format": "uuid"},
			"revision":       obj{"type": "integer", "minimum": 1},
			"snapshot":       obj{"type": "string", "maxLength": 4096},
			"request":        schemaRef("ChangeRequest"),
			"actorReference": obj{"type": "string"},
		},
	}
}

// revisionChangeContext is the correction context on revision reads: the
// members of the batch's change context that the revisions grant lists in
// provenanceFields, when every revision of the batch is visible.
var revisionChangeContext = obj{"type": "object", "description": "On revision reads: the correction context of the revision's batch (the provenanceFields of the revisions grant).",
	"properties": obj{"kind": obj{"type": "string"}, "reasonCode": obj{"type": "string"}, "reasonText": obj{"type": "string"}, "sourceReferences": obj{"type": "array"}}}

// entityComponents adds the component schemas of one entity.
func entityComponents(p *model.Package, e *model.Entity, schemas obj) error {
	full, err := domainDataSchema(e, dataWrite)
	if err != nil {
		return err
	}
	read, err := domainDataSchema(e, dataRead)
	if err != nil {
		return err
	}
	schemas[cData(e)] = full
	schemas[cReadData(e)] = read
	data := obj{
		"recordIdentifier":   obj{"type": "string", "format": "uuid", "pattern": UUIDPattern},
		"revisionIdentifier": obj{"type": "string", "pattern": RevisionPattern},
		"domainData":         schemaRef(cReadData(e)),
		"snapshot":           obj{"type": "string", "maxLength": 4096},
		"tombstoned":         obj{"type": "boolean", "description": "The final revision of a tombstoned record."},
		"changeContext":      revisionChangeContext,
	}
	if e.IsRequestEntity() {
		data["request"] = schemaRef("ChangeRequest")
	}
	if hasRequestPresence(p, e.ID) {
		data["requestPresence"] = obj{"type": "object"}
	}
	schemas[cEnvelope(e)] = obj{
		"type":     "object",
		"required": []any{"data", "meta"},
		"properties": obj{
			"@context": obj{"type": "string"},
			"data":     obj{"type": "object", "required": []any{"recordIdentifier", "revisionIdentifier", "domainData"}, "properties": data},
			"meta":     schemaRef("Meta"),
		},
	}
	schemas[cCollection(e)] = obj{
		"type":     "object",
		"required": []any{"items", "pageInfo", "meta"},
		"properties": obj{
			"@context": obj{"type": "string"},
			"items": obj{"type": "array", "items": obj{
				"type":     "object",
				"required": []any{"recordIdentifier", "revisionIdentifier", "domainData"},
				"properties": obj{
					"recordIdentifier":   obj{"type": "string", "format": "uuid", "pattern": UUIDPattern},
					"revisionIdentifier": obj{"type": "string", "pattern": RevisionPattern},
					"domainData":         schemaRef(cReadData(e)),
					"tombstoned":         obj{"type": "boolean", "description": "On revision reads: the final revision of a tombstoned record."},
					"changeContext":      revisionChangeContext,
				},
			}},
			"pageInfo": schemaRef("PageInfo"),
			"meta":     schemaRef("Meta"),
			"count":    obj{"type": "integer", "minimum": 0, "description": "Matching total, with $count."},
			"snapshot": obj{"type": "string", "maxLength": 4096, "description": "On :snapshot reads: the token of the state read."},
		},
	}
	schemas[cCreate(e)] = obj{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"data"},
		"properties":           obj{"data": schemaRef(cData(e))},
	}
	patchOp := obj{"allOf": []any{schemaRef("JSONPatchOperation"), obj{"properties": obj{"path": obj{"pattern": patchPathPattern(e)}}}}}
	schemas[cPatch(e)] = obj{"type": "array", "minItems": 1, "items": patchOp}
	if e.Batch != nil {
		items := []any{obj{
			"type":                 "object",
			"additionalProperties": false,
			"required":             []any{"operation", "data"},
			"properties":           obj{"operation": obj{"const": "create"}, "data": schemaRef(cData(e))},
		}}
		if e.MutationMode == model.Mutable {
			items = append(items, obj{
				"type":                 "object",
				"additionalProperties": false,
				"required":             []any{"operation", "id", "ifMatch", "patch"},
				"properties": obj{
					"operation": obj{"const": "patch"},
					"id":        obj{"type": "string", "format": "uuid", "pattern": UUIDPattern},
					"ifMatch":   obj{"type": "string", "pattern": ETagPattern},
					"patch":     schemaRef(cPatch(e)),
				},
			})
		}
		itemList := obj{"type": "array", "minItems": 1, "maxItems": e.Batch.MaximumItems, "items": obj{"oneOf": items}}
		schemas[cBatch(e)] = obj{
			"type":                 "object",
			"additionalProperties": false,
			"required":             []any{"items"},
			"description":          fmt.Sprintf("At most %d items and %d bytes.", e.Batch.MaximumItems, e.Batch.MaximumBytes),
			"properties":           obj{"items": itemList, "changeContext": schemaRef("ChangeContext")},
		}
		schemas[cBatchResp(e)] = obj{
			"type":     "object",
			"required": []any{"snapshot", "results"},
			"properties": obj{
				"snapshot": obj{"type": "string", "maxLength": 4096},
				"results": obj{"type": "array", "items": obj{
					"type":     "object",
					"required": []any{"operation", "id", "revision", "etag", "data"},
					"properties": obj{
						"operation": obj{"type": "string", "enum": []any{"create", "patch"}},
						"id":        obj{"type": "string", "format": "uuid"},
						"revision":  obj{"type": "integer", "minimum": 1},
						"etag":      obj{"type": "string"},
						"data":      schemaRef(cReadData(e)),
					},
				}},
			},
		}
		schemas[e.ID+".IngestionChunk"] = obj{
			"type":                 "object",
			"additionalProperties": false,
			"required":             []any{"chunkIndex", "items", "digest", "prefixDigest"},
			"properties": obj{
				"chunkIndex":   obj{"type": "integer", "minimum": 0},
				"items":        itemList,
				"digest":       obj{"type": "string", "pattern": HexDigestPattern},
				"prefixDigest": obj{"type": "string", "pattern": HexDigestPattern},
			},
		}
	}
	return nil
}

// actionComponents adds the component schemas of one immediate action.
func actionComponents(a *model.Action, schemas obj) error {
	props := obj{}
	required := []any{}
	for _, in := range a.Inputs {
		s, err := FieldSchema(in)
		if err != nil {
			return fmt.Errorf("generate: action %s input: %w", a.ID, err)
		}
		if err := addProperty(props, in.APIName, s, "action "+a.ID+" input"); err != nil {
			return err
		}
		if in.Required {
			required = append(required, in.APIName)
		}
	}
	schemas[cActionIn(a)] = closedObject(props, required)
	pre := obj{}
	for _, ef := range a.Effects {
		pre[ef.ID] = obj{
			"type":                 "object",
			"additionalProperties": false,
			"required":             []any{"ifMatch"},
			"properties":           obj{"ifMatch": obj{"type": "string"}},
		}
	}
	schemas[cAction(a)] = obj{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"input"},
		"properties": obj{
			"input":         schemaRef(cActionIn(a)),
			"preconditions": obj{"type": "object", "additionalProperties": false, "properties": pre},
		},
	}
	schemas[cConditions(a)] = obj{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"input"},
		"properties":           obj{"input": schemaRef(cActionIn(a))},
	}
	return nil
}
