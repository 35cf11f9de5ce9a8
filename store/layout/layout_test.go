package layout

import (
	"strings"
	"testing"

	"github.com/registrum/registrum/model"
)

func intp(v int) *int { return &v }

func samplePackage() *model.Package {
	return &model.Package{
		Format: model.Format,
		Entities: []*model.Entity{
			{ID: "household", Route: "households", MutationMode: model.Mutable, Fields: []*model.Field{
				{ID: "name", APIName: "name", Type: model.TypeString, Required: true, MaxLength: intp(80)},
			}},
			{ID: "child", Route: "children", MutationMode: model.Mutable, Fields: []*model.Field{
				{ID: "national-id", APIName: "nationalId", Type: model.TypeString, Required: true, MaxLength: intp(20)},
				{ID: "household", APIName: "household", Type: model.TypeReference, Target: "household"},
				{ID: "status", APIName: "status", Type: model.TypeCode, Values: []string{"active", "o'closed"}},
			}, Constraints: []*model.Constraint{{ID: "unique-nid", Kind: model.ConstraintUnique, Fields: []string{"national-id"}}}},
		},
	}
}

func TestFingerprintIsDeterministicAndFollowsTheLayout(t *testing.T) {
	p := samplePackage()
	a, err := Fingerprint(p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Fingerprint(samplePackage())
	if a != b {
		t.Fatalf("same package, different fingerprints: %s %s", a, b)
	}
	if !strings.HasPrefix(a, "sha256:") || len(a) != 71 {
		t.Fatalf("fingerprint %q has the wrong shape", a)
	}
	p.Entities[0].Fields[0].MaxLength = intp(81)
	c, _ := Fingerprint(p)
	if c == a {
		t.Fatal("changing a field bound did not change the fingerprint")
	}
	p2 := samplePackage()
	p2.Entities[0].Route = "homes" // routes are not part of the layout
	d, _ := Fingerprint(p2)
	if d != a {
		t.Fatal("a route change changed the database layout fingerprint")
	}
}

func TestLongNamesAreShortenedUniquely(t *testing.T) {
	long := strings.Repeat("a", 64)
	n1 := name("e_", long)
	n2 := name("e_", long[:63]+"b")
	if len(n1) > maxIdentifier || len(n2) > maxIdentifier {
		t.Fatalf("names too long: %d %d", len(n1), len(n2))
	}
	if n1 == n2 {
		t.Fatal("two long ids share a table name")
	}
	if got := name("e_", "child"); got != "e_child" {
		t.Fatalf("short name changed: %s", got)
	}
}

func TestDDLQuotesLiteralsAndOrdersForeignKeysLast(t *testing.T) {
	stmts, err := DDL(samplePackage())
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(stmts, "\n")
	if !strings.Contains(all, "'o''closed'") {
		t.Errorf("code value not quoted safely:\n%s", all)
	}
	last := stmts[len(stmts)-1]
	if !strings.Contains(last, "FOREIGN KEY") {
		t.Errorf("last statement is not the foreign key: %s", last)
	}
	if !strings.Contains(all, "EXCLUDE USING btree") || !strings.Contains(all, "DEFERRABLE INITIALLY DEFERRED") {
		t.Errorf("unique constraint is not a deferrable exclusion:\n%s", all)
	}
}

func TestUnknownFieldsInConstraintsAreRefused(t *testing.T) {
	p := samplePackage()
	p.Entities[1].Constraints[0].Fields = []string{"nope"}
	if _, err := DDL(p); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("err = %v", err)
	}
}
