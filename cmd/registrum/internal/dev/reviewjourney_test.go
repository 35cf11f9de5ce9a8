package dev

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/project"
	"github.com/registrum/registrum/project/generate"
	"github.com/registrum/registrum/store/layout"
)

// TestReviewedJourneyOfTheExample: the reviewed journey is the applicant's
// child-support application, its answers those of the published form (seed
// 002) mapped onto the entity, the required certificate attached, applied by
// a caseworker and the case found by its number.
func TestReviewedJourneyOfTheExample(t *testing.T) {
	res, err := project.Compile("../../../../examples/childsupport", project.Options{Fingerprint: layout.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Package
	demo := planDemoClients(p, planWalkthrough(p))
	usable := demo.Profiles["demo-standard"]
	earlier := planRequestJourney(p, usable, demo.Claims)
	j := planReviewedJourney(p, usable, demo.Claims, earlier)
	if j == nil {
		t.Fatal("no reviewed journey for the example")
	}
	if j.Entity.ID != "application" || j.Profile != "applicant" || j.ApplyProfile != "caseworker" || len(j.Setup) != 0 ||
		j.Slot == nil || j.Slot.ID != "medical-certificate" || j.SlotType != "application/pdf" ||
		j.Find == nil || j.Find.Entity.ID != "case" || j.Find.Profile != "caseworker" || j.Find.Filter != "caseNumber eq 'CS-1111'" ||
		strings.Join(j.Unique, ",") != "caseNumber" {
		t.Fatalf("reviewed journey %+v", j)
	}

	// The form's answers are the draft's values of its fields: every form
	// field names a field of the application, and those values validate
	// against the published form schema.
	var form *model.Form
	for _, f := range p.Forms {
		if f.Entity == "application" {
			form = f
		}
	}
	if form == nil {
		t.Fatal("the example publishes no application form")
	}
	var draft struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(j.Draft), &draft); err != nil {
		t.Fatal(err)
	}
	answers := map[string]any{}
	for _, ff := range form.Fields {
		if !hasAPIName(j.Entity, ff.Name) {
			t.Errorf("form field %s names no field of the application", ff.Name)
		}
		if v, ok := draft.Data[ff.Name]; ok {
			answers[ff.Name] = v
		} else if ff.Required {
			t.Errorf("the draft has no answer to the required form field %s", ff.Name)
		}
	}
	raw, err := generate.FormSchema(p, form)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("form.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("form.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(answers); err != nil {
		t.Fatalf("the draft's answers %v do not fill the form: %v", answers, err)
	}

	// An entity with two required slots (both writable) is left out: the
	// journey fills one.
	e := p.EntityByID("application")
	saved := e.Attachments
	two := []*model.AttachmentSlot{{ID: "medical-certificate", Required: true, ContentTypes: []string{"application/pdf"}}, {ID: "birth-certificate", Required: true, ContentTypes: []string{"application/pdf"}}}
	e.Attachments = two
	if j := planReviewedJourney(p, usable, demo.Claims, earlier); j != nil && j.Entity.ID == "application" {
		t.Errorf("an application with two required slots was chosen")
	}
	e.Attachments = saved
	// No usable profile, no journey.
	if planReviewedJourney(p, nil, demo.Claims, earlier) != nil {
		t.Error("a reviewed journey without a usable profile")
	}
}

func hasAPIName(e *model.Entity, name string) bool {
	for _, f := range e.Fields {
		if f.APIName == name {
			return true
		}
	}
	return false
}
