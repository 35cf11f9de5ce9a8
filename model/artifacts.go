package model

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/registrum/registrum/internal/canonjson"
)

// Package-relative paths of the generated artifacts.
const (
	// OpenAPIPath is the path of the OpenAPI document.
	OpenAPIPath = "openapi.json"
	// EntitySchemaDir holds one JSON Schema per entity.
	EntitySchemaDir = "schemas"
	// EventSchemaDir holds one JSON Schema per event (hook).
	EventSchemaDir = "generated/event-schemas"
	// FormSchemaDir holds one folder per form.
	FormSchemaDir = "forms"
)

// EntitySchemaPath returns the package-relative path of an entity's schema.
func EntitySchemaPath(entityID string) string {
	return EntitySchemaDir + "/" + entityID + ".schema.json"
}

// EventSchemaPath returns the package-relative path of an event's data schema.
func EventSchemaPath(entityID, eventID string) string {
	return EventSchemaDir + "/" + entityID + "." + eventID + ".schema.json"
}

// FormSchemaPath returns the package-relative path of a form's schema.
func FormSchemaPath(formID string) string {
	return FormSchemaDir + "/" + formID + "/schema.json"
}

// FormRoutePath returns the path at which the record host serves a form's
// schema: the path of {metadata_base}, then /forms/<form-id>/schema.json, so
// that the schema's $id resolves to the host when the metadata base is the
// host's own address.
func FormRoutePath(p *Package, formID string) string {
	prefix := ""
	if u, err := url.Parse(p.Registry.URLs.MetadataBase); err == nil {
		prefix = strings.TrimRight(u.Path, "/")
	}
	return prefix + "/" + FormSchemaPath(formID)
}

// EventSchemaURNOf returns the dataschema URN of an event,
// urn:engine:event-schema:<registry_id>:<entity_id>:<event_id>:sha256:<hex>,
// from the bytes of its generated schema file (as packaged), where the
// digest is taken over their canonical (RFC 8785) form: the host uses it to
// name events without regenerating their schemas.
func EventSchemaURNOf(registryID, entityID, eventID string, schema []byte) (string, error) {
	canon, err := canonjson.Transform(schema)
	if err != nil {
		return "", fmt.Errorf("model: event %s.%s schema: %w", entityID, eventID, err)
	}
	return "urn:engine:event-schema:" + registryID + ":" + entityID + ":" + eventID + ":" + canonjson.DigestBytes(canon), nil
}

// AttachmentExtension returns the x-registry-attachment member of a slot:
// requiredForSubmit, maximumBytes, contentTypes, classification and the
// verification policy.
func AttachmentExtension(s *AttachmentSlot) map[string]any {
	types := make([]any, len(s.ContentTypes))
	for i, t := range s.ContentTypes {
		types[i] = t
	}
	verification := map[string]any{"required": false}
	if s.Verification != nil {
		verification = map[string]any{"required": true, "verifier": s.Verification.Verifier, "policyId": s.Verification.PolicyID}
	}
	return map[string]any{
		"requiredForSubmit": s.Required,
		"maximumBytes":      s.MaximumBytes,
		"contentTypes":      types,
		"classification":    s.Classification,
		"verification":      verification,
	}
}
