package cursor_test

import (
	"bytes"
	"fmt"
	"time"

	"github.com/registrum/registrum/host/cursor"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/model/query/querytest"
	"github.com/registrum/registrum/store/querysql"
)

func ExampleSealer() {
	sealer, err := cursor.NewSealer(bytes.Repeat([]byte{1}, 32)) // the host secret, at least 32 bytes
	if err != nil {
		fmt.Println(err)
		return
	}
	e := querytest.ChildEntity()
	allowed := query.Allowed{Readable: []string{"age"}, Sortable: []string{"age"}}
	caller := cursor.Caller{Principal: "client-7", Profile: "caseworker", PackageRevision: "sha256:0f"}
	now := time.Now()

	q, _ := sealer.Parse(e, allowed, query.RawOptions{"$orderby": {"age"}}, caller, now)
	// ... run q's page; its last row becomes the cursor's position:
	next, _ := sealer.Seal(q, caller, query.Row{ID: "5f0c2a7e-1111-4222-8333-944455556666", Values: map[string]any{"age": int64(7)}}, now)

	// The next request sends the cursor alone.
	q2, err := sealer.Parse(e, allowed, query.RawOptions{"$skiptoken": {next}}, caller, now.Add(time.Second))
	fmt.Println(err, querysql.Compiler{}.OrderBy(q2), q2.Position.Values["age"])

	// Another caller cannot use it.
	_, err = sealer.Parse(e, allowed, query.RawOptions{"$skiptoken": {next}}, cursor.Caller{Principal: "client-8", Profile: "caseworker", PackageRevision: "sha256:0f"}, now)
	fmt.Println(err)
	// Output:
	// <nil> "registrum_data"."e_child"."f_age" ASC NULLS LAST, "registrum_data"."e_child".record_id ASC 7
	// query.cursor_invalid: The cursor was issued to another caller, access profile, route or package revision.
}
