package project

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
	"github.com/registrum/registrum/plugins/verifier"
	"github.com/registrum/registrum/project/internal/source"
)

// compileText compiles a project document given as text.
func compileText(t *testing.T, doc string, opts Options) (*Result, Findings) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "registry.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Compile(dir, opts)
	var fs Findings
	if errors.As(err, &fs) {
		return nil, fs
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, nil
}

func minimal(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/minimal/registry.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEveryFindingIsListed: a project with several faults gets all of them,
// not only the first, in line order.
func TestEveryFindingIsListed(t *testing.T) {
	doc := minimal(t)
	doc = strings.Replace(doc, "{id: area, type: integer, minimum: 0}", "{id: area, type: integer, minimum: 0, apiName: data}", 1)
	doc = strings.Replace(doc, "readableFields: [parcel-code, area, surveyed]", "readableFields: [parcel-code, area, surveyed, owner]", 1)
	doc = strings.Replace(doc, "[create, get, list, patch]", "[create, get, list, patch, tombstone]", 1)
	_, fs := compileText(t, doc, opts(false))
	rules := []string{}
	for _, f := range fs {
		rules = append(rules, f.Rule)
	}
	want := []string{"apiname.reserved", "grant.operation", "field.unknown"}
	if strings.Join(rules, ",") != strings.Join(want, ",") {
		t.Fatalf("rules = %v, want %v\n%v", rules, want, fs)
	}
	for i := 1; i < len(fs); i++ {
		if fs[i].Line < fs[i-1].Line {
			t.Fatalf("findings out of order: %v", fs)
		}
	}
	// Structural faults are all listed too.
	doc = strings.Replace(minimal(t), "    dataset: land\n", "    dataset: land\n    colour: red\n    size: 3\n", 1)
	_, fs = compileText(t, doc, opts(false))
	if len(fs) != 2 || !strings.Contains(fs[0].Message, "colour") || !strings.Contains(fs[1].Message, "size") {
		t.Fatalf("structural findings = %v", fs)
	}
	// Unknown keys do not hide the rules: both kinds come in one run.
	doc = strings.Replace(doc, "[create, get, list, patch]", "[create, get, list, patch, tombstone]", 1)
	_, fs = compileText(t, doc, opts(false))
	if len(fs) != 3 || fs[2].Rule != "grant.operation" {
		t.Fatalf("findings = %v", fs)
	}
	// Other structural faults do not hide the rules either: schema and
	// semantic findings come together, in file and line order.
	doc = strings.Replace(doc, "    dataset: land\n", "", 1)
	_, fs = compileText(t, doc, opts(false))
	var got []string
	for _, f := range fs {
		got = append(got, f.Rule)
	}
	if want := "format.schema,format.schema,format.schema,grant.operation"; strings.Join(got, ",") != want || !strings.Contains(fs[0].Message, `missing required key "dataset"`) {
		t.Fatalf("findings beside a missing required key = %v, want rules %s", fs, want)
	}
	for i := 1; i < len(fs); i++ {
		if fs[i].Line < fs[i-1].Line {
			t.Fatalf("findings out of order: %v", fs)
		}
	}
	// A value of the wrong JSON type is left out, and the rest is checked.
	doc = strings.Replace(doc, "route: parcels", "route: [parcels]", 1)
	_, fs = compileText(t, doc, opts(false))
	got = got[:0]
	for _, f := range fs {
		got = append(got, f.Rule)
	}
	if !strings.Contains(strings.Join(got, ","), "grant.operation") || !strings.Contains(fmt.Sprint(fs), "entities[0].route") {
		t.Fatalf("findings beside a value of the wrong type = %v", fs)
	}
}

// TestEventClassification: the event is as classified as its most
// classified projected or condition field; a lifecycle event at least as
// its request entity.
func TestEventClassification(t *testing.T) {
	r := compileOK(t, "testdata/full", opts(false))
	site := r.Package.EntityByID("site")
	for id, want := range map[string]string{
		"site-status-changed": "internal",   // public site-code, internal status
		"site-created":        "restricted", // restricted operator-contact
		"site-removed":        "public",     // public site-code only
	} {
		if got := site.Hook(id).Classification; got != want {
			t.Errorf("%s: classification %s, want %s", id, got, want)
		}
	}
	// A condition field raises the classification above the projection's.
	doc := strings.Replace(minimal(t), "      - {kind: unique, fields: [parcel-code]}\n", `      - {kind: unique, fields: [parcel-code]}
    hooks:
      - {id: surveyed-changed, phase: after, trigger: patched, projection: [area], when: {kind: fields, changed: [surveyed]}}
`, 1)
	doc = strings.Replace(doc, "{id: area, type: integer, minimum: 0}", "{id: area, type: integer, minimum: 0, classification: public}", 1)
	doc = strings.Replace(doc, "{id: surveyed, type: boolean}", "{id: surveyed, type: boolean, classification: restricted}", 1)
	res, fs := compileText(t, doc, opts(false))
	if fs != nil {
		t.Fatal(fs)
	}
	if got := res.Package.Entities[0].Hook("surveyed-changed").Classification; got != "restricted" {
		t.Errorf("condition-raised classification = %s, want restricted", got)
	}
	// A lifecycle event is at least its request entity's classification.
	req := compileOK(t, "testdata/request", opts(false))
	_ = req
	doc2, _ := os.ReadFile("testdata/request/registry.yaml")
	withHook := strings.Replace(string(doc2), "    attachments:\n", `    classification: restricted
    hooks:
      - {id: transfer-submitted, phase: after, trigger: request_lifecycle, projection: [parcel], when: {kind: request_lifecycle, toStates: [submitted]}}
    attachments:
`, 1)
	withHook = strings.Replace(withHook, "{id: parcel, type: reference, target: parcel, required: true}", "{id: parcel, type: reference, target: parcel, required: true, classification: public}", 1)
	res, fs = compileText(t, withHook, opts(false))
	if fs != nil {
		t.Fatal(fs)
	}
	if got := res.Package.EntityByID("transfer").Hook("transfer-submitted").Classification; got != "restricted" {
		t.Errorf("lifecycle classification = %s, want restricted", got)
	}
}

// TestProductionRules: the same project compiles for authoring and is
// refused for production while a hook lacks a handler or a module is unpinned.
func TestProductionRules(t *testing.T) {
	if _, err := Compile("testdata/full", opts(false)); err != nil {
		t.Fatal(err)
	}
	_, err := Compile("testdata/full", opts(true))
	var fs Findings
	if !errors.As(err, &fs) {
		t.Fatalf("production compile = %v", err)
	}
	got := map[string]int{}
	for _, f := range fs {
		got[f.Rule]++
	}
	// site-removed has no handler; notify.tengo, plan-merge.tengo and rename.tengo are unpinned.
	if got["production.handler"] != 1 || got["production.pin"] != 3 || len(fs) != 4 {
		t.Fatalf("findings = %v", fs)
	}
}

// TestFormatSchemaIsShipped: docs/schemas/project.schema.json is the schema
// generated from the Go types, and every project in the repository
// validates against it with an independent validator.
func TestFormatSchemaIsShipped(t *testing.T) {
	const shipped = "../docs/schemas/project.schema.json"
	if *update {
		if err := os.WriteFile(shipped, FormatSchema(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(shipped)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, FormatSchema()) {
		t.Fatal("docs/schemas/project.schema.json is out of step with the Go types; run go test ./project -update")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(FormatSchemaID, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(FormatSchemaID)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"testdata/minimal", "testdata/request", "testdata/full", "../examples/childsupport"} {
		raw, err := os.ReadFile(filepath.Join(p, "registry.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		d, err := source.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(d.JSON))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(inst); err != nil {
			t.Errorf("%s does not validate against the shipped schema: %v", p, err)
		}
	}
}

// TestJSONProjectsAreAccepted: the same project written as JSON compiles
// to the same model.
func TestJSONProjectsAreAccepted(t *testing.T) {
	raw, _ := os.ReadFile("testdata/minimal/registry.yaml")
	d, err := source.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "registry.json"), d.JSON, 0o644); err != nil {
		t.Fatal(err)
	}
	fromJSON := compileOK(t, dir, opts(false))
	fromYAML := compileOK(t, "testdata/minimal", opts(false))
	if fromJSON.Package.SchemaFingerprint != fromYAML.Package.SchemaFingerprint {
		t.Fatal("JSON and YAML forms of one project give different layouts")
	}
	// Findings in a JSON document name lines too.
	bad := strings.Replace(string(d.JSON), `"surveyed","type":"boolean"`, `"surveyed","type":"boolean","colour":"red"`, 1)
	_, fs := compileText(t, bad, opts(false))
	if len(fs) != 1 || fs[0].Line != 1 || fs[0].Path != "entities[0].fields[2].colour" {
		t.Fatalf("findings = %v", fs)
	}
}

// TestGoPluginVerifierIsPackaged: a go-plugin verifier binary is copied into
// the package, pinned, listed with role verifier and written executable.
func TestGoPluginVerifierIsPackaged(t *testing.T) {
	dir := copyProject(t, "testdata/full")
	bin := []byte("#!/bin/sh\nexit 0\n")
	if err := os.MkdirAll(filepath.Join(dir, "verifiers"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "verifiers", "scanner"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "registry.yaml")
	raw, _ := os.ReadFile(file)
	doc := strings.Replace(string(raw), `  - {id: scanner, kind: http, endpoint: "https://scanner.example.test/verify", authorizationRef: "secret:file/scanner-token", timeoutMilliseconds: 5000}`,
		`  - {id: scanner, kind: go-plugin, path: verifiers/scanner}`, 1)
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	r := compileOK(t, dir, opts(false))
	v := r.Package.Verifiers[0]
	if v.Kind != "go-plugin" || v.Path != "source/verifiers/scanner" || !strings.HasPrefix(v.SHA256, "sha256:") {
		t.Fatalf("verifier = %+v", v)
	}
	out := filepath.Join(t.TempDir(), "pkg")
	if err := r.Write(out); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(out, "source", "verifiers", "scanner"))
	if err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Fatalf("verifier binary not executable: %v %v", st, err)
	}
	role := ""
	for _, f := range r.Package.Files {
		if f.Path == v.Path {
			role = f.Role
		}
	}
	if role != RoleVerifier {
		t.Fatalf("role = %q", role)
	}
	specs, err := verifier.CheckPackage(filepath.Join(out, "package.json"), "")
	if err != nil || len(specs) != 1 || specs[0].Kind != model.VerifierGoPlugin || specs[0].SHA256 != v.SHA256 {
		t.Fatalf("the verifier host refuses the package: %+v, %v", specs, err)
	}
}

// TestModulesInThePackage: every script and module is listed with its
// engine, kind, package path, digest and (handlers) capabilities.
func TestModulesInThePackage(t *testing.T) {
	r := compileOK(t, "testdata/full", opts(false))
	hook := r.Package.ModuleByID("hook.site-created")
	if hook == nil || hook.Engine != "tengo" || hook.Kind != "hook-handler" || hook.Path != "source/scripts/notify.tengo" ||
		!slices.Equal(hook.Capabilities, []model.Capability{model.CapabilityClock, model.CapabilityRandom}) {
		t.Fatalf("hook module = %+v", hook)
	}
	planner := r.Package.ModuleByID("planner.site-merge")
	if planner == nil || planner.Kind != "planner" || len(planner.Capabilities) != 0 {
		t.Fatalf("planner module = %+v", planner)
	}
	if got := r.Package.EntityByID("site-merge").ChangeRequest.Planner.Module; got != planner.ID {
		t.Fatalf("planner names module %q", got)
	}
	action := r.Package.ModuleByID("action.rename-site")
	ah := r.Package.ActionByID("rename-site").Handler
	if action == nil || action.Kind != "action-handler" || ah == nil || ah.Module != action.ID ||
		len(ah.Writes) != 1 || ah.Writes[0].Effect != "relabel" || ah.Refusals[0] != "name-taken" {
		t.Fatalf("action handler = %+v, module = %+v", ah, action)
	}
	b, ok := r.Contents[hook.Path]
	if !ok || !strings.HasPrefix(hook.SHA256, "sha256:") {
		t.Fatal("module bytes missing from the package")
	}
	raw, _ := os.ReadFile("testdata/full/scripts/notify.tengo")
	if !bytes.Equal(b, raw) {
		t.Fatal("packaged module differs from the project file")
	}
}

// TestVerifiersAreReadByTheVerifierHost: the verifiers member of a compiled
// package is what plugins/verifier reads, for both kinds.
func TestVerifiersAreReadByTheVerifierHost(t *testing.T) {
	out := filepath.Join(t.TempDir(), "pkg")
	if err := compileOK(t, "testdata/full", opts(false)).Write(out); err != nil {
		t.Fatal(err)
	}
	specs, err := verifier.CheckPackage(filepath.Join(out, "package.json"), "")
	if err != nil || len(specs) != 1 || specs[0].Endpoint != "https://scanner.example.test/verify" || specs[0].AuthorizationRef != "secret:file/scanner-token" {
		t.Fatalf("http verifier: %+v, %v", specs, err)
	}
}

// TestModulesLoadInThePluginHost: the modules of compiled packages are what
// the plugin host loads: pinned, present, and compiling in its sandbox.
func TestModulesLoadInThePluginHost(t *testing.T) {
	for _, dir := range []string{"testdata/full", "../examples/childsupport"} {
		out := filepath.Join(t.TempDir(), "pkg")
		if err := compileOK(t, dir, opts(false)).Write(out); err != nil {
			t.Fatal(err)
		}
		mods, err := plugins.VerifyPackage(t.Context(), filepath.Join(out, "package.json"), plugins.Config{})
		if err != nil {
			t.Fatalf("%s: the plugin host refuses the package: %v", dir, err)
		}
		if len(mods) == 0 {
			t.Fatalf("%s: no modules", dir)
		}
	}
}
