package planners_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/planners"
)

// frozen returns frozenPlan, frozen.
func frozen(t *testing.T) *planners.Plan {
	t.Helper()
	p := frozenPlan()
	if err := p.Freeze(); err != nil {
		t.Fatal(err)
	}
	return p
}

// frozenPlan returns a plan holding every kind of write and value a frozen
// plan carries, its values already in the form ParseFrozen reads them in
// (strings, json.Number, booleans, null, objects and arrays).
func frozenPlan() *planners.Plan {
	return &planners.Plan{Kind: planners.KindTengo, ModuleDigest: "sha256:" + strings.Repeat("ab", 32), ProposalVersion: 4, Writes: []planners.Write{
		{ID: "hh", Operation: model.EffectCreate, Target: planners.Target{Entity: "household"},
			Set: map[string]planners.Value{"name": {Value: "Lind"}, "size": {Value: json.Number("3")}}},
		{ID: "kid", Operation: model.EffectCreate, Target: planners.Target{Entity: "person"},
			Set: map[string]planners.Value{
				"name":      {Value: "Ada \u00e9\u4e2d \"quoted\""},
				"household": {FromEffect: "hh"},
				"note":      {Value: nil},
				"active":    {Value: true},
				"where":     {Value: map[string]any{"type": "Point", "coordinates": []any{json.Number("24.9"), json.Number("60.2")}}},
			}},
		{ID: "old", Operation: model.EffectPatch, Target: planners.Target{Entity: "person", RecordID: personID},
			Set: map[string]planners.Value{"status": {Value: "inactive"}}, Clear: []string{"note", "age"}, ExpectedRevision: 7},
		{ID: "again", Operation: model.EffectPatch, Target: planners.Target{Entity: "person", FromEffect: "kid"}, Clear: []string{"note"}},
	}}
}

// A frozen plan parses back to the writes it was frozen from, member for
// member, and freezing those again gives the same bytes and digest.
func TestAFrozenPlanParsesBackToItsWrites(t *testing.T) {
	p := frozen(t)
	got, err := planners.ParseFrozen(p.Canonical)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p.Writes) {
		t.Fatalf("parsed writes differ:\n got %#v\nwant %#v", got, p.Writes)
	}
	if v := got[1].Set["note"]; !v.IsNull() {
		t.Fatalf("a literal null came back as %#v", v)
	}
	again := &planners.Plan{ProposalVersion: p.ProposalVersion, Writes: got}
	if err := again.Freeze(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Canonical, p.Canonical) || again.EffectDigest != p.EffectDigest {
		t.Fatalf("refrozen plan differs:\n%s\n%s", again.Canonical, p.Canonical)
	}
}

// A plan as a planner makes it (integers as int64, values checked) freezes
// to a form that parses and freezes again to the very same digest: what
// review saw is what apply writes.
func TestAPlannersPlanKeepsItsDigestThroughFreezeAndParse(t *testing.T) {
	p := declarativePlanner(t,
		&model.Effect{ID: "hh", Operation: model.EffectCreate, Target: model.EffectTarget{Entity: "household"},
			Set: []*model.SetField{{Field: "name", FromField: "name"}, {Field: "size", Value: 2}}},
		&model.Effect{ID: "kid", Operation: model.EffectCreate, Target: model.EffectTarget{Entity: "person"},
			Set: []*model.SetField{{Field: "name", Value: "Ada"}, {Field: "age", FromField: "age"}, {Field: "household", FromEffect: "hh"}, {Field: "note", Value: nil}}},
		&model.Effect{ID: "old", Operation: model.EffectPatch, Target: model.EffectTarget{Entity: "person", FromField: "person"},
			Set: []*model.SetField{{Field: "status", Value: "inactive"}}, Clear: []string{"note"}},
	)
	plan, err := p.Plan(context.Background(), planners.Input{ProposalVersion: 1, Fields: map[string]any{"name": "Lind", "age": int64(9), "person": personID}})
	if err != nil {
		t.Fatal(err)
	}
	plan.Writes[2].ExpectedRevision = 5 // as the host fills it in before Freeze
	if err := plan.Freeze(); err != nil {
		t.Fatal(err)
	}
	writes, err := planners.ParseFrozen(plan.Canonical)
	if err != nil {
		t.Fatal(err)
	}
	if len(writes) != 3 || writes[1].Set["age"].Value != json.Number("9") || writes[2].ExpectedRevision != 5 || writes[2].Target.RecordID != personID {
		t.Fatalf("parsed writes %#v", writes)
	}
	again := &planners.Plan{ProposalVersion: 1, Writes: writes}
	if err := again.Freeze(); err != nil {
		t.Fatal(err)
	}
	if again.EffectDigest != plan.EffectDigest {
		t.Fatalf("digest %s after the round trip, %s before", again.EffectDigest, plan.EffectDigest)
	}
}

