package model

// FormSchemaVersion is the schema_version marker of a published form schema.
const FormSchemaVersion = "registry-manifest-form-json-schema/v1"

// Form is a published form definition; its JSON Schema (2020-12) is
// published at {metadata_base}/forms/<id>/schema.json, also its $id.
type Form struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description"`
	// Entity optionally names the request entity the form starts.
	Entity string       `json:"entity,omitempty"`
	Fields []*FormField `json:"fields"`
}

// Form field types: JSON Schema instance types.
const (
	FormString  = "string"
	FormInteger = "integer"
	FormNumber  = "number"
	FormBoolean = "boolean"
	FormArray   = "array"
	FormObject  = "object"
)

// FormField is one member of a form object.
type FormField struct {
	// Name is the JSON member name.
	Name     string `json:"name"`
	Type     string `json:"type"`
	Title    string `json:"title,omitempty"`
	Required bool   `json:"required,omitempty"`
	// ConceptURI is the resolved concept address ({concept_base}/<concept>),
	// published as x-concept-uri.
	ConceptURI string `json:"conceptUri,omitempty"`
	// SupportsRequirement is published as x-supports-requirement.
	SupportsRequirement string `json:"supportsRequirement,omitempty"`
	// MinItems and MaxItems are published as declared, whatever the type.
	MinItems *int `json:"minItems,omitempty"`
	MaxItems *int `json:"maxItems,omitempty"`
	// Items describes array items (type array only).
	Items *FormItems `json:"items,omitempty"`
}

// FormItems is the object each item of an array form field must be
// (additionalProperties false).
type FormItems struct {
	MinProperties *int         `json:"minProperties,omitempty"`
	Fields        []*FormField `json:"fields"`
}

// FormByID returns the form with the given id, or nil.
func (p *Package) FormByID(id string) *Form {
	for _, f := range p.Forms {
		if f.ID == id {
			return f
		}
	}
	return nil
}
