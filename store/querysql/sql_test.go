package querysql_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/querysql"
)

// semanticRows is a small table whose names identify the rows.
var semanticRows = []map[string]any{
	{"name": "Ann", "note": "likes 50% off", "status": "active", "age": int64(30), "amount": "10.50", "born": "1990-01-01", "seen": ts("2024-01-01T00:00:00Z"), "flag": true, "ext": uuidA, "where": `{"type":"Point","coordinates":[1,2]}`},
	{"name": "Bob", "note": "under_score", "status": "paused", "age": int64(40), "amount": "20.00", "born": "1980-05-05", "seen": ts("2024-06-01T12:00:00Z"), "flag": false, "ext": uuidB},
	{"name": "O'Brien", "note": `back\slash`, "status": "closed"},
	{"name": "'; drop table x; --", "note": "500 off", "status": "a_b", "age": int64(5), "amount": "-1.25", "born": "2000-02-29", "flag": true},
	{"name": "Annabel", "status": "50%", "age": int64(30), "amount": "10.50", "flag": true},
	{"name": "a_c", "note": "underscore", "age": int64(7)},
	{"name": "abc", "note": "a%b", "age": int64(8)},
}

func loadSemantic(t *testing.T) (*pgxpool.Pool, []string) {
	e := personEntity()
	pool := openDB(t, e)
	ids := make([]string, len(semanticRows))
	for i := range ids {
		ids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1)
	}
	insertRows(t, pool, e, ids, semanticRows)
	return pool, ids
}

// run executes a page and a count statement for q and returns the names
// of the page (in order) and the count.
func run(t *testing.T, pool *pgxpool.Pool, q *query.Query) ([]string, int) {
	t.Helper()
	return runWith(t, pool, sql, q)
}

// runWith is run with the compiler sql.
func runWith(t *testing.T, pool *pgxpool.Pool, sql querysql.Compiler, q *query.Query) ([]string, int) {
	t.Helper()
	ctx := context.Background()
	scope := querysql.Fragment{SQL: layout.ColLifecycle + " = $1", Args: []any{layout.LifecycleActive}}
	stmt := sql.PageStatement(q, `"f_name"`, scope)
	rows, err := pool.Query(ctx, stmt.SQL, stmt.Args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", q.Filter(), err, stmt.SQL)
	}
	var names []string
	for rows.Next() {
		var n *string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == nil {
			names = append(names, "<null>")
		} else {
			names = append(names, *n)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q.Filter(), err)
	}
	cs := sql.CountStatement(q, scope)
	var n int
	if err := pool.QueryRow(ctx, cs.SQL, cs.Args...).Scan(&n); err != nil {
		t.Fatalf("count %s: %v\n%s", q.Filter(), err, cs.SQL)
	}
	return names, n
}

func TestFilterSemanticsOnPostgreSQL(t *testing.T) {
	pool, _ := loadSemantic(t)
	e := personEntity()
	cases := map[string][]string{
		"age eq 30":                                 {"Ann", "Annabel"},
		"age ne 30":                                 {"Bob", "O'Brien", "'; drop table x; --", "a_c", "abc"}, // ne matches null
		"age eq null":                               {"O'Brien"},
		"age ne null":                               {"Ann", "Bob", "'; drop table x; --", "Annabel", "a_c", "abc"},
		"age gt 10":                                 {"Ann", "Bob", "Annabel"},
		"not (age gt 10)":                           {"O'Brien", "'; drop table x; --", "a_c", "abc"}, // not is two-valued
		"not (age eq null)":                         {"Ann", "Bob", "'; drop table x; --", "Annabel", "a_c", "abc"},
		"age le 7 and age ge 5":                     {"'; drop table x; --", "a_c"},
		"age lt 8":                                  {"'; drop table x; --", "a_c"},
		"age in (5, 40, 99)":                        {"Bob", "'; drop table x; --"},
		"startswith(name,'Ann')":                    {"Ann", "Annabel"},
		"startswith(name,'a_')":                     {"a_c"},        // _ is no wildcard
		"contains(note,'50%')":                      {"Ann"},        // % is no wildcard
		"contains(note,'a%b')":                      {"abc"},        // nor here
		`contains(note,'\')`:                        {"O'Brien"},    // the escape character itself
		"contains(note,'score')":                    {"Bob", "a_c"}, // contains is case-sensitive, anywhere
		"startswith(name,'ann')":                    {},             // case-sensitive
		"startswith(status,'a')":                    {"Ann", "'; drop table x; --"},
		"status eq '50%'":                           {"Annabel"},
		"status in ('a_b','closed')":                {"O'Brien", "'; drop table x; --"},
		"status ne 'active'":                        {"Bob", "O'Brien", "'; drop table x; --", "Annabel", "a_c", "abc"},
		"name eq 'O''Brien'":                        {"O'Brien"},
		"name eq '''; drop table x; --'":            {"'; drop table x; --"},
		"name gt 'Z'":                               {"a_c", "abc"}, // byte order in the test cluster's C collation
		"amount eq 10.5":                            {"Ann", "Annabel"},
		"amount lt 0":                               {"'; drop table x; --"},
		"amount ge 10.50 and amount le 20":          {"Ann", "Bob", "Annabel"},
		"born lt 1990-01-02 and born ge 1980-05-05": {"Ann", "Bob"},
		"born eq 2000-02-29":                        {"'; drop table x; --"},
		"seen gt 2024-01-01T01:00:00+02:00":         {"Ann", "Bob"},
		"seen gt 2024-01-01T00:00:00Z":              {"Bob"},
		"seen le 2024-01-01T00:00:00.000001Z":       {"Ann"},
		"flag eq false":                             {"Bob"},
		"flag ne true":                              {"Bob", "O'Brien", "a_c", "abc"},
		"flag in (true)":                            {"Ann", "'; drop table x; --", "Annabel"},
		"ext eq '" + uuidA + "'":                    {"Ann"},
		"ext gt '" + uuidA + "'":                    {"Bob"},
		"where ne null":                             {"Ann"},
		"extra eq null":                             {"Ann", "Bob", "O'Brien", "'; drop table x; --", "Annabel", "a_c", "abc"},
		// Precedence: not > and > or.
		"flag eq true or age eq 40 and flag eq false":   {"Ann", "Bob", "'; drop table x; --", "Annabel"},
		"(flag eq true or age eq 40) and flag eq false": {"Bob"},
		"not flag eq true and age ne null":              {"Bob", "a_c", "abc"},
	}
	for f, want := range cases {
		q, err := query.Parse(e, fullAllowed(), opts("$filter", f, "$top", "100"))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		got, count := run(t, pool, q)
		sort.Strings(got)
		w := append([]string{}, want...)
		sort.Strings(w)
		if strings.Join(got, "|") != strings.Join(w, "|") {
			t.Errorf("%s:\n got %q\nwant %q", f, got, w)
		}
		if count != len(want) {
			t.Errorf("%s: count %d, want %d", f, count, len(want))
		}
	}
}

