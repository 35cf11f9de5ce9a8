package generate

import (
	"fmt"

	"github.com/registrum/registrum/model"
)

// DigestPattern is a "sha256:<64 lowercase hex>" digest.
const DigestPattern = `^sha256:[0-9a-f]{64}$`

// EventSchemas returns the data schema of every event (hook) of p, keyed by
// generated/event-schemas/<entity-id>.<event-id>.schema.json.
func EventSchemas(p *model.Package) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, e := range p.Entities {
		for _, h := range e.Hooks {
			b, err := EventSchema(p, e, h)
			if err != nil {
				return nil, err
			}
			out[model.EventSchemaPath(e.ID, h.ID)] = b
		}
	}
	return out, nil
}

// EventSchema returns the JSON Schema (2020-12) of the data member of an
// event's body: entity, packageRevision, recordId, revision, trigger and the
// projected values (under their apiName), plus request for lifecycle events;
// no other member.
func EventSchema(p *model.Package, e *model.Entity, h *model.Hook) ([]byte, error) {
	where := fmt.Sprintf("generate: event %s.%s", e.ID, h.ID)
	values := obj{}
	names := []any{}
	for _, id := range h.Projection {
		f := e.Field(id)
		if f == nil {
			return nil, fmt.Errorf("%s: projection names %q, which is not a field of entity %s", where, id, e.ID)
		}
		s, err := FieldSchema(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		values[f.APIName] = s
		names = append(names, f.APIName)
	}
	props := obj{
		"entity":          obj{"const": e.ID},
		"packageRevision": obj{"type": "string", "pattern": DigestPattern},
		"recordId":        obj{"type": "string", "format": "uuid", "pattern": UUIDPattern},
		"revision":        obj{"type": "integer", "minimum": 1},
		"trigger":         obj{"const": h.Trigger},
		"values": obj{
			"type":                 "object",
			"additionalProperties": false,
			"required":             names,
			"properties":           values,
		},
	}
	required := []any{"entity", "packageRevision", "recordId", "revision", "trigger", "values"}
	if h.Trigger == model.TriggerRequestLifecycle {
		props["request"] = lifecycleRequestSchema()
		required = append(required, "request")
	}
	doc := obj{
		"$schema":              JSONSchemaDialect,
		"title":                e.ID + "." + h.ID,
		"type":                 "object",
		"additionalProperties": false,
		"required":             required,
		"properties":           props,
		"x-registry-event": obj{
			"registry":       p.Registry.ID,
			"entity":         e.ID,
			"event":          h.ID,
			"type":           h.EventType,
			"classification": h.Classification,
		},
	}
	b, err := encode(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return b, nil
}

// lifecycleRequestSchema is the request member of a lifecycle event's data.
func lifecycleRequestSchema() obj {
	str := obj{"type": "string", "minLength": 1}
	return obj{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"proposalVersion", "workflowRevision", "transition", "fromState", "toState", "deduplicationKey", "stage", "effectDigest"},
		"properties": obj{
			"proposalVersion":  obj{"type": "integer", "minimum": 1},
			"workflowRevision": obj{"type": "integer", "minimum": 1},
			"transition":       str,
			"fromState":        str,
			"toState":          str,
			"deduplicationKey": str,
			"stage":            obj{"anyOf": []any{str, obj{"type": "null"}}},
			"effectDigest":     obj{"anyOf": []any{obj{"type": "string", "pattern": DigestPattern}, obj{"type": "null"}}},
		},
	}
}

// EventSchemaURN returns the dataschema of an event:
// urn:engine:event-schema:<registry_id>:<entity_id>:<event_id>:sha256:<hex>,
// where the digest is taken over the canonical (RFC 8785) form of the
// event's generated data schema.
func EventSchemaURN(p *model.Package, entityID, eventID string) (string, error) {
	e := p.EntityByID(entityID)
	if e == nil {
		return "", fmt.Errorf("generate: event schema URN: no entity %q", entityID)
	}
	h := e.Hook(eventID)
	if h == nil {
		return "", fmt.Errorf("generate: event schema URN: entity %s has no event %q", entityID, eventID)
	}
	b, err := EventSchema(p, e, h)
	if err != nil {
		return "", err
	}
	return model.EventSchemaURNOf(p.Registry.ID, entityID, eventID, b)
}
