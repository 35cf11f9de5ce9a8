package query_test

import (
	"fmt"

	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/model/query/querytest"
)

func ExampleParse() {
	allowed := query.Allowed{
		Readable:   []string{"given-name", "age", "status"},
		Filterable: []string{"age", "status"},
		Sortable:   []string{"age"},
	}
	q, err := query.Parse(querytest.ChildEntity(), allowed, query.RawOptions{
		"$filter":  {"status eq 'active' and not (age lt 5)"},
		"$orderby": {"age desc"},
		"$top":     {"10"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(q.Filter())
	fmt.Println(q.Expr.Kind == query.And, q.Expr.Operands[0].Field.ID, q.Expr.Operands[0].Values)
	fmt.Println(q.Sort[0].Field.ID, q.Sort[0].Desc, q.Top, len(q.Select))

	// A withheld field is refused in the same words as an unknown one.
	_, err = query.Parse(querytest.ChildEntity(), allowed, query.RawOptions{"$filter": {"givenName eq 'Ann'"}})
	fmt.Println(err)
	// Output:
	// (status eq 'active') and (not (age lt 5))
	// true status [active]
	// age true 10 3
	// query.invalid: $filter: "givenName" is not a filterable field of this entity for this access profile.
}
