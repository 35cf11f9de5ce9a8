package generate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/registrum/registrum/model"
)

func entitySchemaOf(t *testing.T, p *model.Package, id string) ([]byte, map[string]any) {
	t.Helper()
	b, err := EntitySchema(p, p.EntityByID(id))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return b, doc
}

func TestEntitySchemaHeader(t *testing.T) {
	_, doc := entitySchemaOf(t, testPackage(), "person")
	want := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"$id":                  "https://registry.example.test/metadata/schemas/person.schema.json",
		"type":                 "object",
		"additionalProperties": false,
	}
	for k, v := range want {
		if doc[k] != v {
			t.Errorf("%s = %v, want %v", k, doc[k], v)
		}
	}
	req, _ := json.Marshal(doc["required"])
	if string(req) != `["nationalId","active","status"]` {
		t.Errorf("required = %s, want the apiNames of the required fields", req)
	}
	props := doc["properties"].(map[string]any)
	for _, name := range []string{"nationalId", "childrenCount", "birthDate", "registeredAt", "externalId", "home", "extra"} {
		if _, ok := props[name]; !ok {
			t.Errorf("property %s (by apiName) missing", name)
		}
	}
	if _, ok := props["national-id"]; ok {
		t.Error("properties are keyed by authored id, want apiName")
	}
}

func TestEntitySchemaNeedsMetadataBase(t *testing.T) {
	p := testPackage()
	p.Registry.URLs.MetadataBase = ""
	_, err := EntitySchema(p, p.Entities[0])
	if err == nil || !strings.Contains(err.Error(), "metadataBase") {
		t.Fatalf("err = %v, want one naming metadataBase", err)
	}
}

func TestEntitySchemaNullableIsAnyOfTypeAndNull(t *testing.T) {
	_, doc := entitySchemaOf(t, testPackage(), "person")
	props := doc["properties"].(map[string]any)
	notes := props["notes"].(map[string]any)
	anyOf, ok := notes["anyOf"].([]any)
	if !ok || len(anyOf) != 2 {
		t.Fatalf("optional field notes = %v, want anyOf of two", notes)
	}
	if anyOf[0].(map[string]any)["type"] != "string" || anyOf[1].(map[string]any)["type"] != "null" {
		t.Fatalf("notes anyOf = %v, want [string, null]", anyOf)
	}
	if _, ok := props["nationalId"].(map[string]any)["anyOf"]; ok {
		t.Fatal("required field nationalId is nullable")
	}
}

