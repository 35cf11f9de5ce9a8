package query

import (
	"errors"
	"testing"

	"github.com/registrum/registrum/model"
)

func TestParseRecordSelectsLikeACollectionRead(t *testing.T) {
	e := &model.Entity{ID: "child", Route: "children", Fields: []*model.Field{
		{ID: "national-id", APIName: "nationalId", Type: model.TypeString},
		{ID: "age", APIName: "age", Type: model.TypeInteger},
		{ID: "secret", APIName: "secret", Type: model.TypeString},
	}}
	a := Allowed{Readable: []string{"national-id", "age"}}
	names := func(fs []*model.Field) (out []string) {
		for _, f := range fs {
			out = append(out, f.APIName)
		}
		return out
	}
	fs, err := ParseRecord(e, a, RawOptions{"$select": {"age"}, "accessProfile": {"p"}})
	if err != nil || len(fs) != 1 || fs[0].APIName != "age" {
		t.Fatalf("$select=age: %v %v", names(fs), err)
	}
	fs, err = ParseRecord(e, a, nil)
	if err != nil || len(fs) != 2 {
		t.Fatalf("no options: %v %v", names(fs), err)
	}
	for name, opts := range map[string]RawOptions{
		"unknown $ option": {"$expand": {"x"}},
		"collection only":  {"$filter": {"age eq 1"}},
		"unknown option":   {"foo": {"1"}},
		"withheld field":   {"$select": {"secret"}},
		"unknown field":    {"$select": {"nope"}},
		"empty select":     {"$select": {""}},
		"select twice":     {"$select": {"age", "age"}},
		"request history":  {OptRequestHistoryAfter: {"1"}},
	} {
		_, err := ParseRecord(e, a, opts)
		var qe *Error
		if !errors.As(err, &qe) || qe.Kind != Invalid {
			t.Errorf("%s: error %v, want kind Invalid", name, err)
		}
	}
}
