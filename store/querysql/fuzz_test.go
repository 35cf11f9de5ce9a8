package querysql_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/model/query/querytest"
)

var placeholder = regexp.MustCompile(`\$[0-9]+::`)

// FuzzWhere: any filter text that parses compiles to SQL that holds no
// literal, with one argument per placeholder. (model/query's
// FuzzParseFilter checks the refusals and the canonical form.)
func FuzzWhere(f *testing.F) {
	for _, s := range querytest.FilterSeeds {
		f.Add(s)
	}
	e := personEntity()
	a := fullAllowed()
	f.Fuzz(func(t *testing.T, src string) {
		q, err := query.Parse(e, a, query.RawOptions{query.OptFilter: {src}})
		if err != nil {
			return
		}
		w := sql.Where(q, 2)
		if n := len(placeholder.FindAllString(w.SQL, -1)); n != len(w.Args) {
			t.Fatalf("%q: %d placeholders, %d args: %s", src, n, len(w.Args), w.SQL)
		}
		if strings.Contains(strings.ReplaceAll(w.SQL, `ESCAPE '\'`, ""), "'") {
			t.Fatalf("%q: a quote reached the SQL text: %s", src, w.SQL)
		}
	})
}