// TestEntitySchemaValidatesInstances runs the generated schema through an
// independent JSON Schema 2020-12 validator: each type's encoding and bounds.
func TestEntitySchemaValidatesInstances(t *testing.T) {
	b, _ := entitySchemaOf(t, testPackage(), "person")
	s := compileSchema(t, b)
	const base = `"nationalId":"AB123","active":true,"status":"active"`
	valid := []string{
		`{` + base + `}`,
		`{` + base + `,"notes":null,"childrenCount":null,"income":null,"birthDate":null,"registeredAt":null,"externalId":null,"district":null,"home":null,"extra":null}`,
		`{` + base + `,"notes":"` + strings.Repeat("é", 2000) + `"}`,
		`{` + base + `,"childrenCount":0}`,
		`{` + base + `,"childrenCount":40}`,
		`{` + base + `,"score":9223372036854775807}`,
		`{` + base + `,"score":-9223372036854775808}`,
		`{` + base + `,"income":"12345678.90"}`,
		`{` + base + `,"income":"-0.50"}`,
		`{` + base + `,"birthDate":"2020-02-29"}`,
		`{` + base + `,"registeredAt":"2026-11-22T01:02:03Z"}`,
		`{` + base + `,"registeredAt":"2026-11-22T01:02:03.123456Z"}`,
		`{` + base + `,"externalId":"0b6d7c8e-1f2a-4b3c-8d4e-5f6a7b8c9d0e"}`,
		`{` + base + `,"district":"0b6d7c8e-1f2a-4b3c-8d4e-5f6a7b8c9d0e"}`,
		`{` + base + `,"home":{"type":"Point","coordinates":[-180,90]}}`,
		`{` + base + `,"home":{"type":"Point","coordinates":[24.94,60.17]}}`,
		`{` + base + `,"extra":{"k":"abc"}}`,
	}
	for _, in := range valid {
		if err := validates(t, s, in); err != nil {
			t.Errorf("valid instance refused: %s\n%v", in, err)
		}
	}
	invalid := map[string]string{
		"missing required":          `{"nationalId":"AB123","active":true}`,
		"required null":             `{"nationalId":null,"active":true,"status":"active"}`,
		"extra property":            `{` + base + `,"other":1}`,
		"authored id instead":       `{` + base + `,"children-count":1}`,
		"string too short":          `{"nationalId":"AB","active":true,"status":"active"}`,
		"string too long":           `{"nationalId":"ABCDEFGHIJKLM","active":true,"status":"active"}`,
		"string pattern":            `{"nationalId":"ab123","active":true,"status":"active"}`,
		"text too long":             `{` + base + `,"notes":"` + strings.Repeat("x", 2001) + `"}`,
		"integer below minimum":     `{` + base + `,"childrenCount":-1}`,
		"integer above maximum":     `{` + base + `,"childrenCount":41}`,
		"integer above int64":       `{` + base + `,"score":9223372036854775808}`,
		"integer below int64":       `{` + base + `,"score":-9223372036854775809}`,
		"integer not integral":      `{` + base + `,"score":1.5}`,
		"integer as string":         `{` + base + `,"score":"1"}`,
		"decimal as number":         `{` + base + `,"income":12.50}`,
		"decimal wrong scale":       `{` + base + `,"income":"12.5"}`,
		"decimal no fraction":       `{` + base + `,"income":"12"}`,
		"decimal too many digits":   `{` + base + `,"income":"123456789.00"}`,
		"decimal leading zero":      `{` + base + `,"income":"012.00"}`,
		"boolean as string":         `{"nationalId":"AB123","active":"true","status":"active"}`,
		"date with time":            `{` + base + `,"birthDate":"2020-02-29T00:00:00Z"}`,
		"date bad month":            `{` + base + `,"birthDate":"2020-13-01"}`,
		"timestamp with offset":     `{` + base + `,"registeredAt":"2026-11-22T01:02:03+02:00"}`,
		"timestamp without zone":    `{` + base + `,"registeredAt":"2026-11-22T01:02:03"}`,
		"timestamp nanoseconds":     `{` + base + `,"registeredAt":"2026-11-22T01:02:03.123456789Z"}`,
		"uuid upper case":           `{` + base + `,"externalId":"0B6D7C8E-1F2A-4B3C-8D4E-5F6A7B8C9D0E"}`,
		"uuid without hyphens":      `{` + base + `,"externalId":"0b6d7c8e1f2a4b3c8d4e5f6a7b8c9d0e"}`,
		"code outside vocabulary":   `{"nationalId":"AB123","active":true,"status":"pending"}`,
		"reference not a uuid":      `{` + base + `,"district":"north"}`,
		"point longitude too large": `{` + base + `,"home":{"type":"Point","coordinates":[180.5,0]}}`,
		"point latitude too small":  `{` + base + `,"home":{"type":"Point","coordinates":[0,-90.1]}}`,
		"point three coordinates":   `{` + base + `,"home":{"type":"Point","coordinates":[0,0,0]}}`,
		"point wrong type":          `{` + base + `,"home":{"type":"LineString","coordinates":[0,0]}}`,
		"point extra member":        `{` + base + `,"home":{"type":"Point","coordinates":[0,0],"crs":"x"}}`,
		"structured breaks schema":  `{` + base + `,"extra":{"k":"abcd"}}`,
		"structured missing member": `{` + base + `,"extra":{}}`,
	}
	for name, in := range invalid {
		if err := validates(t, s, in); err == nil {
			t.Errorf("%s: invalid instance accepted: %s", name, in)
		}
	}
}

