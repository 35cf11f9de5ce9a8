package layout

import (
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/model"
)

// Activation plans (docs/decisions/package-activation.md): the table changes
// that move a database from the layout of one package to that of another,
// each described and classified. Additive changes (a new entity, a new
// optional field, a new or dropped index, a widened bound, a dropped
// constraint, a field made optional) keep every stored value valid;
// destructive ones (a dropped entity or field, a changed type or reference
// target, a new required field, a narrowed bound, a new or changed
// constraint) may lose values or refuse stored ones.

// Change is one described table change.
type Change struct {
	Description string
	Destructive bool
}

// Plan is what an activation applies: its changes and the statements, in
// order, that apply them in one transaction.
type Plan struct {
	Changes    []Change
	Statements []string
}

// Destructive returns the destructive changes of the plan.
func (p *Plan) Destructive() []Change {
	var out []Change
	for _, c := range p.Changes {
		if c.Destructive {
			out = append(out, c)
		}
	}
	return out
}

func (p *Plan) change(destructive bool, format string, args ...any) {
	p.Changes = append(p.Changes, Change{Description: fmt.Sprintf(format, args...), Destructive: destructive})
}

// PlanActivation derives the plan from the layout of from to that of to.
func PlanActivation(from, to *model.Package) (*Plan, error) {
	olds, err := objectsOf(from)
	if err != nil {
		return nil, fmt.Errorf("layout: the active package: %w", err)
	}
	news, err := objectsOf(to)
	if err != nil {
		return nil, err
	}
	p := &Plan{}
	var addFKs []string
	// Foreign keys go first and come back last, so that tables can change
	// in any order.
	for _, e := range from.Entities {
		o, n := olds[e.ID], news[e.ID]
		for _, fk := range o.ForeignKeys {
			if n == nil || !slices.Contains(n.ForeignKeys, fk) {
				p.Statements = append(p.Statements, "ALTER TABLE "+o.Table+" DROP CONSTRAINT "+fk.Name)
			}
		}
	}
	for _, e := range to.Entities {
		n, o := news[e.ID], olds[e.ID]
		for _, fk := range n.ForeignKeys {
			if o == nil || !slices.Contains(o.ForeignKeys, fk) {
				addFKs = append(addFKs, "ALTER TABLE "+n.Table+" ADD CONSTRAINT "+fk.Name+" "+fk.Def)
			}
		}
	}
	for _, e := range from.Entities {
		if news[e.ID] == nil {
			p.change(true, "entity %s is dropped with its records", e.ID)
			p.Statements = append(p.Statements, "DROP TABLE "+olds[e.ID].Table)
		}
	}
	for _, e := range to.Entities {
		n, o := news[e.ID], olds[e.ID]
		if o == nil {
			p.change(false, "new entity %s", e.ID)
			p.Statements = append(p.Statements, n.create()...)
			continue
		}
		if o.Table != n.Table {
			return nil, fmt.Errorf("layout: entity %s changed its table", e.ID)
		}
		planEntity(p, o, n)
	}
	p.Statements = append(p.Statements, addFKs...)
	return p, nil
}

func objectsOf(p *model.Package) (map[string]*EntityObjects, error) {
	out := make(map[string]*EntityObjects, len(p.Entities))
	for _, e := range p.Entities {
		o, err := entityObjects(p, e)
		if err != nil {
			return nil, err
		}
		out[e.ID] = o
	}
	return out, nil
}

