package query_test

import (
	"strings"
	"testing"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
)

func TestParseDefaults(t *testing.T) {
	e := personEntity()
	q, err := query.Parse(e, fullAllowed(), opts("accessProfile", "staff"))
	if err != nil {
		t.Fatal(err)
	}
	if q.Top != query.DefaultTop || q.Count || len(q.Sort) != 0 || q.Filter() != "" || q.Position != nil {
		t.Fatalf("defaults: %+v", q)
	}
	var names []string
	for _, f := range q.Select {
		names = append(names, f.APIName)
	}
	// Every readable field in entity order; the withheld one is left out.
	if got := strings.Join(names, ","); got != "name,note,status,age,amount,born,seen,flag,ext,where,extra,hidden" {
		t.Fatalf("default select %s", got)
	}
}

func TestParseOptions(t *testing.T) {
	e := personEntity()
	q, err := query.Parse(e, fullAllowed(), opts("$select", "age, name", "$orderby", "age desc, name", "$count", "true", "$top", "100", "$filter", "age gt 3"))
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Select) != 2 || q.Select[0].ID != "age" || q.Select[1].ID != "name" {
		t.Fatalf("select %v", q.Select)
	}
	if len(q.Sort) != 2 || !q.Sort[0].Desc || q.Sort[1].Desc || q.Sort[1].Field.ID != "name" {
		t.Fatalf("sort %+v", q.Sort)
	}
	if !q.Count || q.Top != 100 || q.Limit() != 101 {
		t.Fatalf("count %v top %d", q.Count, q.Top)
	}
	// The ORDER BY these keys compile to is tested in store/querysql (TestOrderBy).
	q, _ = query.Parse(e, fullAllowed(), opts("$count", "false"))
	if q.Count {
		t.Fatal("$count=false counts")
	}
}

