// Package childsupport_test compiles the health-linked child support example
// registry and checks what it publishes: the application form schema of
// seed 002, and the entities, profiles and request workflow that make the
// registry real.
package childsupport_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
	"github.com/registrum/registrum/project"
	"github.com/registrum/registrum/store/layout"
)

const formPath = "forms/child-support-application/schema.json"

func compile(t *testing.T) (*project.Result, *model.Package) {
	t.Helper()
	r, err := project.Compile(".", project.Options{Production: true, Fingerprint: layout.Fingerprint})
	if err != nil {
		t.Fatalf("the example does not compile for production: %v", err)
	}
	out := filepath.Join(t.TempDir(), "pkg")
	if err := r.Write(out); err != nil {
		t.Fatal(err)
	}
	p, err := model.Load(out)
	if err != nil {
		t.Fatalf("model.Load: %v", err)
	}
	return r, p
}

func canonical(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFormSchemaIsSeed002 compares the generated form schema, member by
// member, with the schema seed 002 describes (written by hand in testdata).
func TestFormSchemaIsSeed002(t *testing.T) {
	r, _ := compile(t)
	got, ok := r.Contents[formPath]
	if !ok {
		t.Fatalf("the package has no %s", formPath)
	}
	want, err := os.ReadFile("testdata/application-form.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(canonical(t, got))
	w, _ := json.Marshal(canonical(t, want))
	if !bytes.Equal(g, w) {
		t.Fatalf("form schema differs from seed 002\n got: %s\nwant: %s", g, w)
	}
}

// TestFormSchemaAdmitsExactlySeed002Instances validates instances with an
// independent JSON Schema 2020-12 validator.
func TestFormSchemaAdmitsExactlySeed002Instances(t *testing.T) {
	r, _ := compile(t)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.Contents[formPath]))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	const id = "https://childsupport.example.test/metadata/forms/child-support-application/schema.json"
	if err := c.AddResource(id, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(id)
	if err != nil {
		t.Fatal(err)
	}
	valid := `{"supportType":"maintenance","applicantNationalId":"P-1","children":[{"childNationalId":"C-1"}],"healthDistrict":"north"}`
	cases := []struct {
		name, instance string
		ok             bool
	}{
		{"complete", valid, true},
		{"two children", `{"supportType":"maintenance","applicantNationalId":"P-1","children":[{"childNationalId":"C-1"},{"childNationalId":"C-2"}],"healthDistrict":"north"}`, true},
		{"missing supportType", `{"applicantNationalId":"P-1","children":[{"childNationalId":"C-1"}],"healthDistrict":"north"}`, false},
		{"missing applicantNationalId", `{"supportType":"m","children":[{"childNationalId":"C-1"}],"healthDistrict":"north"}`, false},
		{"missing children", `{"supportType":"m","applicantNationalId":"P-1","healthDistrict":"north"}`, false},
		{"missing healthDistrict", `{"supportType":"m","applicantNationalId":"P-1","children":[{"childNationalId":"C-1"}]}`, false},
		{"extra property", `{"supportType":"m","applicantNationalId":"P-1","children":[{"childNationalId":"C-1"}],"healthDistrict":"north","note":"x"}`, false},
		{"empty children", `{"supportType":"m","applicantNationalId":"P-1","children":[],"healthDistrict":"north"}`, false},
		{"child without childNationalId", `{"supportType":"m","applicantNationalId":"P-1","children":[{}],"healthDistrict":"north"}`, false},
		{"child with extra member", `{"supportType":"m","applicantNationalId":"P-1","children":[{"childNationalId":"C-1","name":"x"}],"healthDistrict":"north"}`, false},
		{"child not an object", `{"supportType":"m","applicantNationalId":"P-1","children":["C-1"],"healthDistrict":"north"}`, false},
		{"supportType not a string", `{"supportType":1,"applicantNationalId":"P-1","children":[{"childNationalId":"C-1"}],"healthDistrict":"north"}`, false},
		{"not an object", `[]`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(tc.instance)))
			if err != nil {
				t.Fatal(err)
			}
			err = sch.Validate(inst)
			if (err == nil) != tc.ok {
				t.Fatalf("valid = %v, want %v (%v)", err == nil, tc.ok, err)
			}
		})
	}
}

