package generate

import (
	"encoding/json"
	"testing"

	"github.com/registrum/registrum/model"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func ptr[T any](v T) *T { return &v }

// testPackage is a registry with one entity of every field type, a temporal
// GeoJSON entity, a request entity with attachment slots and a lifecycle
// hook, an immediate action and a form.
func testPackage() *model.Package {
	return &model.Package{
		Format: model.Format,
		Registry: model.Registry{
			ID: "test-registry", Version: "1.0.0", Language: "en", CanonicalBaseIRI: "https://registry.example.test",
			URLs: model.URLs{
				Profile: "https://registry.example.test/profile/v1", Context: "https://registry.example.test/context/v1",
				ProblemTypeBase: "https://registry.example.test/problems", MetadataBase: "https://registry.example.test/metadata/",
				ConceptBase: "https://concepts.example.test",
			},
		},
		Entities: []*model.Entity{
			{
				ID: "person", Route: "persons", Dataset: "people", MutationMode: model.Mutable, Tombstone: true,
				MaximumBodyBytes: 65536, Batch: &model.Batch{MaximumItems: 50, MaximumBytes: 262144},
				Fields: []*model.Field{
					{ID: "national-id", APIName: "nationalId", Type: model.TypeString, Required: true, Classification: "restricted", MinLength: ptr(3), MaxLength: ptr(12), Pattern: "^[A-Z0-9]+$"},
					{ID: "notes", APIName: "notes", Type: model.TypeText, MaxLength: ptr(2000), Classification: "internal"},
					{ID: "children-count", APIName: "childrenCount", Type: model.TypeInteger, Minimum: ptr(int64(0)), Maximum: ptr(int64(40)), Classification: "internal"},
					{ID: "score", APIName: "score", Type: model.TypeInteger, Classification: "internal"},
					{ID: "income", APIName: "income", Type: model.TypeDecimal, Precision: ptr(10), Scale: ptr(2), Classification: "restricted"},
					{ID: "active", APIName: "active", Type: model.TypeBoolean, Required: true, Classification: "public"},
					{ID: "birth-date", APIName: "birthDate", Type: model.TypeDate, Classification: "restricted"},
					{ID: "registered-at", APIName: "registeredAt", Type: model.TypeTimestamp, Classification: "internal"},
					{ID: "external-id", APIName: "externalId", Type: model.TypeUUID, Classification: "internal"},
					{ID: "status", APIName: "status", Type: model.TypeCode, Required: true, Values: []string{"active", "closed"}, Classification: "public"},
					{ID: "district", APIName: "district", Type: model.TypeReference, Target: "district", Classification: "internal"},
					{ID: "home", APIName: "home", Type: model.TypeCRS84Point, Classification: "restricted"},
					{ID: "extra", APIName: "extra", Type: model.TypeStructured, Classification: "internal",
						Schema: json.RawMessage(`{"type":"object","required":["k"],"properties":{"k":{"type":"string","maxLength":3}},"additionalProperties":false}`)},
				},
				Hooks: []*model.Hook{{
					ID: "person-status-changed", EventType: "person-status-changed-v1", Phase: "after", Trigger: model.TriggerPatched,
					When:       &model.When{Kind: model.WhenFields, Changed: []string{"status"}},
					Projection: []string{"national-id", "status", "income"}, Classification: "restricted",
					Handler: &model.Handler{Kind: model.HandlerURL, DestinationID: "people-events"},
				}},
			},
			{
				ID: "district", Route: "districts", Dataset: "geo", MutationMode: model.CreateOnly, MaximumBodyBytes: 65536,
				Temporal: &model.Temporal{StartField: "valid-from", EndField: "valid-to", Type: model.TypeDate},
				GeoJSON:  &model.GeoJSON{GeometryField: "centre"},
				Fields: []*model.Field{
					{ID: "name", APIName: "name", Type: model.TypeString, Required: true, MaxLength: ptr(100), Classification: "public"},
					{ID: "centre", APIName: "centre", Type: model.TypeCRS84Point, Required: true, Classification: "public"},
					{ID: "valid-from", APIName: "validFrom", Type: model.TypeDate, Required: true, Classification: "public"},
					{ID: "valid-to", APIName: "validTo", Type: model.TypeDate, Classification: "public"},
				},
			},
			{
				ID: "application", Route: "applications", Dataset: "cases", MutationMode: model.Mutable, MaximumBodyBytes: 65536,
				Classification: "restricted",
				Fields: []*model.Field{
					{ID: "person", APIName: "person", Type: model.TypeReference, Target: "person", Required: true, Classification: "internal"},
					{ID: "new-status", APIName: "newStatus", Type: model.TypeCode, Values: []string{"active", "closed"}, Required: true, Classification: "internal"},
				},
				Attachments: []*model.AttachmentSlot{
					{ID: "evidence", Required: true, MaximumBytes: 1048576, ContentTypes: []string{"application/pdf"}, Classification: "restricted",
						Verification: &model.Verification{Verifier: "scanner", PolicyID: "pdf-scan"}},
					{ID: "photo", MaximumBytes: 4096, ContentTypes: []string{"image/png", "image/jpeg"}, Classification: "internal"},
				},
				ChangeRequest: &model.ChangeRequest{
					Effects: []*model.Effect{{ID: "set-status", Operation: model.EffectPatch,
						Target: model.EffectTarget{Entity: "person", FromField: "person"},
						Set:    []*model.SetField{{Field: "status", FromField: "new-status"}}}},
					Review:      model.Review{Mode: model.ReviewAuthority, Authority: "casework", PolicyID: "status-change"},
					Application: model.Application{Mode: model.ApplyManual},
					Retention:   model.Retention{Mode: model.RetainAll},
				},
				Hooks: []*model.Hook{{
					ID: "application-submitted", EventType: "application-submitted-v1", Phase: "after", Trigger: model.TriggerRequestLifecycle,
					When:       &model.When{Kind: model.WhenRequestLifecycle, ToStates: []string{"submitted"}},
					Projection: []string{"new-status"}, Classification: "restricted",
				}},
			},
		},
		Profiles: []*model.Profile{
			{ID: "operator", Default: true, RequiredScopes: []string{"people:operate"}, PrincipalClaim: "sub",
				Grants: []*model.Grant{
					{Entity: "person", Operations: []string{model.OpCreate, model.OpGet, model.OpList, model.OpPatch, model.OpTombstone, model.OpBatch, model.OpSnapshot},
						ReadableFields: []string{"national-id", "status"}, RowBoundaries: model.RowBoundaries{Unrestricted: true},
						RequestPresence: []*model.RequestPresence{{RequestEntity: "application", RowBoundaries: model.RowBoundaries{Unrestricted: true}}}},
					{Entity: "application", Operations: []string{model.OpCreate, model.OpGet, model.OpSubmitRequest}, RowBoundaries: model.RowBoundaries{Unrestricted: true}},
				},
				ActionGrants: []*model.ActionGrant{{Action: "close-person", Operations: []string{model.OpInvoke},
					Targets: []*model.Target{{Entity: "person", RowBoundaries: model.RowBoundaries{Unrestricted: true}}}}},
			},
			{ID: "public-map", Anonymous: true,
				Grants: []*model.Grant{{Entity: "district", Operations: []string{model.OpGet, model.OpList}, ReadableFields: []string{"name", "centre"},
					RowBoundaries: model.RowBoundaries{Unrestricted: true}}}},
		},
		Actions: []*model.Action{{
			ID:     "close-person",
			Inputs: []*model.Field{{ID: "person", APIName: "person", Type: model.TypeReference, Target: "person", Required: true}},
			Effects: []*model.Effect{{ID: "close", Operation: model.EffectPatch, Target: model.EffectTarget{Entity: "person", FromField: "person"},
				Set: []*model.SetField{{Field: "status", Value: "closed"}}}},
		}},
	}
}

// compileSchema compiles a generated schema document with an independent
// JSON Schema 2020-12 implementation, asserting formats.
func compileSchema(t *testing.T, doc []byte) *jsonschema.Schema {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytesReader(doc))
	if err != nil {
		t.Fatalf("generated schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "mem:///schema.json"
	if err := c.AddResource(url, v); err != nil {
		t.Fatalf("add schema: %v", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compile generated schema: %v\n%s", err, doc)
	}
	return s
}

// validates reports whether instance (JSON text) is valid against s.
func validates(t *testing.T, s *jsonschema.Schema, instance string) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytesReader([]byte(instance)))
	if err != nil {
		t.Fatalf("instance %s is not JSON: %v", instance, err)
	}
	return s.Validate(v)
}