func TestParseTopBounds(t *testing.T) {
	e := personEntity()
	for _, ok := range []string{"1", "99", "100"} {
		if _, err := query.Parse(e, fullAllowed(), opts("$top", ok)); err != nil {
			t.Errorf("$top=%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"0", "101", "1000", "-1", "+5", "05", "", "1.0", "ten", " 5"} {
		_, err := query.Parse(e, fullAllowed(), opts("$top", bad))
		wantProblem(t, err, query.Invalid, "$top", "1 to 100")
	}
}

func TestParseRefusesWhatTheGrantDoesNotAllow(t *testing.T) {
	e := personEntity()
	a := fullAllowed()
	cases := []struct {
		name string
		opts query.RawOptions
		want []string
	}{
		{"unknown option", opts("$expand", "x"), []string{`"$expand"`, "not a query option"}},
		{"unknown plain option", opts("pageSize", "5"), []string{`"pageSize"`}},
		{"repeated option", opts("$top", "5", "$top", "6"), []string{"$top", "exactly once"}},
		{"select unknown", opts("$select", "nope"), []string{"$select", `"nope"`}},
		{"select withheld", opts("$select", "secret"), []string{"$select", `"secret"`}},
		{"select twice", opts("$select", "age,age"), []string{"$select", "twice"}},
		{"select empty member", opts("$select", "age,"), []string{"$select", "empty member"}},
		{"select empty", opts("$select", ""), []string{"$select", "empty"}},
		{"filter unknown", opts("$filter", "nope eq 1"), []string{"$filter", `"nope"`}},
		{"filter withheld", opts("$filter", "secret eq 'x'"), []string{"$filter", `"secret"`}},
		{"filter readable but not filterable", opts("$filter", "hidden eq 'x'"), []string{"$filter", `"hidden"`}},
		{"filter empty", opts("$filter", ""), []string{"$filter", "empty"}},
		{"orderby unknown", opts("$orderby", "nope"), []string{"$orderby", `"nope"`}},
		{"orderby withheld", opts("$orderby", "secret"), []string{"$orderby", `"secret"`}},
		{"orderby not sortable", opts("$orderby", "where"), []string{"$orderby", `"where"`}},
		{"orderby bad direction", opts("$orderby", "age up"), []string{"$orderby", "asc or desc"}},
		{"orderby twice", opts("$orderby", "age,age desc"), []string{"$orderby", "twice"}},
		{"orderby too many", opts("$orderby", "name,note,status,age,amount,born,seen,flag,ext"), []string{"$orderby", "more than 8"}},
		{"count bad value", opts("$count", "yes"), []string{"$count", "true or false"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := query.Parse(e, a, c.opts)
			wantProblem(t, err, query.Invalid, c.want...)
		})
	}
	// The same words for an unknown and a withheld field: nothing tells them apart.
	_, errUnknown := query.Parse(e, a, opts("$filter", "zzzzzz eq 'x'"))
	_, errWithheld := query.Parse(e, a, opts("$filter", "secret eq 'x'"))
	if strings.Replace(errUnknown.Error(), "zzzzzz", "secret", 1) != errWithheld.Error() {
		t.Fatalf("unknown and withheld differ:\n%v\n%v", errUnknown, errWithheld)
	}
	// $count without allowCount, whatever its value.
	a.AllowCount = false
	for _, v := range []string{"true", "false"} {
		_, err := query.Parse(e, a, opts("$count", v))
		wantProblem(t, err, query.Invalid, "$count", "not allowed")
	}
	// A sortable-only grant cannot filter on that field, and the reverse.
	only := query.Allowed{Readable: []string{"age"}, Sortable: []string{"age"}}
	_, err := query.Parse(e, only, opts("$filter", "age eq 1"))
	wantProblem(t, err, query.Invalid, `"age"`)
	only = query.Allowed{Readable: []string{"age"}, Filterable: []string{"age"}}
	_, err = query.Parse(e, only, opts("$orderby", "age"))
	wantProblem(t, err, query.Invalid, `"age"`)
}

func TestAllowedFromGrant(t *testing.T) {
	g := &model.Grant{ReadableFields: []string{"a", "b"}, FilterableFields: []string{"a"}, SortableFields: []string{"b"}, AllowCount: true}
	a := query.AllowedFromGrant(g)
	if len(a.Readable) != 2 || a.Filterable[0] != "a" || a.Sortable[0] != "b" || !a.AllowCount || a.Pseudo != nil {
		t.Fatalf("%+v", a)
	}
}

func TestRefusalsNameTheSameOptionEveryTime(t *testing.T) {
	for range 20 {
		_, err := query.Parse(personEntity(), fullAllowed(), opts("zeta", "1", "$expand", "x", "alpha", "2"))
		wantProblem(t, err, query.Invalid, `"$expand"`)
		_, err = query.Parse(personEntity(), fullAllowed(), opts("$skiptoken", "x", "$top", "5", "$filter", "age eq 1"))
		wantProblem(t, err, query.Invalid, "with $filter")
	}
}

func TestParseEchoesLongNamesShortened(t *testing.T) {
	long := strings.Repeat("x", 500)
	_, err := query.Parse(personEntity(), fullAllowed(), opts("$select", long))
	wantProblem(t, err, query.Invalid, "$select")
	if len(err.Error()) > 300 {
		t.Fatalf("detail repeats the whole name: %d bytes", len(err.Error()))
	}
}

func TestCursorComesAlone(t *testing.T) {
	e := personEntity()
	for _, other := range []string{"$filter", "$select", "$orderby", "$count", "$top", "pageSize"} {
		o := opts("$skiptoken", "abc", other, "x")
		_, err := query.Parse(e, fullAllowed(), o)
		wantProblem(t, err, query.Invalid)
	}
	q, err := query.Parse(e, fullAllowed(), opts("$skiptoken", "abc", "accessProfile", "staff"))
	if err != nil || q.Cursor != "abc" {
		t.Fatalf("cursor with accessProfile: %v %+v", err, q)
	}
	_, err = query.Parse(e, fullAllowed(), opts("$skiptoken", ""))
	wantProblem(t, err, query.CursorInvalid)
}

func TestOptionTextBounds(t *testing.T) {
	e := personEntity()
	for _, opt := range []string{query.OptSelect, query.OptOrderBy} {
		at := "age" + strings.Repeat(" ", query.MaxOptionBytes-3)
		if _, err := query.Parse(e, fullAllowed(), opts(opt, at)); err != nil {
			t.Fatalf("%s of %d bytes: %v", opt, len(at), err)
		}
		_, err := query.Parse(e, fullAllowed(), opts(opt, at+" "))
		wantProblem(t, err, query.Invalid, opt, "longer than 2048 bytes")
	}
	eight := "name,note,status,age,amount,born,seen,flag"
	if _, err := query.Parse(e, fullAllowed(), opts("$orderby", eight)); err != nil {
		t.Fatalf("8 keys: %v", err)
	}
	_, err := query.Parse(e, fullAllowed(), opts("$orderby", eight+",ext"))
	wantProblem(t, err, query.Invalid, "more than 8 keys")
}
