package querysql

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store/layout"
)

// Compiler compiles parsed queries to SQL over an entity's table. The zero
// Compiler serves reads without pseudo fields.
type Compiler struct {
	// Pseudo maps the name of each pseudo field a read allows
	// (query.Allowed.Pseudo) to the SQL expression, of type text, it
	// compares: an expression of the store's own, never caller input.
	// Compiling a filter on a pseudo field missing here panics.
	Pseudo map[string]string
}

// Fragment is a piece of SQL with its arguments. Placeholders are numbered
// $n; no value is ever spliced into the SQL text.
type Fragment struct {
	SQL  string
	Args []any
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
func (c Compiler) Where(q *query.Query, argOffset int) Fragment {
	if q.Expr == nil {
		return Fragment{SQL: "TRUE"}
	}
	a := &argBuilder{offset: argOffset}
	var b strings.Builder
	b.Grow(256)
	c.compile(&b, a, q.Expr)
	return Fragment{SQL: b.String(), Args: a.args}
}

// SQL operators of the comparison operators of $filter.
var compareOps = map[string]string{"eq": "=", "ne": "<>", "gt": ">", "ge": ">=", "lt": "<", "le": "<="}

// column returns the SQL expression a node compares: the field's column, or
// the expression of a pseudo field.
func (c Compiler) column(n *query.Node) string {
	if !n.Pseudo {
		return layout.Column(n.Field)
	}
	expr, ok := c.Pseudo[n.Field.APIName]
	if !ok {
		panic(fmt.Sprintf("querysql: no SQL expression for the pseudo field %q", n.Field.APIName))
	}
	return "(" + expr + ")"
}

func (c Compiler) compile(b *strings.Builder, a *argBuilder, n *query.Node) {
	switch n.Kind {
	case query.And, query.Or:
		word := " AND "
		if n.Kind == query.Or {
			word = " OR "
		}
		for i, k := range n.Operands {
			if i > 0 {
				b.WriteString(word)
			}
			b.WriteByte('(')
			c.compile(b, a, k)
			b.WriteByte(')')
		}
	case query.Not:
		b.WriteString("NOT COALESCE((")
		c.compile(b, a, n.Operands[0])
		b.WriteString("), FALSE)")
	case query.Compare:
		col := c.column(n)
		v := n.Values[0]
		switch {
		case v == nil && n.Op == "eq":
			b.WriteString(col + " IS NULL")
		case v == nil:
			b.WriteString(col + " IS NOT NULL")
		case n.Op == "ne":
			b.WriteString(col)
			b.WriteString(" IS DISTINCT FROM ")
			a.write(b, v, castType(n.Field))
		default:
			b.WriteString(col)
			b.WriteByte(' ')
			b.WriteString(compareOps[n.Op])
			b.WriteByte(' ')
			a.write(b, v, castType(n.Field))
		}
	case query.In:
		b.WriteString(c.column(n))
		b.WriteString(" IN (")
		for i, v := range n.Values {
			if i > 0 {
				b.WriteString(", ")
			}
			a.write(b, v, castType(n.Field))
		}
		b.WriteByte(')')
	case query.Function:
		pattern := escapeLike(n.Values[0].(string))
		if n.Op == "startswith" {
			pattern += "%"
		} else {
			pattern = "%" + pattern + "%"
		}
		b.WriteString(c.column(n))
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
func idDesc(q *query.Query) bool { return len(q.Sort) > 0 && q.Sort[len(q.Sort)-1].Desc }

// OrderBy returns the ORDER BY list (without the keywords): the sort keys,
// ascending with nulls last or descending with nulls first, then the record
// id in the direction of the last key (ascending when there is none). Each
// column is qualified with its table: a bare name in ORDER BY means the
// select list's output column of that name first, and the store's select
// list casts some columns to text under their own names (record_id::text,
// a decimal's), which would sort decimals as text ("10.25" before "9.5"),
// against the keyset predicate's numeric comparison, and keep the record
// id's index from serving the order.
func (Compiler) OrderBy(q *query.Query) string {
	table := layout.Table(q.Entity) + "."
	var b strings.Builder
	for _, k := range q.Sort {
		b.WriteString(table)
		b.WriteString(layout.Column(k.Field))
		if k.Desc {
			b.WriteString(" DESC NULLS FIRST, ")
		} else {
			b.WriteString(" ASC NULLS LAST, ")
		}
	}
	b.WriteString(table)
	b.WriteString(layout.ColRecordID)
	if idDesc(q) {
		b.WriteString(" DESC")
	} else {
		b.WriteString(" ASC")
	}
	return b.String()
}

// After returns the keyset predicate true exactly for the rows that come
// after last in the query's order, placeholders numbered from argOffset+1.
func (Compiler) After(q *query.Query, last query.Row, argOffset int) Fragment {
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
	if idDesc(q) {
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

// conjoin ANDs scope (placeholders from $1) with the query's filter and,
// when the query resumes a cursor, its keyset predicate.
func (c Compiler) conjoin(q *query.Query, scope Fragment, withKeyset bool) Fragment {
	var parts []string
	args := append([]any(nil), scope.Args...)
	if scope.SQL != "" {
		parts = append(parts, "("+scope.SQL+")")
	}
	if q.Expr != nil {
		w := c.Where(q, len(args))
		parts = append(parts, "("+w.SQL+")")
		args = append(args, w.Args...)
	}
	if q.BBox != nil {
		bb := c.BBox(q, len(args))
		parts = append(parts, bb.SQL)
		args = append(args, bb.Args...)
	}
	if withKeyset && q.Position != nil {
		k := c.After(q, *q.Position, len(args))
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
func (c Compiler) PageStatement(q *query.Query, columns string, scope Fragment) Fragment {
	w := c.conjoin(q, scope, true)
	w.SQL = "SELECT " + columns + " FROM " + layout.Table(q.Entity) + " WHERE " + w.SQL +
		" ORDER BY " + c.OrderBy(q) + " LIMIT " + strconv.Itoa(q.Limit())
	return w
}

// CountStatement returns the statement of the $count total: the number of
// rows where scope and the filter hold, whatever the page.
func (c Compiler) CountStatement(q *query.Query, scope Fragment) Fragment {
	w := c.conjoin(q, scope, false)
	w.SQL = "SELECT count(*) FROM " + layout.Table(q.Entity) + " WHERE " + w.SQL
	return w
}

// BBox returns the bounding box predicate of the query over its entity's
// geometry field, placeholders numbered from argOffset+1: the field's point
// (layout.PointExpr, the expression of the entity's GiST index) lies in
// the box, edges included. A box crossing the antimeridian is two boxes,
// west to 180 and -180 to east. A null point never matches.
func (Compiler) BBox(q *query.Query, argOffset int) Fragment {
	f := q.Entity.Field(q.Entity.GeoJSON.GeometryField)
	pt := layout.PointExpr(f)
	a := &argBuilder{offset: argOffset}
	box := func(w, s, e, n float64) string {
		return pt + " <@ box(point(" + a.add(w, "float8") + ", " + a.add(s, "float8") + "), point(" +
			a.add(e, "float8") + ", " + a.add(n, "float8") + "))"
	}
	b := q.BBox
	if !b.CrossesAntimeridian() {
		return Fragment{SQL: "(" + box(b.West, b.South, b.East, b.North) + ")", Args: a.args}
	}
	sql := "((" + box(b.West, b.South, 180, b.North) + ") OR (" + box(-180, b.South, b.East, b.North) + "))"
	return Fragment{SQL: sql, Args: a.args}
}