// planEntity plans the changes of one entity kept by the activation.
func planEntity(p *Plan, o, n *EntityObjects) {
	e, old := n.Entity, o.Entity
	alter := func(clause string) { p.Statements = append(p.Statements, "ALTER TABLE "+n.Table+" "+clause) }
	// Indexes and constraints that go or change are dropped first.
	for _, ix := range o.Indexes {
		if !slices.Contains(n.Indexes, ix) {
			p.Statements = append(p.Statements, "DROP INDEX "+pgx.Identifier{Schema}.Sanitize()+"."+ix.Name)
			if !slices.ContainsFunc(n.Indexes, func(x Object) bool { return x.Name == ix.Name }) {
				p.change(false, "entity %s: index %s is dropped", e.ID, unquote(ix.Name))
			}
		}
	}
	for _, c := range o.Constraints {
		if !slices.Contains(n.Constraints, c) {
			alter("DROP CONSTRAINT " + c.Name)
		}
	}
	// Fields.
	for _, f := range old.Fields {
		if e.Field(f.ID) == nil {
			p.change(true, "entity %s: field %s is dropped with its values", e.ID, f.ID)
			alter("DROP COLUMN " + Column(f))
		}
	}
	for _, f := range e.Fields {
		col := Column(f)
		typ, _ := SQLType(f)
		was := old.Field(f.ID)
		if was == nil {
			if f.Required {
				p.change(true, "entity %s: new required field %s has no value in the records already stored", e.ID, f.ID)
				alter("ADD COLUMN " + col + " " + typ + " NOT NULL")
			} else {
				p.change(false, "entity %s: new optional field %s", e.ID, f.ID)
				alter("ADD COLUMN " + col + " " + typ)
			}
			continue
		}
		wasTyp, _ := SQLType(was)
		switch {
		case was.Type != f.Type || wasTyp != typ:
			p.change(true, "entity %s: field %s changes type from %s to %s", e.ID, f.ID, describeType(was, wasTyp), describeType(f, typ))
			if wasTyp != typ {
				alter("ALTER COLUMN " + col + " TYPE " + typ + " USING " + col + "::" + typ)
			}
		case f.Type == model.TypeReference && was.Target != f.Target:
			p.change(true, "entity %s: field %s now refers to %s instead of %s", e.ID, f.ID, f.Target, was.Target)
		}
		if f.Required && !was.Required {
			p.change(true, "entity %s: field %s becomes required", e.ID, f.ID)
			alter("ALTER COLUMN " + col + " SET NOT NULL")
		} else if !f.Required && was.Required {
			p.change(false, "entity %s: field %s becomes optional", e.ID, f.ID)
			alter("ALTER COLUMN " + col + " DROP NOT NULL")
		}
		if was.Type == f.Type {
			switch boundsChange(was, f) {
			case narrowed:
				p.change(true, "entity %s: the bounds of field %s are narrowed", e.ID, f.ID)
			case widened:
				p.change(false, "entity %s: the bounds of field %s are widened", e.ID, f.ID)
			}
		}
	}
	// Entity constraints (unique, temporal, check), named after their id.
	for _, c := range n.Constraints {
		if slices.Contains(o.Constraints, c) {
			continue
		}
		alter("ADD CONSTRAINT " + c.Name + " " + c.Def)
		if isFieldCheck(n, c) {
			continue // described with its field
		}
		if slices.ContainsFunc(o.Constraints, func(x Object) bool { return x.Name == c.Name }) {
			p.change(true, "entity %s: constraint %s changes", e.ID, unquote(c.Name))
		} else {
			p.change(true, "entity %s: new constraint %s applies to the records already stored", e.ID, unquote(c.Name))
		}
	}
	for _, c := range o.Constraints {
		if !isFieldCheck(o, c) && !slices.ContainsFunc(n.Constraints, func(x Object) bool { return x.Name == c.Name }) {
			p.change(false, "entity %s: constraint %s is dropped", e.ID, unquote(c.Name))
		}
	}
	for _, ix := range n.Indexes {
		if !slices.Contains(o.Indexes, ix) {
			p.Statements = append(p.Statements, ix.Def)
			if !slices.ContainsFunc(o.Indexes, func(x Object) bool { return x.Name == ix.Name }) {
				p.change(false, "entity %s: new index %s", e.ID, unquote(ix.Name))
			} else {
				p.change(false, "entity %s: index %s is rebuilt", e.ID, unquote(ix.Name))
			}
		}
	}
}

// isFieldCheck reports whether c is one of the value checks derived from
// field bounds (named c_<table>__v<i>).
func isFieldCheck(o *EntityObjects, c Object) bool {
	return strings.HasPrefix(unquote(c.Name), name("c_", TableName(o.Entity), "v"))
}

func unquote(s string) string { return strings.Trim(s, `"`) }

func describeType(f *model.Field, sql string) string {
	if string(f.Type) == sql {
		return sql
	}
	return fmt.Sprintf("%s (%s)", f.Type, sql)
}

type bounds int

const (
	same bounds = iota
	widened
	narrowed
)

// boundsChange compares the value bounds of one field in two packages.
func boundsChange(was, f *model.Field) bounds {
	wide, narrow := false, false
	lower := func(a, b *int64) { // a lower bound: absent or smaller is wider
		switch {
		case a == nil && b == nil:
		case b == nil || (a != nil && *b < *a):
			wide = true
		case a == nil || *b > *a:
			narrow = true
		}
	}
	upper := func(a, b *int64) {
		switch {
		case a == nil && b == nil:
		case b == nil || (a != nil && *b > *a):
			wide = true
		case a == nil || *b < *a:
			narrow = true
		}
	}
	i64 := func(p *int) *int64 {
		if p == nil {
			return nil
		}
		v := int64(*p)
		return &v
	}
	lower(i64(was.MinLength), i64(f.MinLength))
	upper(i64(was.MaxLength), i64(f.MaxLength))
	lower(was.Minimum, f.Minimum)
	upper(was.Maximum, f.Maximum)
	if was.Pattern != f.Pattern {
		if f.Pattern == "" {
			wide = true
		} else {
			narrow = true
		}
	}
	if !slices.Equal(was.Values, f.Values) {
		for _, v := range was.Values {
			if !slices.Contains(f.Values, v) {
				narrow = true
			}
		}
		if len(f.Values) > 0 && len(was.Values) == 0 {
			narrow = true
		}
		if !narrow {
			wide = true
		}
	}
	switch {
	case narrow:
		return narrowed
	case wide:
		return widened
	}
	return same
}
