package generate

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/registrum/registrum/model"
)

func TestAllListsEveryArtifact(t *testing.T) {
	p := testPackage()
	p.Forms = []*model.Form{applicationForm()}
	got, err := All(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"forms/child-support-application/schema.json",
		"generated/event-schemas/application.application-submitted.schema.json",
		"generated/event-schemas/person.person-status-changed.schema.json",
		"openapi.json",
		"schemas/application.schema.json",
		"schemas/district.schema.json",
		"schemas/person.schema.json",
	}
	if keys := sortedKeys(got); !slices.Equal(keys, want) {
		t.Fatalf("paths = %q\nwant %q", keys, want)
	}
	roles := map[string]string{
		"forms/child-support-application/schema.json":                      RoleFormSchema,
		"generated/event-schemas/person.person-status-changed.schema.json": RoleEventSchema,
		"openapi.json":                 RoleOpenAPI,
		"schemas/district.schema.json": RoleEntitySchema,
		"source/registry.yaml":         "",
	}
	for path, role := range roles {
		if r := Role(path); r != role {
			t.Errorf("Role(%s) = %q, want %q", path, r, role)
		}
	}
	for path, b := range got {
		if !json.Valid(b) {
			t.Errorf("%s is not JSON", path)
		}
		if !bytes.HasSuffix(b, []byte("}\n")) {
			t.Errorf("%s does not end with a newline", path)
		}
		if bytes.Contains(b, []byte(`\u003c`)) || bytes.Contains(b, []byte(`\u0026`)) {
			t.Errorf("%s escapes HTML characters", path)
		}
	}
}

func TestAllIsDeterministic(t *testing.T) {
	gen := func() map[string][]byte {
		p := testPackage()
		p.Forms = []*model.Form{applicationForm()}
		out, err := All(p)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a := gen()
	for i := 0; i < 5; i++ {
		b := gen()
		for path := range a {
			if !bytes.Equal(a[path], b[path]) {
				t.Fatalf("%s differs between two generations of the same model", path)
			}
		}
	}
}

func TestAllChangesWithTheModel(t *testing.T) {
	base, err := All(testPackage())
	if err != nil {
		t.Fatal(err)
	}
	p := testPackage()
	p.EntityByID("person").Field("national-id").MaxLength = ptr(20)
	changed, err := All(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"schemas/person.schema.json", "openapi.json", "generated/event-schemas/person.person-status-changed.schema.json"} {
		if bytes.Equal(base[path], changed[path]) {
			t.Errorf("%s did not change with a field bound", path)
		}
	}
	if !bytes.Equal(base["schemas/district.schema.json"], changed["schemas/district.schema.json"]) {
		t.Error("an unrelated entity's schema changed")
	}
}

func TestAllReportsModelFaults(t *testing.T) {
	p := testPackage()
	p.EntityByID("district").Fields[0].Type = "money"
	_, err := All(p)
	if err == nil || !strings.Contains(err.Error(), "entity district") || !strings.Contains(err.Error(), `"money"`) {
		t.Fatalf("err = %v, want one naming the entity and the type", err)
	}
}