// The effect digest is "sha256:" and the hex SHA-256 of the canonical form,
// which is RFC 8785 JSON of {proposalVersion, writes} only: plans built in
// any map order freeze alike; the kind and module digest are not part of it.
func TestFreezeWritesTheCanonicalFormAndItsDigest(t *testing.T) {
	p := frozen(t)
	sum := sha256.Sum256(p.Canonical)
	if p.EffectDigest != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("digest %s does not hash the canonical form", p.EffectDigest)
	}
	if !bytes.HasPrefix(p.Canonical, []byte(`{"proposalVersion":4,"writes":[{"id":"hh","operation":"create","set":{"name":{"value":"Lind"},"size":{"value":3}},"target":{"entity":"household"}}`)) {
		t.Fatalf("canonical form %s", p.Canonical)
	}
	var doc map[string]any
	if err := json.Unmarshal(p.Canonical, &doc); err != nil || len(doc) != 2 {
		t.Fatalf("canonical form members %v (%v)", doc, err)
	}
	for i := 0; i < 20; i++ {
		q := frozenPlan()
		q.Kind, q.ModuleDigest = planners.KindWASM, ""
		if err := q.Freeze(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(q.Canonical, p.Canonical) || q.EffectDigest != p.EffectDigest {
			t.Fatalf("an equal plan froze differently:\n%s\n%s", q.Canonical, p.Canonical)
		}
	}
}

// Any change to what apply would write, or to the proposal it belongs to,
// changes the effect digest: review and apply are bound to exactly these
// writes, so a frozen form altered after review no longer matches it.
func TestEveryChangeToTheWritesChangesTheEffectDigest(t *testing.T) {
	base := frozenPlan()
	if err := base.Freeze(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(p *planners.Plan)
	}{
		{"proposal version", func(p *planners.Plan) { p.ProposalVersion++ }},
		{"a value", func(p *planners.Plan) { p.Writes[0].Set["size"] = planners.Value{Value: json.Number("4")} }},
		{"a value's type", func(p *planners.Plan) { p.Writes[0].Set["size"] = planners.Value{Value: "3"} }},
		{"a value to null", func(p *planners.Plan) { p.Writes[0].Set["size"] = planners.Value{} }},
		{"a reference source", func(p *planners.Plan) { p.Writes[1].Set["household"] = planners.Value{Value: "hh"} }},
		{"a field added", func(p *planners.Plan) { p.Writes[2].Set["note"] = planners.Value{Value: "n"} }},
		{"a clear dropped", func(p *planners.Plan) { p.Writes[2].Clear = p.Writes[2].Clear[:1] }},
		{"the clear order", func(p *planners.Plan) { p.Writes[2].Clear = []string{"age", "note"} }},
		{"a target record", func(p *planners.Plan) { p.Writes[2].Target.RecordID = otherID }},
		{"a target entity", func(p *planners.Plan) { p.Writes[0].Target.Entity = "person" }},
		{"an operation", func(p *planners.Plan) { p.Writes[3].Operation = model.EffectCreate }},
		{"an effect id", func(p *planners.Plan) { p.Writes[3].ID = "again2" }},
		{"an expected revision", func(p *planners.Plan) { p.Writes[2].ExpectedRevision = 8 }},
		{"the write order", func(p *planners.Plan) { p.Writes[2], p.Writes[3] = p.Writes[3], p.Writes[2] }},
		{"a write dropped", func(p *planners.Plan) { p.Writes = p.Writes[:3] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := frozenPlan()
			tc.change(p)
			if err := p.Freeze(); err != nil {
				t.Fatal(err)
			}
			if p.EffectDigest == base.EffectDigest || bytes.Equal(p.Canonical, base.Canonical) {
				t.Fatal("the change left the frozen plan as it was")
			}
		})
	}

	// The same holds for the stored bytes: a frozen form edited after the
	// fact reads back to writes whose digest is not the one reviewed.
	tampered := bytes.Replace(base.Canonical, []byte(`"inactive"`), []byte(`"active"`), 1)
	writes, err := planners.ParseFrozen(tampered)
	if err != nil {
		t.Fatal(err)
	}
	again := &planners.Plan{ProposalVersion: base.ProposalVersion, Writes: writes}
	if err := again.Freeze(); err != nil {
		t.Fatal(err)
	}
	if again.EffectDigest == base.EffectDigest {
		t.Fatal("a tampered frozen form keeps the reviewed digest")
	}
}