func TestDecimalPattern(t *testing.T) {
	cases := []struct {
		precision, scale *int
		want             string
	}{
		{ptr(10), ptr(2), `^-?(0|[1-9][0-9]{0,7})\.[0-9]{2}$`},
		{ptr(5), ptr(0), `^-?(0|[1-9][0-9]{0,4})$`},
		{ptr(3), nil, `^-?(0|[1-9][0-9]{0,2})$`},
		{ptr(2), ptr(2), `^-?0\.[0-9]{2}$`},
		{ptr(3), ptr(2), `^-?[0-9]\.[0-9]{2}$`},
		{nil, ptr(4), `^-?(0|[1-9][0-9]*)\.[0-9]{4}$`},
	}
	for _, c := range cases {
		got, err := DecimalPattern(c.precision, c.scale)
		if err != nil || got != c.want {
			t.Errorf("DecimalPattern(%v, %v) = %q, %v; want %q", c.precision, c.scale, got, err, c.want)
		}
	}
	if _, err := DecimalPattern(ptr(2), ptr(3)); err == nil {
		t.Error("precision below scale accepted")
	}
	if _, err := DecimalPattern(ptr(0), nil); err == nil {
		t.Error("precision 0 accepted")
	}
}

func TestFieldSchemaRefusesIncompleteTypes(t *testing.T) {
	cases := map[string]*model.Field{
		"vocabulary": {ID: "c", APIName: "c", Type: model.TypeCode},
		"target":     {ID: "r", APIName: "r", Type: model.TypeReference},
		"schema":     {ID: "s", APIName: "s", Type: model.TypeStructured},
		"not JSON":   {ID: "s", APIName: "s", Type: model.TypeStructured, Schema: json.RawMessage(`{"type":`)},
		"not object": {ID: "s", APIName: "s", Type: model.TypeStructured, Schema: json.RawMessage(`[1]`)},
		"unknown":    {ID: "u", APIName: "u", Type: "money"},
	}
	for want, f := range cases {
		_, err := FieldSchema(f)
		if err == nil || !strings.Contains(err.Error(), "field "+f.ID) {
			t.Errorf("%s: err = %v, want an error naming field %s", want, err, f.ID)
		}
	}
}