func TestHostileLiteralsAreArgumentsNeverSQL(t *testing.T) {
	pool, _ := loadSemantic(t)
	e := personEntity()
	hostile := []string{
		"name eq '''; drop table x; --'",
		"name eq ''') or true; --'",
		"startswith(name,'''; delete from e_person; --')",
		"contains(note,'$1'' or 1=1 --')",
		"name in ('x'') or (''1''=''1', 'a\"b', '\\'' ; select pg_sleep(1); --')",
		"status eq 'active' or note eq '); DROP SCHEMA registrum_data CASCADE; --'",
	}
	for _, f := range hostile {
		q, err := query.Parse(e, fullAllowed(), opts("$filter", f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		w := sql.Where(q, 0)
		for _, bad := range []string{"drop", "DROP", "delete", "pg_sleep", "1=1", "'x'"} {
			if strings.Contains(w.SQL, bad) {
				t.Fatalf("%s: the SQL text carries a literal: %s", f, w.SQL)
			}
		}
		run(t, pool, q)
	}
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+layout.Table(e)).Scan(&n); err != nil || n != len(semanticRows) {
		t.Fatalf("table changed: %d rows, %v", n, err)
	}
	// The hostile name is found as data.
	q, _ := query.Parse(e, fullAllowed(), opts("$filter", "name eq '''; drop table x; --'"))
	if got, _ := run(t, pool, q); len(got) != 1 || got[0] != "'; drop table x; --" {
		t.Fatalf("hostile name not found as data: %q", got)
	}
}

func TestWherePlaceholdersFollowTheOffset(t *testing.T) {
	q, err := query.Parse(personEntity(), fullAllowed(), opts("$filter", "age in (1,2) and name eq 'x' and contains(note,'y')"))
	if err != nil {
		t.Fatal(err)
	}
	w := sql.Where(q, 3)
	want := `("f_age" IN ($4::bigint, $5::bigint)) AND ("f_name" = $6::text) AND ("f_note" LIKE $7::text ESCAPE '\')`
	if w.SQL != want {
		t.Fatalf("got  %s\nwant %s", w.SQL, want)
	}
	if len(w.Args) != 4 || w.Args[0] != int64(1) || w.Args[2] != "x" || w.Args[3] != "%y%" {
		t.Fatalf("args %#v", w.Args)
	}
	none, _ := query.Parse(personEntity(), fullAllowed(), nil)
	if w := sql.Where(none, 0); w.SQL != "TRUE" || len(w.Args) != 0 {
		t.Fatalf("no filter: %+v", w)
	}
}

// TestIndexedEqualityFilterUsesTheIndex loads 20,000 rows into an entity
// with an index on the filtered and sorted field and checks the plan.
func TestIndexedEqualityFilterUsesTheIndex(t *testing.T) {
	item := itemEntity()
	pool := openDB(t, item)
	ctx := context.Background()
	table := layout.Table(item)
	if _, err := pool.Exec(ctx, "INSERT INTO "+table+` (record_id, revision, lifecycle, created_at, updated_at, package_revision, "f_kind", "f_n")
        SELECT gen_random_uuid(), 1, 'active', now(), now(), 'rev', 'k' || (i % 200), i FROM generate_series(1, 20000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+table); err != nil {
		t.Fatal(err)
	}
	a := query.Allowed{Readable: []string{"kind", "n"}, Filterable: []string{"kind", "n"}, Sortable: []string{"kind", "n"}}
	for _, order := range []string{"kind", "kind desc"} {
		q, err := query.Parse(item, a, opts("$filter", "kind eq 'k7'", "$orderby", order))
		if err != nil {
			t.Fatal(err)
		}
		stmt := sql.PageStatement(q, "record_id, \"f_n\"", querysql.Fragment{SQL: "lifecycle = $1", Args: []any{"active"}})
		plan := explain(t, pool, stmt)
		t.Logf("$orderby=%s:\n%s", order, plan)
		if !strings.Contains(plan, "Index Scan") || !strings.Contains(plan, "x_e_item__by-kind") || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Sort") {
			t.Fatalf("$orderby=%s: the plan does not walk the index:\n%s", order, plan)
		}
		// The next page, resumed after a keyset position, walks it too.
		q.Position = &query.Row{ID: "00000000-0000-4000-8000-000000000000", Values: map[string]any{"kind": "k7"}}
		plan = explain(t, pool, sql.PageStatement(q, "record_id", querysql.Fragment{}))
		if !strings.Contains(plan, "x_e_item__by-kind") || strings.Contains(plan, "Seq Scan") {
			t.Fatalf("$orderby=%s, next page: the plan does not use the index:\n%s", order, plan)
		}
	}
}

func explain(t *testing.T, pool *pgxpool.Pool, stmt querysql.Fragment) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "EXPLAIN "+stmt.SQL, stmt.Args...)
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, stmt.SQL)
	}
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

func TestReviewOutcomePseudoField(t *testing.T) {
	pool, _ := loadSemantic(t)
	e := personEntity()
	a := fullAllowed()
	// Without the pseudo field (a profile not disclosing review_state) the
	// name is refused like any unknown field.
	_, err := query.Parse(e, a, opts("$filter", "reviewOutcome eq 'approved'"))
	wantProblem(t, err, query.Invalid, "$filter", `"reviewOutcome"`, "not a filterable field")

	a.Pseudo = []query.Pseudo{{Name: query.ReviewOutcome, Values: query.ReviewOutcomeValues()}}
	withOutcome := querysql.Compiler{Pseudo: map[string]string{query.ReviewOutcome: `CASE WHEN "f_flag" THEN 'approved' ELSE 'pending' END`}}
	for f, want := range map[string][]string{
		"reviewOutcome eq 'approved'":                            {"Ann", "'; drop table x; --", "Annabel"},
		"reviewOutcome in ('pending','rejected')":                {"Bob", "O'Brien", "a_c", "abc"},
		"reviewOutcome eq 'approved' and startswith(name,'Ann')": {"Ann", "Annabel"},
	} {
		q, err := query.Parse(e, a, opts("$filter", f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		got, n := runWith(t, pool, withOutcome, q)
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, "|") != strings.Join(want, "|") || n != len(want) {
			t.Errorf("%s: got %q (%d)", f, got, n)
		}
	}
	for f, frag := range map[string]string{
		"reviewOutcome ne 'approved'":        "only with eq and in",
		"reviewOutcome gt 'approved'":        "only with eq and in",
		"startswith(reviewOutcome,'a')":      "only with eq and in",
		"reviewOutcome eq null":              "never with null",
		"reviewOutcome in ('approved',null)": "null compares only",
		"reviewOutcome eq 'maybe'":           "vocabulary",
	} {
		_, err := query.Parse(e, a, opts("$filter", f))
		wantProblem(t, err, query.Invalid, "$filter", frag)
	}
}

// TestOrderBy: the sort keys of $orderby compile to their ORDER BY, nulls
// last ascending and first descending, the record id last in the direction
// of the last key (ascending when there is none), each qualified with its
// table (a bare name would mean the select list's text casts).
func TestOrderBy(t *testing.T) {
	e := personEntity()
	q, err := query.Parse(e, fullAllowed(), opts("accessProfile", "staff"))
	if err != nil {
		t.Fatal(err)
	}
	const tbl = `"registrum_data"."e_person".`
	if sql.OrderBy(q) != tbl+"record_id ASC" {
		t.Fatalf("default order %q", sql.OrderBy(q))
	}
	q, err = query.Parse(e, fullAllowed(), opts("$select", "age, name", "$orderby", "age desc, name", "$count", "true", "$top", "100", "$filter", "age gt 3"))
	if err != nil {
		t.Fatal(err)
	}
	if got := sql.OrderBy(q); got != tbl+`"f_age" DESC NULLS FIRST, `+tbl+`"f_name" ASC NULLS LAST, `+tbl+`record_id ASC` {
		t.Fatalf("order %q", got)
	}
	q, _ = query.Parse(e, fullAllowed(), opts("$orderby", "age desc"))
	if got := sql.OrderBy(q); got != tbl+`"f_age" DESC NULLS FIRST, `+tbl+`record_id DESC` {
		t.Fatalf("the record id follows the last key's direction: %q", got)
	}
}
