// Package querytest holds the fixtures the tests of the query layer share
// (model/query, store/querysql, host/cursor): an entity with a field of
// every type, a grant over it, option builders and a refusal check.
package querytest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
)

// Record ids used as keyset positions and uuid values.
const (
	UUIDA = "0a1b2c3d-0000-4000-8000-00000000000a"
	UUIDB = "0a1b2c3d-0000-4000-8000-00000000000b"
)

// TS parses an RFC 3339 time, panicking on a typo.
func TS(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func intp(v int) *int { return &v }

// PersonEntity has a field of every type; "secret" is readable by nobody,
// "hidden" readable but neither filterable nor sortable.
func PersonEntity() *model.Entity {
	return &model.Entity{ID: "person", Route: "people", MutationMode: model.Mutable, Fields: []*model.Field{
		{ID: "name", APIName: "name", Type: model.TypeString, MaxLength: intp(40)},
		{ID: "note", APIName: "note", Type: model.TypeText},
		{ID: "status", APIName: "status", Type: model.TypeCode, Values: []string{"active", "paused", "closed", "a_b", "50%"}},
		{ID: "age", APIName: "age", Type: model.TypeInteger},
		{ID: "amount", APIName: "amount", Type: model.TypeDecimal, Precision: intp(8), Scale: intp(2)},
		{ID: "born", APIName: "born", Type: model.TypeDate},
		{ID: "seen", APIName: "seen", Type: model.TypeTimestamp},
		{ID: "flag", APIName: "flag", Type: model.TypeBoolean},
		{ID: "ext", APIName: "ext", Type: model.TypeUUID},
		{ID: "where", APIName: "where", Type: model.TypeCRS84Point},
		{ID: "extra", APIName: "extra", Type: model.TypeStructured},
		{ID: "hidden", APIName: "hidden", Type: model.TypeString, MaxLength: intp(10)},
		{ID: "secret", APIName: "secret", Type: model.TypeString, MaxLength: intp(10)},
	}}
}

// ItemEntity has an index on its kind field.
func ItemEntity() *model.Entity {
	return &model.Entity{ID: "item", Route: "items", MutationMode: model.Mutable,
		Fields: []*model.Field{
			{ID: "kind", APIName: "kind", Type: model.TypeString, MaxLength: intp(10)},
			{ID: "n", APIName: "n", Type: model.TypeInteger},
		},
		Indexes: []*model.Index{{ID: "by-kind", Fields: []string{"kind"}}},
	}
}

var everything = []string{"name", "note", "status", "age", "amount", "born", "seen", "flag", "ext", "where", "extra"}

// FullAllowed reads, filters and sorts every field of PersonEntity but
// "hidden" (read only) and "secret" (withheld), and allows $count.
func FullAllowed() query.Allowed {
	return query.Allowed{
		Readable:   append(append([]string{}, everything...), "hidden"),
		Filterable: everything,
		Sortable:   []string{"name", "note", "status", "age", "amount", "born", "seen", "flag", "ext"},
		AllowCount: true,
	}
}

// Opts builds raw options from name, value pairs (a name may repeat).
func Opts(kv ...string) query.RawOptions {
	o := query.RawOptions{}
	for i := 0; i < len(kv); i += 2 {
		o[kv[i]] = append(o[kv[i]], kv[i+1])
	}
	return o
}

// FilterSeeds are the seed filters of the filter fuzz targets.
var FilterSeeds = []string{"age eq 1", "name eq 'O''Brien' or not (flag eq true)", "status in ('active','a_b')",
	"startswith(name,'%_\\') and contains(note,'x')", "seen ge 2024-01-31T10:00:00Z and born lt 2024-02-29",
	"amount gt -1.25", "where eq null", "((age gt 1))", "age eq", "'"}

// WantError checks that err is a *query.Error of kind k with a detail
// containing every fragment.
func WantError(t *testing.T, err error, k query.Kind, fragments ...string) {
	t.Helper()
	var qe *query.Error
	if !errors.As(err, &qe) {
		t.Fatalf("want a %s refusal, got %v", k, err)
	}
	if qe.Kind != k {
		t.Fatalf("want kind %s, got %s (%s)", k, qe.Kind, qe.Detail)
	}
	for _, f := range fragments {
		if !strings.Contains(qe.Detail, f) {
			t.Fatalf("detail %q does not contain %q", qe.Detail, f)
		}
	}
}

// BenchFilter is the five-comparison filter of the query layer's
// benchmarks (docs/performance/query.md).
const BenchFilter = "status in ('active','paused') and age ge 18 and (startswith(name,'Jo') or born lt 2000-01-01) and not (flag eq false)"

// ChildEntity is the small entity of the examples: a name, an age and a
// status code.
func ChildEntity() *model.Entity {
	return &model.Entity{ID: "child", Route: "children", Fields: []*model.Field{
		{ID: "given-name", APIName: "givenName", Type: model.TypeString},
		{ID: "age", APIName: "age", Type: model.TypeInteger},
		{ID: "status", APIName: "status", Type: model.TypeCode, Values: []string{"active", "closed"}},
	}}
}
