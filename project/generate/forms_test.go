package generate

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/registrum/registrum/model"
)

// applicationForm is the health-linked child support application form of
// seed 002, as the compiler resolves it (concept addresses under the
// registry's concept base).
func applicationForm() *model.Form {
	const cb = "https://concepts.example.test"
	return &model.Form{
		ID: "child-support-application", Title: "Health-linked child support application",
		Description: "Starts a health-linked child support review.",
		Fields: []*model.FormField{
			{Name: "supportType", Type: model.FormString, Title: "Support type", Required: true, ConceptURI: cb + "/support-type"},
			{Name: "applicantNationalId", Type: model.FormString, Title: "Applicant national ID", Required: true,
				MinItems: ptr(1), MaxItems: ptr(1), ConceptURI: cb + "/national-id", SupportsRequirement: "child_identity_requirement"},
			{Name: "children", Type: model.FormArray, Required: true, MinItems: ptr(1),
				Items: &model.FormItems{MinProperties: ptr(1), Fields: []*model.FormField{
					{Name: "childNationalId", Type: model.FormString, Title: "Child national ID", Required: true,
						MinItems: ptr(1), MaxItems: ptr(1), ConceptURI: cb + "/national-id", SupportsRequirement: "child_identity_requirement"},
				}}},
			{Name: "healthDistrict", Type: model.FormString, Title: "Health district", Required: true,
				ConceptURI: cb + "/health-district", SupportsRequirement: "health_linked_support_requirement"},
		},
	}
}

// seed002Schema is the schema seed 002 describes, written out by hand.
const seed002Schema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "https://registry.example.test/metadata/forms/child-support-application/schema.json",
  "schema_version": "registry-manifest-form-json-schema/v1",
  "title": "Health-linked child support application",
  "description": "Starts a health-linked child support review.",
  "type": "object",
  "additionalProperties": false,
  "required": ["supportType", "applicantNationalId", "children", "healthDistrict"],
  "properties": {
    "supportType": {"type": "string", "title": "Support type", "x-concept-uri": "https://concepts.example.test/support-type"},
    "applicantNationalId": {"type": "string", "title": "Applicant national ID", "minItems": 1, "maxItems": 1,
      "x-concept-uri": "https://concepts.example.test/national-id", "x-supports-requirement": "child_identity_requirement"},
    "children": {"type": "array", "minItems": 1, "items": {
      "type": "object", "additionalProperties": false, "minProperties": 1, "required": ["childNationalId"],
      "properties": {"childNationalId": {"type": "string", "title": "Child national ID", "minItems": 1, "maxItems": 1,
        "x-concept-uri": "https://concepts.example.test/national-id", "x-supports-requirement": "child_identity_requirement"}}}},
    "healthDistrict": {"type": "string", "title": "Health district",
      "x-concept-uri": "https://concepts.example.test/health-district", "x-supports-requirement": "health_linked_support_requirement"}
  }
}`

func TestFormSchemaIsExactlySeed002(t *testing.T) {
	p := testPackage()
	p.Forms = []*model.Form{applicationForm()}
	got, err := FormSchema(p, p.Forms[0])
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(seed002Schema), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("form schema differs from seed 002:\n%s", got)
	}
}

func TestFormSchemaValidatesSeed002Instances(t *testing.T) {
	p := testPackage()
	b, err := FormSchema(p, applicationForm())
	if err != nil {
		t.Fatal(err)
	}
	s := compileSchema(t, b)
	const child = `{"childNationalId":"C1"}`
	form := func(children string) string {
		return `{"supportType":"medical","applicantNationalId":"A1","children":` + children + `,"healthDistrict":"north"}`
	}
	for _, in := range []string{form(`[` + child + `]`), form(`[` + child + `,{"childNationalId":"C2"}]`)} {
		if err := validates(t, s, in); err != nil {
			t.Errorf("admitted instance refused: %s\n%v", in, err)
		}
	}
	refused := map[string]string{
		"missing supportType":     `{"applicantNationalId":"A1","children":[` + child + `],"healthDistrict":"north"}`,
		"missing healthDistrict":  `{"supportType":"medical","applicantNationalId":"A1","children":[` + child + `]}`,
		"missing applicant":       `{"supportType":"medical","children":[` + child + `],"healthDistrict":"north"}`,
		"missing children":        `{"supportType":"medical","applicantNationalId":"A1","healthDistrict":"north"}`,
		"extra property":          strings.TrimSuffix(form(`[`+child+`]`), "}") + `,"note":"x"}`,
		"empty children":          form(`[]`),
		"child without id":        form(`[{}]`),
		"child with other member": form(`[{"childNationalId":"C1","name":"x"}]`),
		"child only other member": form(`[{"name":"x"}]`),
		"child not an object":     form(`["C1"]`),
		"supportType not string":  `{"supportType":1,"applicantNationalId":"A1","children":[` + child + `],"healthDistrict":"north"}`,
		"not an object":           `[]`,
	}
	for name, in := range refused {
		if err := validates(t, s, in); err == nil {
			t.Errorf("%s: refused instance accepted: %s", name, in)
		}
	}
}

func TestFormSchemaRefusesBadDefinitions(t *testing.T) {
	p := testPackage()
	cases := map[string]*model.Form{
		"declared twice": {ID: "f", Fields: []*model.FormField{{Name: "a", Type: "string"}, {Name: "a", Type: "string"}}},
		"unknown form":   {ID: "f", Fields: []*model.FormField{{Name: "a", Type: "date"}}},
		"only array":     {ID: "f", Fields: []*model.FormField{{Name: "a", Type: "string", Items: &model.FormItems{}}}},
	}
	for name, f := range cases {
		if _, err := FormSchema(p, f); err == nil || !strings.Contains(err.Error(), "form f") || !strings.Contains(err.Error(), "a") {
			t.Errorf("%s: err = %v, want an error naming form f and member a", name, err)
		}
	}
}
