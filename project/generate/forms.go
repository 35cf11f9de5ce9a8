package generate

import (
	"errors"
	"fmt"

	"github.com/registrum/registrum/model"
)

// FormSchemaID returns the $id of a form's schema, which is also where it is
// published: {metadata_base}/forms/<form-id>/schema.json.
func FormSchemaID(p *model.Package, formID string) (string, error) {
	if p.Registry.URLs.MetadataBase == "" {
		return "", errors.New("generate: registry.urls.metadataBase is empty; form schemas are published under it")
	}
	return joinURL(p.Registry.URLs.MetadataBase, model.FormSchemaPath(formID)), nil
}

// FormSchemas returns the JSON Schema of every form of p, keyed by path.
func FormSchemas(p *model.Package) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, f := range p.Forms {
		b, err := FormSchema(p, f)
		if err != nil {
			return nil, err
		}
		out[model.FormSchemaPath(f.ID)] = b
	}
	return out, nil
}

// FormSchema returns the JSON Schema (2020-12) of a form: its $id, the
// schema_version marker, title and description, and an object of the form's
// fields that admits no other member. Each field carries its title, its
// concept address (x-concept-uri), the requirement it supports
// (x-supports-requirement) and the minItems/maxItems it declares; an array
// field's items are objects of the declared members, with
// additionalProperties false and the declared minProperties.
func FormSchema(p *model.Package, f *model.Form) ([]byte, error) {
	id, err := FormSchemaID(p, f.ID)
	if err != nil {
		return nil, err
	}
	doc, err := formObject(f.Fields, "form "+f.ID)
	if err != nil {
		return nil, err
	}
	doc["$schema"] = JSONSchemaDialect
	doc["$id"] = id
	doc["schema_version"] = model.FormSchemaVersion
	doc["title"] = f.Title
	doc["description"] = f.Description
	b, err := encode(doc)
	if err != nil {
		return nil, fmt.Errorf("generate: form %s schema: %w", f.ID, err)
	}
	return b, nil
}

// formObject returns the schema of an object made of the given members.
func formObject(fields []*model.FormField, where string) (obj, error) {
	props := obj{}
	required := []any{}
	for _, ff := range fields {
		s, err := formFieldSchema(ff, where+"."+ff.Name)
		if err != nil {
			return nil, err
		}
		if err := addProperty(props, ff.Name, s, where); err != nil {
			return nil, err
		}
		if ff.Required {
			required = append(required, ff.Name)
		}
	}
	return closedObject(props, required), nil
}

// formFieldSchema returns the schema of one form member.
func formFieldSchema(ff *model.FormField, where string) (obj, error) {
	switch ff.Type {
	case model.FormString, model.FormInteger, model.FormNumber, model.FormBoolean, model.FormArray, model.FormObject:
	default:
		return nil, fmt.Errorf("generate: %s: unknown form field type %q", where, ff.Type)
	}
	s := obj{"type": ff.Type}
	if ff.Title != "" {
		s["title"] = ff.Title
	}
	if ff.ConceptURI != "" {
		s["x-concept-uri"] = ff.ConceptURI
	}
	if ff.SupportsRequirement != "" {
		s["x-supports-requirement"] = ff.SupportsRequirement
	}
	if ff.MinItems != nil {
		s["minItems"] = *ff.MinItems
	}
	if ff.MaxItems != nil {
		s["maxItems"] = *ff.MaxItems
	}
	if ff.Items != nil {
		if ff.Type != model.FormArray {
			return nil, fmt.Errorf("generate: %s: items are declared on a %s field; only array fields have items", where, ff.Type)
		}
		items, err := formObject(ff.Items.Fields, where+"[]")
		if err != nil {
			return nil, err
		}
		if ff.Items.MinProperties != nil {
			items["minProperties"] = *ff.Items.MinProperties
		}
		s["items"] = items
	}
	return s, nil
}
