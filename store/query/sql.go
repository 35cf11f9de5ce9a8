package query

import (
	"strconv"
	"strings"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/layout"
)

// Fragment is a piece of SQL with its arguments. Placeholders are numbered
// $n; no value is ever spliced into the SQL text.
type Fragment struct {
	SQL  string
	Args []any
}

// Row is a keyset position: the record id and the stored values (storage
// form, by authored field id, as the store reads them) of the last record of
// a page. Only the values of the sort keys are used; a missing value is null.
type Row struct {
	ID     string
	Values map[string]any
}

// argBuilder numbers placeholders after an offset.
type argBuilder struct {
	offset int
	args   []any
}

// add appends an argument and returns its placeholder cast to typ.
func (a *argBuilder) add(v any, typ string) string {
	var b strings.Builder
	a.write(&b, v, typ)
	return b.String()
}

// write appends an argument and writes its placeholder cast to typ.
func (a *argBuilder) write(b *strings.Builder, v any, typ string) {
	a.args = append(a.args, v)
	b.WriteByte('$')
	b.WriteString(strconv.Itoa(a.offset + len(a.args)))
	b.WriteString("::")
	b.WriteString(typ)
}

// castType is the SQL type a literal of f is cast to: the column's type
// without a numeric typmod, so a literal is never rounded before comparison.
func castType(f *model.Field) string {
	switch f.Type {
	case model.TypeString, model.TypeText, model.TypeCode:
		return "text"
	case model.TypeInteger:
		return "bigint"
	case model.TypeDecimal:
		return "numeric"
	case model.TypeBoolean:
		return "boolean"
	case model.TypeDate:
		return "date"
	case model.TypeTimestamp:
		return "timestamptz"
	case model.TypeUUID, model.TypeReference:
		return "uuid"
	}
	return "jsonb"
}

// Where returns the filter as a boolean SQL expression over the entity's
// table columns, its placeholders numbered from argOffset+1; "TRUE" when
// the query has no filter.
//
// NULL semantics: eq null and ne null test for null; ne with a value also
// matches null (the value differs from null); eq, in, the ordering
// comparisons, startswith and contains never match null. not negates with
// two-valued logic, so not (x gt 5) matches a null x.
func (q *Query) Where(argOffset int) Fragment {
	if q.filter == nil {
		return Fragment{SQL: "TRUE"}
	}
	a := &argBuilder{offset: argOffset}
	var b strings.Builder
	b.Grow(256)
	compile(&b, a, q.filter)
	return Fragment{SQL: b.String(), Args: a.args}
}

func compile(b *strings.Builder, a *argBuilder, n *node) {
	switch n.kind {
	case nAnd, nOr:
		word := " AND "
		if n.kind == nOr {
			word = " OR "
		}
		for i, k := range n.kids {
			if i > 0 {
				b.WriteString(word)
			}
			b.WriteByte('(')
			compile(b, a, k)
			b.WriteByte(')')
		}
	case nNot:
		b.WriteString("NOT COALESCE((")
		compile(b, a, n.kids[0])
		b.WriteString("), FALSE)")
	case nCompare:
		col := n.col
		v := n.vals[0]
		switch {
		case v == nil && n.op == "eq":
			b.WriteString(col + " IS NULL")
		case v == nil:
			b.WriteString(col + " IS NOT NULL")
		case n.op == "ne":
			b.WriteString(col)
			b.WriteString(" IS DISTINCT FROM ")
			a.write(b, v, castType(n.field))
		default:
			b.WriteString(col)
			b.WriteByte(' ')
			b.WriteString(compareOps[n.op])
			b.WriteByte(' ')
			a.write(b, v, castType(n.field))
		}
	case nIn:
		b.WriteString(n.col)
		b.WriteString(" IN (")
		for i, v := range n.vals {
			if i > 0 {
				b.WriteString(", ")
			}
			a.write(b, v, castType(n.field))
		}
		b.WriteByte(')')
	case nFunction:
		pattern := escapeLike(n.vals[0].(string))
		if n.op == "startswith" {
			pattern += "%"
		} else {
			pattern = "%" + pattern + "%"
		}
		b.WriteString(n.col)
		b.WriteString(" LIKE ")
		a.write(b, pattern, "text")
		b.WriteString(` ESCAPE '\'`)
	}
}

