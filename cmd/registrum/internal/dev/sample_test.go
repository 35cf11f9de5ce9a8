package dev

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/project"
	"github.com/registrum/registrum/store/layout"
)

func TestSampleStringsMatchTheirPatterns(t *testing.T) {
	for _, p := range []string{`^CS-[0-9]{4,16}$`, `^[a-z]+(-[a-z]+)*$`, `^(north|south)$`, `^\d{3}[A-F]?$`, `x+y`} {
		for variant := 0; variant < 3; variant++ {
			s, ok := matching(p, variant)
			if !ok {
				t.Fatalf("%s: no sample", p)
			}
			if !regexp.MustCompile(p).MatchString(s) {
				t.Errorf("%s: sample %q does not match", p, s)
			}
		}
	}
}

func TestSampleStructuredValuesMatchTheirSchemas(t *testing.T) {
	raw := `{"type":"array","minItems":2,"items":{"type":"object","additionalProperties":false,"required":["id","n"],"properties":{"id":{"type":"string","minLength":10},"n":{"type":"integer","minimum":3}}}}`
	v, ok := sampleValue(&model.Field{ID: "s", APIName: "s", Type: model.TypeStructured, Schema: json.RawMessage(raw)}, 0)
	if !ok {
		t.Fatal("no sample")
	}
	doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	c := jsonschema.NewCompiler()
	c.AddResource("s.json", doc)
	sch, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("sample %s: %v", b, err)
	}
}

func TestWalkthroughOfTheExample(t *testing.T) {
	res, err := project.Compile("../../../../examples/childsupport", project.Options{Fingerprint: layout.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	w := planWalkthrough(res.Package)
	if w == nil {
		t.Fatal("no walkthrough for the example")
	}
	if w.Entity.IsRequestEntity() || w.Filter == "" || w.Patch == "" || w.Create[0] == "" || !w.Snapshot {
		t.Fatalf("walkthrough (with a snapshot step) %+v", w)
	}
	if w.PurposeClaim != "" && w.Claims[w.PurposeClaim] == "" {
		t.Fatalf("the walkthrough's profile needs a purpose the demo client lacks: %+v", w)
	}
}

func TestRequestJourneyOfTheExample(t *testing.T) {
	res, err := project.Compile("../../../../examples/childsupport", project.Options{Fingerprint: layout.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	demo := planDemoClients(res.Package, planWalkthrough(res.Package))
	j := planRequestJourney(res.Package, demo.Profiles["demo-standard"], demo.Claims)
	if j == nil {
		t.Fatal("no change-request journey for the example")
	}
	var setup []string
	for _, rec := range j.Setup {
		setup = append(setup, rec.Entity.ID)
	}
	if j.Entity.ID != "child-details-change" || strings.Join(setup, ",") != "case,child" || j.Changed == nil || j.Changed.Entity.ID != "child" ||
		j.PlannerPath == "" || !strings.Contains(j.Draft, `"childId":"<child id>"`) || !strings.Contains(j.Setup[1].Body, `"case":"<case id>"`) {
		t.Fatalf("journey %+v, setup %v, draft %s", j, setup, j.Draft)
	}
	if !slices.Equal(j.Setup[0].Unique, []string{"caseNumber"}) || len(j.Setup[1].Unique) != 0 {
		t.Errorf("unique fields: case %v, child %v", j.Setup[0].Unique, j.Setup[1].Unique)
	}
	// No usable profile, no journey.
	if planRequestJourney(res.Package, nil, demo.Claims) != nil {
		t.Error("a journey without a usable profile")
	}
}

func TestGISStepOfTheExample(t *testing.T) {
	res, err := project.Compile("../../../../examples/childsupport", project.Options{Fingerprint: layout.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	demo := planDemoClients(res.Package, planWalkthrough(res.Package))
	g := planGIS(res.Package, demo.Profiles["demo-standard"], demo.Claims)
	if g == nil {
		t.Fatal("no spatial adapter step for the example")
	}
	if g.Entity.ID != "service-office" || g.Reader != "public-read" || !g.Anonymous || !g.ReaderDefault || g.BBox != "23.94,59.17,25.94,61.17" ||
		g.Create == nil || g.Create.Profile != "caseworker" || !strings.Contains(g.Create.Body, `"location":{"coordinates":[24.94,60.17],"type":"Point"}`) {
		t.Fatalf("step %+v, create %+v", g, g.Create)
	}
	if planGIS(res.Package, nil, demo.Claims) != nil {
		t.Error("a spatial step without a usable profile to create a record")
	}
}

func TestIngestStepOfTheExample(t *testing.T) {
	dir := "../../../../examples/childsupport"
	res, err := project.Compile(dir, project.Options{Fingerprint: layout.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	demo := planDemoClients(res.Package, planWalkthrough(res.Package))
	s := planIngest(res.Package, dir, demo.Profiles["demo-standard"], demo.Claims)
	if s == nil {
		t.Fatal("no ingest step for the example")
	}
	if s.Entity.ID != "case" || s.Profile != "caseworker" || s.Items != 250 || strings.Join(s.Unique, ",") != "caseNumber" {
		t.Fatalf("step %+v", s)
	}
	if s.File != filepath.Join(dir, "ingest", "cases.jsonl") {
		t.Errorf("file %s", s.File)
	}
	// Items outside the demo client's row boundaries: no step.
	claims := map[string]string{}
	for k, v := range demo.Claims {
		claims[k] = v
	}
	claims["health_districts"] = "north"
	if planIngest(res.Package, dir, demo.Profiles["demo-standard"], claims) != nil {
		t.Error("a step whose items the demo client may not write")
	}
}
