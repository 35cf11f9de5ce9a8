package query_test

import (
	"errors"
	"testing"

	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/model/query/querytest"
)

// FuzzParseFilter: any filter text either parses to a query whose
// canonical form parses to itself, or is refused with kind Invalid. Seeds:
// testdata/fuzz/FuzzParseFilter. (store/querysql's FuzzWhere checks the SQL
// the parsed filters compile to.)
func FuzzParseFilter(f *testing.F) {
	for _, s := range querytest.FilterSeeds {
		f.Add(s)
	}
	e := personEntity()
	a := fullAllowed()
	f.Fuzz(func(t *testing.T, src string) {
		q, err := query.Parse(e, a, query.RawOptions{query.OptFilter: {src}})
		if err != nil {
			var qe *query.Error
			if !errors.As(err, &qe) || qe.Kind != query.Invalid {
				t.Fatalf("%q: refusal is not query.invalid: %v", src, err)
			}
			return
		}
		canon := q.Filter()
		again, err := query.Parse(e, a, query.RawOptions{query.OptFilter: {canon}})
		if err == nil && again.Filter() != canon {
			t.Fatalf("%q: canonical form %q reparses as %q", src, canon, again.Filter())
		}
	})
}