// escapeLike escapes the LIKE wildcards % and _ and the escape character \.
func escapeLike(s string) string {
	if !strings.ContainsAny(s, `%_\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r == '%' || r == '_' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// idDesc reports the direction of the record id tie-breaker: that of the
// last sort key, so an index on (key, record_id) serves either direction.
func (q *Query) idDesc() bool { return len(q.Sort) > 0 && q.Sort[len(q.Sort)-1].Desc }

// OrderBy returns the ORDER BY list (without the keywords): the sort keys,
// ascending with nulls last or descending with nulls first, then the record
// id in the direction of the last key (ascending when there is none).
func (q *Query) OrderBy() string {
	var b strings.Builder
	for _, k := range q.Sort {
		b.WriteString(layout.Column(k.Field))
		if k.Desc {
			b.WriteString(" DESC NULLS FIRST, ")
		} else {
			b.WriteString(" ASC NULLS LAST, ")
		}
	}
	b.WriteString(layout.ColRecordID)
	if q.idDesc() {
		b.WriteString(" DESC")
	} else {
		b.WriteString(" ASC")
	}
	return b.String()
}

// After returns the keyset predicate true exactly for the rows that come
// after last in the query's order, placeholders numbered from argOffset+1.
func (q *Query) After(last Row, argOffset int) Fragment {
	a := &argBuilder{offset: argOffset}
	type key struct {
		col, after, equal string
	}
	keys := make([]key, 0, len(q.Sort)+1)
	for _, k := range q.Sort {
		col := layout.Column(k.Field)
		v := last.Values[k.Field.ID]
		switch {
		case v == nil && !k.Desc: // nulls last: nothing after a null but equal nulls
			keys = append(keys, key{col: col, after: "", equal: col + " IS NULL"})
		case v == nil: // desc, nulls first: every non-null comes after
			keys = append(keys, key{col: col, after: col + " IS NOT NULL", equal: col + " IS NULL"})
		default:
			p := a.add(v, castType(k.Field))
			if k.Desc {
				keys = append(keys, key{col: col, after: col + " < " + p, equal: col + " = " + p})
			} else {
				keys = append(keys, key{col: col, after: "(" + col + " > " + p + " OR " + col + " IS NULL)", equal: col + " = " + p})
			}
		}
	}
	p := a.add(last.ID, "uuid")
	if q.idDesc() {
		keys = append(keys, key{after: layout.ColRecordID + " < " + p})
	} else {
		keys = append(keys, key{after: layout.ColRecordID + " > " + p})
	}
	var terms []string
	for i, k := range keys {
		if k.after == "" {
			continue
		}
		parts := make([]string, 0, i+1)
		for _, prev := range keys[:i] {
			parts = append(parts, prev.equal)
		}
		parts = append(parts, k.after)
		terms = append(terms, "("+strings.Join(parts, " AND ")+")")
	}
	return Fragment{SQL: "(" + strings.Join(terms, " OR ") + ")", Args: a.args}
}

// Limit is the number of rows to fetch for one page: one more than Top, so
// that the extra row tells whether a next page exists (it is not returned).
func (q *Query) Limit() int { return q.Top + 1 }

// conjoin ANDs scope (placeholders from $1) with the query's filter and,
// when the query resumes a cursor, its keyset predicate.
func (q *Query) conjoin(scope Fragment, withKeyset bool) Fragment {
	var parts []string
	args := append([]any(nil), scope.Args...)
	if scope.SQL != "" {
		parts = append(parts, "("+scope.SQL+")")
	}
	if q.filter != nil {
		w := q.Where(len(args))
		parts = append(parts, "("+w.SQL+")")
		args = append(args, w.Args...)
	}
	if withKeyset && q.Position != nil {
		k := q.After(*q.Position, len(args))
		parts = append(parts, k.SQL)
		args = append(args, k.Args...)
	}
	if len(parts) == 0 {
		return Fragment{SQL: "TRUE"}
	}
	return Fragment{SQL: strings.Join(parts, " AND "), Args: args}
}

// PageStatement returns the statement of one page: columns (the store's select
// list) from the entity's table, where scope (the caller's row boundaries
// and lifecycle rule, placeholders from $1, "" for none) and the filter and
// the keyset position hold, in the query's order, limited to Limit rows.
func (q *Query) PageStatement(columns string, scope Fragment) Fragment {
	w := q.conjoin(scope, true)
	w.SQL = "SELECT " + columns + " FROM " + layout.Table(q.Entity) + " WHERE " + w.SQL +
		" ORDER BY " + q.OrderBy() + " LIMIT " + strconv.Itoa(q.Limit())
	return w
}

// CountStatement returns the statement of the $count total: the number of
// rows where scope and the filter hold, whatever the page.
func (q *Query) CountStatement(scope Fragment) Fragment {
	w := q.conjoin(scope, false)
	w.SQL = "SELECT count(*) FROM " + layout.Table(q.Entity) + " WHERE " + w.SQL
	return w
}
