package querysql_test

import (
	"fmt"

	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/model/query/querytest"
	"github.com/registrum/registrum/store/querysql"
)

func ExampleCompiler_PageStatement() {
	allowed := query.Allowed{Readable: []string{"age"}, Filterable: []string{"age", "status"}, Sortable: []string{"age"}}
	opts := query.RawOptions{"$filter": {"status eq 'active' and not (age lt 5)"}, "$orderby": {"age desc"}, "$top": {"10"}}
	q, err := query.Parse(querytest.ChildEntity(), allowed, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	stmt := querysql.Compiler{}.PageStatement(q, "record_id", querysql.Fragment{SQL: "lifecycle = $1", Args: []any{"active"}})
	fmt.Println(stmt.SQL)
	fmt.Println(stmt.Args...)
	// Output:
	// SELECT record_id FROM "registrum_data"."e_child" WHERE (lifecycle = $1) AND (("f_status" = $2::text) AND (NOT COALESCE(("f_age" < $3::bigint), FALSE))) ORDER BY "registrum_data"."e_child"."f_age" DESC NULLS FIRST, "registrum_data"."e_child".record_id DESC LIMIT 11
	// active active 5
}