func TestAttachmentSlotsCarryTheExtension(t *testing.T) {
	b, doc := entitySchemaOf(t, testPackage(), "application")
	props := doc["properties"].(map[string]any)
	ev, ok := props["evidence"].(map[string]any)
	if !ok {
		t.Fatal("slot evidence is not a member of domainData's schema")
	}
	if ev["readOnly"] != true {
		t.Error("slot is not readOnly (engine-owned)")
	}
	ext, _ := json.Marshal(ev["x-registry-attachment"])
	want := `{"classification":"restricted","contentTypes":["application/pdf"],"maximumBytes":1048576,"requiredForSubmit":true,"verification":{"policyId":"pdf-scan","required":true,"verifier":"scanner"}}`
	if string(ext) != want {
		t.Errorf("x-registry-attachment = %s\nwant %s", ext, want)
	}
	photo, _ := json.Marshal(props["photo"].(map[string]any)["x-registry-attachment"])
	if !strings.Contains(string(photo), `"requiredForSubmit":false`) || !strings.Contains(string(photo), `"verification":{"required":false}`) {
		t.Errorf("photo extension = %s", photo)
	}
	req, _ := json.Marshal(doc["required"])
	if strings.Contains(string(req), "evidence") {
		t.Errorf("required = %s: requiredForSubmit is independent of required", req)
	}

	s := compileSchema(t, b)
	const base = `"person":"0b6d7c8e-1f2a-4b3c-8d4e-5f6a7b8c9d0e","newStatus":"closed"`
	const hash = "aabbccddeeff00112233445566778899aabbccddeeff00112233445566778899"
	valid := []string{
		`{` + base + `,"evidence":null,"photo":null}`,
		`{` + base + `,"evidence":{"slotId":"evidence","proposalVersion":1,"filled":true,"erased":false,"byteSize":10,"sha256":"` + hash + `","contentType":"application/pdf","uploadedAt":"2026-11-22T00:00:00Z","uploadedBy":"u1","verificationStatus":"pending"}}`,
		`{` + base + `,"photo":{"slotId":"photo","proposalVersion":2,"filled":true,"erased":true,"byteSize":4096,"sha256":"` + hash + `"}}`,
	}
	for _, in := range valid {
		if err := validates(t, s, in); err != nil {
			t.Errorf("valid instance refused: %s\n%v", in, err)
		}
	}
	invalid := []string{
		`{` + base + `,"photo":{"slotId":"photo","proposalVersion":1,"filled":true,"erased":false,"byteSize":4097,"sha256":"` + hash + `"}}`,
		`{` + base + `,"photo":{"slotId":"photo","proposalVersion":1,"filled":true,"erased":false,"byteSize":1,"sha256":"` + hash + `","contentType":"application/pdf"}}`,
		`{` + base + `,"photo":{"slotId":"evidence","proposalVersion":1,"filled":true,"erased":false,"byteSize":1,"sha256":"` + hash + `"}}`,
		`{` + base + `,"photo":{"slotId":"photo","proposalVersion":1,"filled":true,"erased":false,"byteSize":1,"sha256":"` + hash + `","verificationStatus":"unknown"}}`,
	}
	for _, in := range invalid {
		if err := validates(t, s, in); err == nil {
			t.Errorf("invalid instance accepted: %s", in)
		}
	}
}

func TestStructuredSchemaIsEmbeddedWithoutItsDialect(t *testing.T) {
	p := minimalPackage(plainEntity("thing", "things"))
	p.Entities[0].Fields = append(p.Entities[0].Fields, &model.Field{ID: "doc", APIName: "doc", Type: model.TypeStructured,
		Schema: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","maxItems":2}`)})
	b, err := EntitySchema(p, p.Entities[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), `"$schema"`) != 1 {
		t.Fatalf("the inline schema keeps its $schema:\n%s", b)
	}
	s := compileSchema(t, b)
	if err := validates(t, s, `{"name":"a","doc":[1,2]}`); err != nil {
		t.Error(err)
	}
	if err := validates(t, s, `{"name":"a","doc":[1,2,3]}`); err == nil {
		t.Error("inline schema bound not enforced")
	}
}

func TestEntitySchemaRefusesNameClashes(t *testing.T) {
	p := testPackage()
	p.EntityByID("person").Field("notes").APIName = "nationalId"
	if _, err := EntitySchema(p, p.EntityByID("person")); err == nil || !strings.Contains(err.Error(), `entity person: two members are named "nationalId"`) {
		t.Errorf("two fields with one apiName: err = %v", err)
	}
	p = testPackage()
	p.EntityByID("application").Attachments[1].ID = "newStatus"
	if _, err := EntitySchema(p, p.EntityByID("application")); err == nil || !strings.Contains(err.Error(), `"newStatus"`) {
		t.Errorf("slot named like a field: err = %v", err)
	}
	p = testPackage()
	p.Actions[0].Inputs = append(p.Actions[0].Inputs, &model.Field{ID: "person2", APIName: "person", Type: model.TypeBoolean})
	if _, err := OpenAPI(p); err == nil || !strings.Contains(err.Error(), `action close-person input`) {
		t.Errorf("two action inputs with one apiName: err = %v", err)
	}
}
