package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/canonjson"
)

func samplePackage(t *testing.T) *Package {
	t.Helper()
	min := 0
	p := &Package{
		Format:            Format,
		SchemaFingerprint: "sha256:" + strings.Repeat("0", 64),
		Registry:          Registry{ID: "r", Version: "1", Language: "en", CanonicalBaseIRI: "https://r.example.test"},
		Entities: []*Entity{{
			ID: "case", Route: "cases", Dataset: "d", MutationMode: Mutable, MaximumBodyBytes: 1024,
			Fields: []*Field{
				{ID: "case-number", APIName: "caseNumber", Type: TypeString, Required: true, MinLength: &min},
				{ID: "note", APIName: "note", Type: TypeText},
			},
			Attachments: []*AttachmentSlot{{ID: "scan", MaximumBytes: 10, ContentTypes: []string{"application/pdf"}, Classification: "internal"}},
			Hooks:       []*Hook{{ID: "h", EventType: "h-v1", Phase: "after", Trigger: TriggerCreated, Projection: []string{"note"}, Classification: "internal"}},
		}},
		Profiles: []*Profile{{ID: "p", Default: true, RequiredScopes: []string{"s"}, Grants: []*Grant{{
			Entity: "case", Operations: []string{OpGet, OpList}, ReadableFields: []string{"case-number"},
			RowBoundaries: RowBoundaries{Unrestricted: true},
		}}, ActionGrants: []*ActionGrant{{Action: "close", Operations: []string{OpInvoke}}}}},
		Actions: []*Action{{ID: "close", Inputs: []*Field{{ID: "case", APIName: "case", Type: TypeReference, Target: "case"}}}},
		Forms:   []*Form{{ID: "f", Title: "F", Description: "D"}},
		Modules: []Module{{ID: "hook.h", Engine: "tengo", Kind: "hook-handler", Path: "source/h.tengo", SHA256: "sha256:" + strings.Repeat("1", 64)}},
	}
	rev, err := ComputeRevision(p)
	if err != nil {
		t.Fatal(err)
	}
	p.Revision = rev
	return p
}

func encode(t *testing.T, p *Package) []byte {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeChecksFormatAndRevision(t *testing.T) {
	p := samplePackage(t)
	raw := encode(t, p)
	got, err := Decode(raw)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if got.Revision != p.Revision {
		t.Fatal("revision changed in a round trip")
	}
	cases := map[string]string{
		"unknown member":       strings.Replace(string(raw), `"format":`, `"extra":1,"format":`, 1),
		"other format":         strings.Replace(string(raw), Format, "registrum.package/v0", 1),
		"modified":             strings.Replace(string(raw), `"cases"`, `"cases-2"`, 1),
		"no revision":          strings.Replace(string(raw), `"revision":"`+p.Revision+`",`, "", 1),
		"not a document":       `[]`,
		"unknown field member": strings.Replace(string(raw), `"minLength"`, `"minLen"`, 1),
	}
	for name, doc := range cases {
		if _, err := Decode([]byte(doc)); err == nil {
			t.Errorf("%s: Decode accepted the document", name)
		}
	}
}

// TestDecodeKeepsLiteralDigits: a 64-bit literal survives a round trip
// exactly, so its revision still matches.
func TestDecodeKeepsLiteralDigits(t *testing.T) {
	p := samplePackage(t)
	p.Entities[0].Constraints = []*Constraint{{ID: "c", Kind: ConstraintCheck, Field: "n", Operator: CheckLe, Value: json.Number("9007199254740993")}}
	rev, err := ComputeRevision(p)
	if err != nil {
		t.Fatal(err)
	}
	p.Revision = rev
	got, err := Decode(encode(t, p))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if got.Entities[0].Constraints[0].Value != json.Number("9007199254740993") {
		t.Fatalf("value = %v", got.Entities[0].Constraints[0].Value)
	}
}

func TestLoadChecksEveryFileDigest(t *testing.T) {
	dir := t.TempDir()
	content := []byte("{}\n")
	p := samplePackage(t)
	p.Files = []File{{Path: "openapi.json", Role: "openapi", SHA256: canonjson.DigestBytes(content)}}
	rev, err := ComputeRevision(p)
	if err != nil {
		t.Fatal(err)
	}
	p.Revision = rev
	if err := os.WriteFile(filepath.Join(dir, "openapi.json"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), encode(t, p), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err != nil {
		t.Fatalf("Load(folder): %v", err)
	}
	if _, err := Load(filepath.Join(dir, FileName)); err != nil {
		t.Fatalf("Load(package.json): %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "openapi.json"), []byte("{ }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "openapi.json") {
		t.Fatalf("Load accepted a modified file: %v", err)
	}
	os.Remove(filepath.Join(dir, "openapi.json"))
	if _, err := Load(dir); err == nil {
		t.Fatal("Load accepted a missing file")
	}
}

func TestRevisionCoversTheContent(t *testing.T) {
	a := samplePackage(t)
	b := samplePackage(t)
	if a.Revision != b.Revision {
		t.Fatal("equal packages have different revisions")
	}
	b.Entities[0].Fields[1].Classification = "restricted"
	rev, _ := ComputeRevision(b)
	if rev == a.Revision {
		t.Fatal("a changed field kept the revision")
	}
}

func TestLookups(t *testing.T) {
	p := samplePackage(t)
	e := p.EntityByID("case")
	if e == nil || p.EntityByRoute("cases") != e || p.EntityByID("x") != nil || p.EntityByRoute("x") != nil {
		t.Fatal("entity lookups")
	}
	if e.Field("case-number") == nil || e.FieldByAPIName("caseNumber") == nil || e.Field("caseNumber") != nil {
		t.Fatal("field lookups must keep authored ids and apiNames apart")
	}
	if e.Field("note").Nullable() != true || e.Field("case-number").Nullable() {
		t.Fatal("optional fields are nullable, required ones are not")
	}
	if e.Slot("scan") == nil || e.Slot("x") != nil || e.Hook("h") == nil || e.IsRequestEntity() {
		t.Fatal("slot, hook and request lookups")
	}
	pr := p.ProfileByID("p")
	g := pr.Grant("case")
	if !g.Allows(OpList) || g.Allows(OpPatch) || !g.CanRead("case-number") || g.CanRead("note") || g.CanWrite("note") {
		t.Fatal("grant checks")
	}
	if p.DefaultProfile("case") != pr || pr.ActionGrant("close") == nil || p.ActionByID("close").Input("case") == nil {
		t.Fatal("profile and action lookups")
	}
	if p.FormByID("f") == nil || p.ModuleByID("hook.h") == nil || p.ModuleByID("x") != nil {
		t.Fatal("form and module lookups")
	}
	if ClassificationRank("public") != 0 || ClassificationRank("restricted") != 2 || ClassificationRank("secret") != -1 {
		t.Fatal("classification ranks")
	}
	if (&ChangeRequest{}).PlannerKind() != "declarative" || (&ChangeRequest{Planner: &Planner{Engine: "wasm"}}).PlannerKind() != "wasm" {
		t.Fatal("planner kind")
	}
}
