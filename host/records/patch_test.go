package records

import (
	"errors"
	"testing"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/model"
)

func patchEntity() (*model.Entity, *access.Grant) {
	e := &model.Entity{ID: "e", Fields: []*model.Field{
		{ID: "name", APIName: "name", Type: model.TypeString},
		{ID: "doc", APIName: "doc", Type: model.TypeStructured},
		{ID: "hidden", APIName: "hidden", Type: model.TypeString},
	}}
	g := &access.Grant{
		Readable: access.NewFieldSet("name", "doc"),
		Writable: access.NewFieldSet("name", "doc"),
	}
	return e, g
}

func TestParsePatchPaths(t *testing.T) {
	e, g := patchEntity()
	ok := []string{
		`[{"op":"replace","path":"/data/name","value":"x"}]`,
		`[{"op":"add","path":"/data/doc/a~1b","value":1}]`,
		`[{"op":"test","path":"/data/name","value":"x"},{"op":"move","from":"/data/name","path":"/data/name"}]`,
	}
	for _, body := range ok {
		if _, err := parsePatch(e, g, []byte(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
	refused := map[string]string{
		`[{"op":"replace","path":"/data/hidden","value":"x"}]`:      "/data/hidden",
		`[{"op":"replace","path":"/data/name/x","value":"x"}]`:      "/data/name",
		`[{"op":"copy","from":"/data/hidden","path":"/data/name"}]`: "/data/hidden",
		`[{"op":"replace","path":"data/name","value":"x"}]`:         "/0/path",
		`[{"op":"replace","path":7,"value":"x"}]`:                   "/0/path",
	}
	for body, at := range refused {
		_, err := parsePatch(e, g, []byte(body))
		var pe *problem.Error
		if !errors.As(err, &pe) || pe.Code != problem.RequestInvalid || pe.FieldPath == nil || *pe.FieldPath != at {
			t.Errorf("%s: err = %v, want request.invalid at %s", body, err, at)
		}
	}
}

func FuzzParsePatch(f *testing.F) {
	for _, s := range []string{`[]`, `[{"op":"add","path":"/data/name","value":1}]`, `[{"op":"move","from":"/data/doc/~0","path":"/data/doc/x"}]`, `{"op":1}`, `[{"op":"add","path":"/data/~"}]`} {
		f.Add([]byte(s))
	}
	e, g := patchEntity()
	f.Fuzz(func(t *testing.T, body []byte) {
		ops, err := parsePatch(e, g, body)
		if err != nil {
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.Code != problem.RequestInvalid {
				t.Fatalf("refusal %v is not request.invalid", err)
			}
			return
		}
		if ops == nil {
			t.Fatal("no error and no operations")
		}
	})
}
