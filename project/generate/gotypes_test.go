package generate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/registrum/registrum/model"
)

// TestGoTypesNameEveryFieldOnceUnderItsAPIName parses the generated code
// of the test package (a field of every type), with an entity named
// "point" and two fields whose Go names collide added: every field is one
// member whose JSON tag is its apiName, names stay unique, and every
// optional field is nil-able and omitted when nil.
func TestGoTypesNameEveryFieldOnceUnderItsAPIName(t *testing.T) {
	p := testPackage()
	p.Entities = append(p.Entities, &model.Entity{ID: "point", Route: "points", MutationMode: model.Mutable, Fields: []*model.Field{
		{ID: "a-b", APIName: "aB", Type: model.TypeString, Required: true},
		{ID: "ab", APIName: "AB", Type: model.TypeInteger},
		{ID: "when", APIName: "when", Type: model.TypeTimestamp},
	}})
	src, err := GoTypes(p, "reg")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	structs := map[string]*ast.StructType{}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok {
			for _, s := range g.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok {
					if st, ok := ts.Type.(*ast.StructType); ok {
						structs[ts.Name.Name] = st
					}
				}
			}
		}
	}
	if structs["Point"] == nil || structs["Point2"] == nil {
		t.Fatalf("the point entity and the GeoJSON type do not both exist: %v", keys(structs))
	}
	for _, e := range p.Entities {
		st := structs[goName(e.ID)]
		if e.ID == "point" {
			st = structs["Point2"]
		}
		if st == nil {
			t.Fatalf("no struct for %s", e.ID)
		}
		names := map[string]bool{}
		tags := map[string]string{}
		for _, fld := range st.Fields.List {
			tag, _ := strconv.Unquote(fld.Tag.Value)
			name := fld.Names[0].Name
			if names[name] {
				t.Errorf("%s: member %s twice", e.ID, name)
			}
			names[name] = true
			tags[strings.Split(reflect.StructTag(tag).Get("json"), ",")[0]] = reflect.StructTag(tag).Get("json")
			_, ptr := fld.Type.(*ast.StarExpr)
			if sel, ok := fld.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "RawMessage" {
				ptr = true
			}
			if omit := strings.HasSuffix(reflect.StructTag(tag).Get("json"), ",omitempty"); omit != ptr {
				t.Errorf("%s.%s: omitempty %v, nil-able %v", e.ID, name, omit, ptr)
			}
		}
		for _, fd := range e.Fields {
			tag, ok := tags[fd.APIName]
			if !ok {
				t.Errorf("%s: no member for %s", e.ID, fd.APIName)
			}
			if strings.HasSuffix(tag, ",omitempty") == fd.Required {
				t.Errorf("%s.%s: tag %q, required %v", e.ID, fd.APIName, tag, fd.Required)
			}
		}
	}
	if _, err := GoTypes(p, "func"); err == nil {
		t.Error("a keyword was accepted as the package name")
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
