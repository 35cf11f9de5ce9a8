package query_test

import (
	"strings"
	"testing"

	"github.com/registrum/registrum/model/query"
)

func parseFilter(t *testing.T, f string) (*query.Query, error) {
	t.Helper()
	return query.Parse(personEntity(), fullAllowed(), opts("$filter", f))
}

func TestFilterGrammarAndPrecedence(t *testing.T) {
	cases := map[string]string{
		"age eq 1":                                      "age eq 1",
		"age eq 1 or age eq 2 and name eq 'x'":          "(age eq 1) or ((age eq 2) and (name eq 'x'))",
		"(age eq 1 or age eq 2) and name eq 'x'":        "((age eq 1) or (age eq 2)) and (name eq 'x')",
		"not age eq 1 and flag eq true":                 "(not (age eq 1)) and (flag eq true)",
		"not (age eq 1 and flag eq true)":               "not ((age eq 1) and (flag eq true))",
		"not not flag eq false":                         "not (not (flag eq false))",
		"a eq 1":                                        "", // refused below
		"status in ('active','paused')":                 "status in ('active','paused')",
		"status in ( 'active' )":                        "status in ('active')",
		"startswith(name,'Jo')":                         "startswith(name,'Jo')",
		"contains( note , 'it''s' )":                    "contains(note,'it''s')",
		"name eq 'O''Brien'":                            "name eq 'O''Brien'",
		"age ne null or amount eq null":                 "(age ne null) or (amount eq null)",
		"age ge -5 and age le 10 and age lt 9":          "(age ge -5) and (age le 10) and (age lt 9)",
		"age gt 1 or age gt 2 or age gt 3":              "(age gt 1) or (age gt 2) or (age gt 3)",
		"amount gt 12.5 and born lt 2024-02-29":         "(amount gt 12.5) and (born lt 2024-02-29)",
		"seen ge 2024-01-31T10:00:00.123456+02:00":      "seen ge 2024-01-31T10:00:00.123456+02:00",
		"ext eq '0a1b2c3d-0000-4000-8000-00000000000f'": "ext eq '0a1b2c3d-0000-4000-8000-00000000000f'",
		"where eq null and extra ne null":               "(where eq null) and (extra ne null)",
		"\tage\teq 1 ":                                  "age eq 1",
	}
	for in, want := range cases {
		q, err := parseFilter(t, in)
		if want == "" {
			wantProblem(t, err, query.Invalid)
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if q.Filter() != want {
			t.Errorf("%s:\n got %s\nwant %s", in, q.Filter(), want)
		}
		// The canonical form parses to itself.
		again, err := parseFilter(t, q.Filter())
		if err != nil || again.Filter() != q.Filter() {
			t.Errorf("%s: canonical form does not round-trip: %v", in, err)
		}
	}
}

func TestFilterSyntaxErrorsNameThePlace(t *testing.T) {
	cases := map[string][]string{
		"age eq":                    {"ends where"},
		"age 1":                     {"comparison operator", "byte 4"},
		"age eq 1 age eq 2":         {"byte 9"},
		"(age eq 1":                 {"closing parenthesis"},
		"age eq 1)":                 {"byte 8"},
		"name eq 'abc":              {"not closed", "byte 8"},
		"name eq \"abc\"":           {"unexpected character"},
		"age eq 1 && age eq 2":      {"unexpected character"},
		"startswith(name)":          {"comma"},
		"startswith(name, 5)":       {"single-quoted string"},
		"startswith name, 'x'":      {"opening parenthesis"},
		"status in 'active'":        {"opening parenthesis"},
		"status in ('active',)":     {"literal"},
		"status in ()":              {"literal"},
		"and eq 1":                  {"field name"},
		"name eq abc":               {"single-quoted"},
		"Age eq 1":                  {`"Age"`}, // field names are case-sensitive apiNames
		"age EQ 1":                  {"comparison operator"},
		"age eq 1 AND age eq 2":     {"byte 9"},
		"":                          {"empty"},
		"   ":                       {"ends where"},
		"name eq 'x' or":            {"ends where"},
		"not":                       {"ends where"},
		"age eq 1 or (":             {"ends where"},
		"age eq 1 or ()":            {"field name"},
		"startswith(name,'x') eq 1": {"byte 21"},
	}
	for in, frags := range cases {
		_, err := parseFilter(t, in)
		wantProblem(t, err, query.Invalid, append([]string{"$filter"}, frags...)...)
	}
}

func TestFilterLiteralsMustFitTheFieldType(t *testing.T) {
	good := []string{
		"age eq 9223372036854775807", "age eq -9223372036854775808", "age eq 0",
		"amount eq 123456.78", "amount eq -0.5", "amount eq 1",
		"born eq 2024-02-29", "seen eq 2024-01-31T10:00:00Z", "seen lt 2024-01-31T10:00:00.5-05:30",
		"flag eq true", "flag ne false", "flag in (true,false)",
		"status eq 'active'", "status in ('a_b','50%')", "status gt 'active'",
		"ext in ('0a1b2c3d-0000-4000-8000-00000000000f')",
		"name eq '" + strings.Repeat("é", 40) + "'",
		"startswith(status,'act')", "contains(note,'x')", "startswith(name,'')",
	}
	for _, f := range good {
		if _, err := parseFilter(t, f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	bad := map[string][]string{
		"age eq 9223372036854775808":           {`"age"`, "64-bit"},
		"age eq -9223372036854775809":          {"64-bit"},
		"age eq 1.5":                           {"integer"},
		"age eq 01":                            {"integer"},
		"age eq 1e3":                           {"integer"},
		"age eq '1'":                           {"written bare"},
		"age eq true":                          {"integer"},
		"amount eq 1.234":                      {"amount", "2 digits"},
		"amount eq 1234567.1":                  {"amount", "precision of 8"},
		"amount eq .5":                         {"unexpected character"},
		"amount eq 1.":                         {"amount"},
		"amount eq '1.5'":                      {"written bare"},
		"born eq 2024-02-30":                   {"born", "calendar date"},
		"born eq 2024-1-01":                    {"born"},
		"born eq '2024-01-01'":                 {"written bare"},
		"seen eq 2024-01-31T10:00:00":          {"seen", "time zone"},
		"seen eq 2024-01-31":                   {"seen"},
		"seen eq 2024-01-31T10:00:00.0000001Z": {"microseconds"},
		"flag eq 'true'":                       {"written bare"},
		"flag eq 1":                            {"true and false"},
		"flag gt false":                        {"boolean", "eq, ne and in"},
		"flag le true":                         {"boolean"},
		"status eq 'gone'":                     {"status", "vocabulary"},
		"status in ('active','gone')":          {"vocabulary"},
		"status eq active":                     {"single-quoted"},
		"ext eq '0A1B2C3D-0000-4000-8000-00000000000F'": {"ext", "lowercase"},
		"ext eq 'nope'": {"ext", "UUID"},
		"name eq 5":     {"single-quoted"},
		"name eq '" + strings.Repeat("é", 41) + "'":          {"maximum of 40 characters"},
		"name eq 'a\x00b'":                                   {"NUL"},
		"startswith(name,'" + strings.Repeat("x", 41) + "')": {"maximum of 40"},
		"where eq 'x'":                                       {"where", "eq null and ne null"},
		"extra ne 1":                                         {"extra", "eq null and ne null"},
		"where gt null":                                      {"null compares only with eq and ne"},
		"age gt null":                                        {"null compares only with eq and ne"},
		"age in (1,null)":                                    {"null compares only with eq and ne"},
		"startswith(age,'1')":                                {"startswith", "string, text and code", "integer"},
		"contains(flag,'t')":                                 {"contains", "boolean"},
		"contains(ext,'0a')":                                 {"contains", "uuid"},
		"contains(where,'1')":                                {"contains"},
		"name eq '\xff'":                                     {"UTF-8"},
	}
	for f, frags := range bad {
		_, err := parseFilter(t, f)
		wantProblem(t, err, query.Invalid, append([]string{"$filter"}, frags...)...)
	}
}

func TestFilterBoundsAtTheirEdges(t *testing.T) {
	// Length: exactly MaxFilterBytes passes, one more byte is refused.
	base := "name eq 'x'"
	pad := strings.Repeat(" ", query.MaxFilterBytes-len(base))
	if _, err := parseFilter(t, base+pad); err != nil {
		t.Fatalf("filter of %d bytes: %v", query.MaxFilterBytes, err)
	}
	_, err := parseFilter(t, base+pad+" ")
	wantProblem(t, err, query.Invalid, "$filter", "longer than 4096 bytes")

	// Nodes: comparisons and operators together.
	chain := func(n int) string { // n comparisons joined by n-1 ors: 2n-1 nodes
		parts := make([]string, n)
		for i := range parts {
			parts[i] = "age eq 1"
		}
		return strings.Join(parts, " or ")
	}
	nodes := (query.MaxFilterNodes + 1) / 2 // 2n-1 <= Max
	if _, err := parseFilter(t, chain(nodes)); err != nil {
		t.Fatalf("%d nodes: %v", 2*nodes-1, err)
	}
	_, err = parseFilter(t, chain(nodes)+" or age eq 1 or age eq 1")
	wantProblem(t, err, query.Invalid, "more than 64")
	// not counts as a node too.
	_, err = parseFilter(t, chain(nodes)+" and not flag eq true")
	wantProblem(t, err, query.Invalid, "more than 64")

	// Depth: parentheses and not.
	nest := func(n int) string { return strings.Repeat("(", n) + "age eq 1" + strings.Repeat(")", n) }
	if _, err := parseFilter(t, nest(query.MaxFilterDepth)); err != nil {
		t.Fatalf("depth %d: %v", query.MaxFilterDepth, err)
	}
	_, err = parseFilter(t, nest(query.MaxFilterDepth+1))
	wantProblem(t, err, query.Invalid, "deeper than 8")
	nots := func(n int) string { return strings.Repeat("not ", n) + "age eq 1" }
	if _, err := parseFilter(t, nots(query.MaxFilterDepth)); err != nil {
		t.Fatalf("%d nots: %v", query.MaxFilterDepth, err)
	}
	_, err = parseFilter(t, nots(query.MaxFilterDepth+1))
	wantProblem(t, err, query.Invalid, "deeper than 8")
	// A deep nesting far beyond the bound fails fast, without recursion trouble.
	_, err = parseFilter(t, strings.Repeat("(", 4000))
	wantProblem(t, err, query.Invalid, "deeper")

	// in list length.
	list := func(n int) string { return "age in (" + strings.TrimSuffix(strings.Repeat("1,", n), ",") + ")" }
	if _, err := parseFilter(t, list(query.MaxInList)); err != nil {
		t.Fatalf("in list of %d: %v", query.MaxInList, err)
	}
	_, err = parseFilter(t, list(query.MaxInList+1))
	wantProblem(t, err, query.Invalid, "more than 100 members")

	// Literal length: strings (unescaped content) and bare literals.
	str := func(n int) string { return "contains(note,'" + strings.Repeat("a", n) + "')" }
	if _, err := parseFilter(t, str(query.MaxLiteralBytes)); err != nil {
		t.Fatalf("literal of %d bytes: %v", query.MaxLiteralBytes, err)
	}
	_, err = parseFilter(t, str(query.MaxLiteralBytes+1))
	wantProblem(t, err, query.Invalid, "longer than 512 bytes")
	// '' counts as one byte of content.
	if _, err := parseFilter(t, "contains(note,'"+strings.Repeat("''", query.MaxLiteralBytes)+"')"); err != nil {
		t.Fatalf("escaped literal of %d bytes: %v", query.MaxLiteralBytes, err)
	}
	_, err = parseFilter(t, "age eq "+strings.Repeat("1", query.MaxLiteralBytes+1))
	wantProblem(t, err, query.Invalid, "longer than 512 bytes")
}