// ParseFrozen refuses a frozen form it cannot read as writes: not JSON,
// cut short, or with members of the wrong shape.
func TestParseFrozenRefusesMalformedForms(t *testing.T) {
	p := frozen(t)
	for _, tc := range []struct{ name, doc string }{
		{"empty", ``},
		{"not JSON", `writes`},
		{"cut short", string(p.Canonical[:len(p.Canonical)-2])},
		{"writes not an array", `{"proposalVersion":1,"writes":{"id":"x"}}`},
		{"a write not an object", `{"proposalVersion":1,"writes":["x"]}`},
		{"an id not a string", `{"proposalVersion":1,"writes":[{"id":1,"operation":"create","target":{"entity":"person"}}]}`},
		{"a target not an object", `{"proposalVersion":1,"writes":[{"id":"x","operation":"create","target":"person"}]}`},
		{"a set not an object", `{"proposalVersion":1,"writes":[{"id":"x","operation":"create","target":{"entity":"person"},"set":["name"]}]}`},
		{"a set value not a source", `{"proposalVersion":1,"writes":[{"id":"x","operation":"create","target":{"entity":"person"},"set":{"name":"Ada"}}]}`},
		{"a fromEffect not a string", `{"proposalVersion":1,"writes":[{"id":"x","operation":"create","target":{"entity":"person"},"set":{"household":{"fromEffect":1}}}]}`},
		{"a clear not a list of names", `{"proposalVersion":1,"writes":[{"id":"x","operation":"patch","target":{"entity":"person","recordId":"` + personID + `"},"clear":[1]}]}`},
		{"an expected revision not an integer", `{"proposalVersion":1,"writes":[{"id":"x","operation":"patch","target":{"entity":"person","recordId":"` + personID + `"},"clear":["note"],"expectedRevision":"7"}]}`},
		{"an expected revision with a fraction", `{"proposalVersion":1,"writes":[{"id":"x","operation":"patch","target":{"entity":"person","recordId":"` + personID + `"},"clear":["note"],"expectedRevision":7.5}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writes, err := planners.ParseFrozen([]byte(tc.doc))
			if err == nil {
				t.Fatalf("parsed to %#v", writes)
			}
			if !strings.HasPrefix(err.Error(), "planners: frozen plan: ") {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// Value writes a literal as {"value": v} (null included) and a reference to
// an earlier create as {"fromEffect": id}, never both.
func TestValueMarshalsOneSource(t *testing.T) {
	for _, tc := range []struct {
		v    planners.Value
		want string
	}{
		{planners.Value{Value: "x"}, `{"value":"x"}`},
		{planners.Value{}, `{"value":null}`},
		{planners.Value{Value: false}, `{"value":false}`},
		{planners.Value{FromEffect: "hh"}, `{"fromEffect":"hh"}`},
		{planners.Value{FromEffect: "hh", Value: "ignored"}, `{"fromEffect":"hh"}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil || string(b) != tc.want {
			t.Errorf("%#v: %s (%v), want %s", tc.v, b, err, tc.want)
		}
	}
	if !(planners.Value{}).IsNull() || (planners.Value{FromEffect: "hh"}).IsNull() || (planners.Value{Value: false}).IsNull() {
		t.Error("IsNull is wrong")
	}
}

// FrozenTargets reads the entity of each write, in order, as ParseFrozen
// does, and refuses what is not a frozen plan.
func TestFrozenTargetsAreTheParsedWritesTargets(t *testing.T) {
	p := frozen(t)
	got, err := planners.FrozenTargets(p.Canonical)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, w := range p.Writes {
		want = append(want, w.Target.Entity)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
	for _, doc := range []string{``, `writes`, string(p.Canonical[:len(p.Canonical)-2]), `{"writes":{"id":"x"}}`, `{"writes":[{"target":"person"}]}`} {
		if targets, err := planners.FrozenTargets([]byte(doc)); err == nil || !strings.HasPrefix(err.Error(), "planners: frozen plan: ") {
			t.Errorf("FrozenTargets(%q) = %v, %v", doc, targets, err)
		}
	}
}
