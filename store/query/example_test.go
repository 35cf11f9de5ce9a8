package query_test

import (
	"bytes"
	"fmt"
	"time"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/query"
)

func exampleEntity() *model.Entity {
	return &model.Entity{ID: "child", Route: "children", Fields: []*model.Field{
		{ID: "given-name", APIName: "givenName", Type: model.TypeString},
		{ID: "age", APIName: "age", Type: model.TypeInteger},
		{ID: "status", APIName: "status", Type: model.TypeCode, Values: []string{"active", "closed"}},
	}}
}

func ExampleParse() {
	allowed := query.Allowed{
		Readable:   []string{"given-name", "age", "status"},
		Filterable: []string{"age", "status"},
		Sortable:   []string{"age"},
	}
	q, err := query.Parse(exampleEntity(), allowed, query.RawOptions{
		"$filter":  {"status eq 'active' and not (age lt 5)"},
		"$orderby": {"age desc"},
		"$top":     {"10"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	stmt := q.PageStatement("record_id", query.Fragment{SQL: "lifecycle = $1", Args: []any{"active"}})
	fmt.Println(stmt.SQL)
	fmt.Println(stmt.Args...)

	// A withheld field is refused in the same words as an unknown one.
	_, err = query.Parse(exampleEntity(), allowed, query.RawOptions{"$filter": {"givenName eq 'Ann'"}})
	fmt.Println(err)
	// Output:
	// SELECT record_id FROM "registrum_data"."e_child" WHERE (lifecycle = $1) AND (("f_status" = $2::text) AND (NOT COALESCE(("f_age" < $3::bigint), FALSE))) ORDER BY "f_age" DESC NULLS FIRST, record_id DESC LIMIT 11
	// active active 5
	// query.invalid: $filter: "givenName" is not a filterable field of this entity for this access profile.
}

func ExampleSealer() {
	sealer, err := query.NewSealer(bytes.Repeat([]byte{1}, 32)) // the host secret, at least 32 bytes
	if err != nil {
		fmt.Println(err)
		return
	}
	e := exampleEntity()
	allowed := query.Allowed{Readable: []string{"age"}, Sortable: []string{"age"}}
	caller := query.Caller{Principal: "client-7", Profile: "caseworker", PackageRevision: "sha256:0f"}
	now := time.Now()

	q, _ := sealer.Parse(e, allowed, query.RawOptions{"$orderby": {"age"}}, caller, now)
	// ... run q's page; its last row becomes the cursor's position:
	next, _ := sealer.Seal(q, caller, query.Row{ID: "5f0c2a7e-1111-4222-8333-944455556666", Values: map[string]any{"age": int64(7)}}, now)

	// The next request sends the cursor alone.
	q2, err := sealer.Parse(e, allowed, query.RawOptions{"$skiptoken": {next}}, caller, now.Add(time.Second))
	fmt.Println(err, q2.OrderBy(), q2.Position.Values["age"])

	// Another caller cannot use it.
	_, err = sealer.Parse(e, allowed, query.RawOptions{"$skiptoken": {next}}, query.Caller{Principal: "client-8", Profile: "caseworker", PackageRevision: "sha256:0f"}, now)
	fmt.Println(err)
	// Output:
	// <nil> "f_age" ASC NULLS LAST, record_id ASC 7
	// query.cursor_invalid: The cursor was issued to another caller, access profile, route or package revision.
}