// TestRegistryShape checks the parts that make the registry real.
func TestRegistryShape(t *testing.T) {
	_, p := compile(t)
	app := p.EntityByID("application")
	if app == nil || !app.IsRequestEntity() {
		t.Fatal("application is not a request entity")
	}
	cr := app.ChangeRequest
	if cr.Review.Mode != model.ReviewAuthority || cr.Review.Authority != "casework" || cr.Application.Mode != model.ApplyManual {
		t.Errorf("review/application = %+v %+v", cr.Review, cr.Application)
	}
	if len(cr.Effects) != 1 || cr.Effects[0].Target.Entity != "case" || cr.Effects[0].Operation != model.EffectCreate {
		t.Errorf("effects = %+v", cr.Effects)
	}
	if s := app.Slot("medical-certificate"); s == nil || !s.Required || s.ContentTypes[0] != "application/pdf" {
		t.Errorf("medical-certificate slot = %+v", s)
	}
	for _, id := range []string{"case", "child", "guardian", "child-details-change", "decision", "service-office"} {
		if p.EntityByID(id) == nil {
			t.Errorf("entity %s missing", id)
		}
	}
	if d := p.EntityByID("decision"); d.Temporal == nil || d.MutationMode != model.CreateOnly {
		t.Errorf("decision = %+v", d)
	}
	for _, id := range []string{"applicant", "caseworker", "public-read"} {
		if p.ProfileByID(id) == nil {
			t.Errorf("profile %s missing", id)
		}
	}
	if pr := p.ProfileByID("public-read"); !pr.Anonymous || pr.Grant("service-office") == nil || pr.Grant("case") != nil {
		t.Errorf("public-read = %+v", pr)
	}
	if p.DefaultProfile("application").ID != "applicant" {
		t.Error("applicant is not the default profile of applications")
	}
	hook := app.Hook("application-submitted")
	if hook == nil || hook.Classification != "restricted" || p.ModuleByID(hook.Handler.Module) == nil {
		t.Errorf("lifecycle hook = %+v", hook)
	}
	if !p.Production {
		t.Error("package not marked production")
	}
}

// TestHookHandlerRunsInTheSandbox runs the example's pinned hook handler in
// the plugin host's tengo sandbox with event bodies.
func TestHookHandlerRunsInTheSandbox(t *testing.T) {
	event := func(entity string) []byte {
		digest := "sha256:" + strings.Repeat("0a", 32)
		return []byte(`{"causation":{"hop":0,"root":"0b6d7c8e-1f2a-4b3c-8d4e-5f6a7b8c9d0e"},` +
			`"data":{"entity":"` + entity + `","packageRevision":"` + digest + `","recordId":"0b6d7c8e-1f2a-4b3c-8d4e-5f6a7b8c9d0e","revision":2,"trigger":"request_lifecycle","values":{}},` +
			`"dataschema":"urn:engine:event-schema:childsupport:` + entity + `:application-submitted:` + digest + `",` +
			`"id":"0b6d7c8e-1f2a-4b3c-8d4e-5f6a7b8c9d0f","source":"urn:engine:registry:childsupport:instance:dev",` +
			`"subject":{"recordReference":"hmac-sha256:` + strings.Repeat("1b", 32) + `","recordRevision":2},` +
			`"time":"2026-11-25T10:00:00.000Z","type":"application-submitted-v1"}`)
	}
	for entity, want := range map[string]string{"application": `"acknowledged"`, "case": `"retry"`} {
		out, err := plugins.RunFile(t.Context(), plugins.Config{}, model.EngineTengo, model.KindHookHandler, "scripts/notify-caseworker.tengo", event(entity))
		if err != nil {
			t.Fatalf("%s: %v", entity, err)
		}
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("%s: output %s, want outcome %s", entity, out, want)
		}
	}
}
