package records

import (
	"errors"
	"testing"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/store"
)

// fuzzService is a service with just what body checks need: the codec of
// a package with one temporal entity and a grant writing every field.
func fuzzService(t testing.TB) (*Service, *model.Entity, *access.Grant) {
	e := &model.Entity{ID: "e", Route: "es", MutationMode: model.Mutable,
		Temporal: &model.Temporal{StartField: "from", EndField: "to", Type: model.TypeDate},
		Fields: []*model.Field{
			{ID: "name", APIName: "name", Type: model.TypeString},
			{ID: "n", APIName: "n", Type: model.TypeInteger},
			{ID: "doc", APIName: "doc", Type: model.TypeStructured},
			{ID: "from", APIName: "from", Type: model.TypeDate},
			{ID: "to", APIName: "to", Type: model.TypeDate},
		}}
	codec, err := values.NewCodec(&model.Package{Entities: []*model.Entity{e}})
	if err != nil {
		t.Fatal(err)
	}
	all := access.NewFieldSet("name", "n", "doc", "from", "to")
	return &Service{codec: codec}, e, &access.Grant{Readable: all, Writable: all}
}

// refusedAsBody fails t unless err is nil or a 400 request.invalid.
func refusedAsBody(t *testing.T, body []byte, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Code != problem.RequestInvalid {
		t.Fatalf("%q: refusal %v is not request.invalid", body, err)
	}
}

// FuzzRecordBodies feeds arbitrary bytes to the create-body and JSON Patch
// checks (through internal/strictjson) and applies an accepted patch to a
// record: each is accepted or refused with request.invalid (a failed test
// operation with precondition.failed), never a panic or another error.
func FuzzRecordBodies(f *testing.F) {
	for _, s := range []string{
		`{"data":{"name":"x","n":1,"from":"2026-01-01","to":"2026-02-01"}}`,
		`{"data":{"from":"2026-02-01","to":"2026-01-01"}}`,
		`{"data":{"doc":{"a":[1,{"b":null}]}}}`,
		"{\"data\":{\"name\":\"\xff\"}}",
		`{"data":{"name":"\ud800"}}`,
		`[{"op":"replace","path":"/data/name","value":"y"}]`,
		`[{"op":"add","path":"/data/doc/a~1b","value":1},{"op":"test","path":"/data/n","value":1}]`,
		`[{"op":"move","from":"/data/from","path":"/data/to"}]`,
	} {
		f.Add([]byte(s))
	}
	s, e, g := fuzzService(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		data, err := createData(body)
		refusedAsBody(t, body, err)
		if err == nil {
			_, err = s.decodeFields(e, g, data)
			refusedAsBody(t, body, err)
		}
		ops, err := parsePatch(e, g, body)
		refusedAsBody(t, body, err)
		if err == nil {
			cur := &store.Record{Values: map[string]any{"name": "x", "n": int64(1), "from": "2026-01-01", "to": "2026-02-01"}}
			_, err = s.applyPatch(e, cur, ops)
			var pe *problem.Error
			if err != nil && (!errors.As(err, &pe) || pe.Code != problem.RequestInvalid && pe.Code != problem.PreconditionFailed) {
				t.Fatalf("%q: applying refused with %v", body, err)
			}
		}
	})
}
