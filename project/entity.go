package project

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
)

// fieldRef resolves an authored field id on an entity. A name that is an
// apiName but not an id gets a message saying which id to write.
func (c *compiler) fieldRef(e *model.Entity, name, path, role string) *model.Field {
	if f := e.Field(name); f != nil {
		return f
	}
	if f := e.FieldByAPIName(name); f != nil {
		c.add(path, "field.authored-id", "%s %q is the apiName of field %q; write the authored field id %q", role, name, f.ID, f.ID)
		return nil
	}
	c.add(path, "field.unknown", "%s %q is not a field of entity %q", role, name, e.ID)
	return nil
}

// entityRules checks the parts of an entity that refer to its fields.
func (c *compiler) entityRules(e *model.Entity, es *EntitySpec, path string) {
	if es.Temporal != nil {
		tp := path + ".temporal"
		start := c.fieldRef(e, es.Temporal.StartField, tp+".startField", "startField")
		end := c.fieldRef(e, es.Temporal.EndField, tp+".endField", "endField")
		if start != nil && end != nil {
			switch {
			case start.ID == end.ID:
				c.add(tp+".endField", "temporal.fields", "startField and endField must be two different fields")
			case start.Type != model.TypeDate && start.Type != model.TypeTimestamp:
				c.add(tp+".startField", "temporal.fields", "startField %q is %s field; it must be date or timestamp", start.ID, an(start.Type))
			case end.Type != start.Type:
				c.add(tp+".endField", "temporal.fields", "endField %q is %s field; it must have the startField's type %s", end.ID, an(end.Type), start.Type)
			case !start.Required:
				c.add(tp+".startField", "temporal.fields", "startField %q must be required (only the end of an interval may be open)", start.ID)
			case end.Required:
				c.add(tp+".endField", "temporal.fields", "endField %q must be optional: a null end is an open interval", end.ID)
			default:
				e.Temporal = &model.Temporal{StartField: start.ID, EndField: end.ID, Type: start.Type}
			}
		}
	}
	if es.GeoJSON != nil {
		gp := path + ".geojson.geometryField"
		if f := c.fieldRef(e, es.GeoJSON.GeometryField, gp, "geometryField"); f != nil {
			if f.Type != model.TypeCRS84Point {
				c.add(gp, "geojson.geometry-type", "geometryField %q is %s field; it must be a crs84-point field", f.ID, an(f.Type))
			} else {
				e.GeoJSON = &model.GeoJSON{GeometryField: f.ID}
			}
		}
	}
	constraintIDs := newIDs(c, "constraint")
	referenced := map[string]bool{}
	for i, cs := range es.Constraints {
		cp := fmt.Sprintf("%s.constraints[%d]", path, i)
		con := c.constraint(e, cs, cp)
		if con == nil {
			continue
		}
		key := cp + ".id"
		if !c.doc.Has(key) {
			key = cp
		}
		constraintIDs.claim(con.ID, key)
		if con.Kind == model.ConstraintReference {
			referenced[con.Field] = true
		}
		e.Constraints = append(e.Constraints, con)
	}
	// Every reference field is enforced by a reference constraint.
	for _, f := range e.Fields {
		if f.Type == model.TypeReference && f.Target != "" && !referenced[f.ID] {
			con := &model.Constraint{ID: f.ID + "-reference", Kind: model.ConstraintReference, Field: f.ID, Target: f.Target}
			constraintIDs.claim(con.ID, path)
			e.Constraints = append(e.Constraints, con)
		}
	}
	indexIDs := newIDs(c, "index")
	for i, ix := range es.Indexes {
		ip := fmt.Sprintf("%s.indexes[%d]", path, i)
		indexIDs.claim(ix.ID, ip+".id")
		c.fieldList(e, ix.Fields, ip+".fields", "index field", false)
		e.Indexes = append(e.Indexes, &model.Index{ID: ix.ID, Fields: ix.Fields})
	}
}

// fieldList checks a list of authored field ids: each declared, none twice.
// Slot ids count as fields when slots is true.
func (c *compiler) fieldList(e *model.Entity, names []string, path, role string, slots bool) []*model.Field {
	var out []*model.Field
	seen := map[string]bool{}
	for i, n := range names {
		p := fmt.Sprintf("%s[%d]", path, i)
		if seen[n] {
			c.add(p, "field.duplicate", "%s %q is listed twice", role, n)
			continue
		}
		seen[n] = true
		if slots && e.Slot(n) != nil {
			continue
		}
		if f := c.fieldRef(e, n, p, role); f != nil {
			out = append(out, f)
		}
	}
	return out
}

func (c *compiler) constraint(e *model.Entity, cs *Constraint, cp string) *model.Constraint {
	con := &model.Constraint{ID: cs.ID, Kind: cs.Kind}
	only := func(allowed ...string) {
		present := map[string]bool{"fields": cs.Fields != nil, "field": cs.Field != "", "scopeFields": cs.ScopeFields != nil,
			"operator": cs.Operator != "", "value": cs.Value != nil, "otherField": cs.OtherField != ""}
		for _, k := range slices.Sorted(maps.Keys(present)) {
			if present[k] && !slices.Contains(allowed, k) {
				c.add(cp+"."+k, "constraint.member", "%s is not a member of a %s constraint", k, cs.Kind)
			}
		}
	}
	switch cs.Kind {
	case model.ConstraintUnique:
		only("fields")
		if len(cs.Fields) == 0 {
			c.add(cp, "constraint.fields", "a unique constraint needs fields, a nonempty list")
			return nil
		}
		for _, f := range c.fieldList(e, cs.Fields, cp+".fields", "unique field", false) {
			if f.Type == model.TypeText || f.Type == model.TypeStructured || f.Type == model.TypeCRS84Point {
				c.add(cp+".fields", "constraint.fields", "field %q of type %s cannot be part of a unique constraint", f.ID, f.Type)
			}
		}
		con.Fields = cs.Fields
		con.ID = or(con.ID, strings.Join(cs.Fields, "-")+"-unique")
	case model.ConstraintReference:
		only("field")
		f := c.fieldRef(e, cs.Field, cp+".field", "reference field")
		if f == nil {
			return nil
		}
		if f.Type != model.TypeReference {
			c.add(cp+".field", "constraint.fields", "field %q is %s field; a reference constraint needs a reference field", f.ID, an(f.Type))
			return nil
		}
		con.Field, con.Target = f.ID, f.Target
		con.ID = or(con.ID, f.ID+"-reference")
	case model.ConstraintTemporalNonOverlap:
		only("scopeFields")
		if e.Temporal == nil {
			c.add(cp, "constraint.temporal", "a temporal-non-overlap constraint needs the entity to declare temporal")
			return nil
		}
		c.fieldList(e, cs.ScopeFields, cp+".scopeFields", "scope field", false)
		con.ScopeFields = cs.ScopeFields
		con.ID = or(con.ID, "temporal-non-overlap")
	case model.ConstraintCheck:
		only("field", "operator", "value", "otherField")
		f := c.fieldRef(e, cs.Field, cp+".field", "check field")
		if cs.Operator == "" {
			c.add(cp, "constraint.check", "a check constraint needs operator (eq, ne, lt, le, gt, ge)")
		}
		if (cs.Value == nil) == (cs.OtherField == "") {
			c.add(cp, "constraint.check", "a check constraint compares with exactly one of value and otherField")
			return nil
		}
		if f == nil {
			return nil
		}
		ordered := map[model.FieldType]bool{model.TypeInteger: true, model.TypeDecimal: true, model.TypeDate: true, model.TypeTimestamp: true, model.TypeString: true}
		if !ordered[f.Type] && cs.Operator != model.CheckEq && cs.Operator != model.CheckNe {
			c.add(cp+".operator", "constraint.check", "operator %s needs an ordered field; %q is %s field", cs.Operator, f.ID, an(f.Type))
		}
		if cs.OtherField != "" {
			if o := c.fieldRef(e, cs.OtherField, cp+".otherField", "otherField"); o != nil && o.Type != f.Type {
				c.add(cp+".otherField", "constraint.check", "otherField %q is %s field; it must have the type of %q (%s)", o.ID, an(o.Type), f.ID, f.Type)
			}
		} else if w, err := CheckValue(f, cs.Value); err != nil {
			c.add(cp+".value", "constraint.check", "value does not fit field %q: %v", f.ID, err)
		} else {
			con.Value = w
		}
		con.Field, con.Operator, con.OtherField = f.ID, cs.Operator, cs.OtherField
		con.ID = or(con.ID, f.ID+"-check")
	}
	return con
}

// CheckValue checks a literal v (a decoded JSON value, numbers as
// json.Number) against field f by the host's own value rules
// (values.Literal), so a literal compiles exactly when a write of it would
// succeed. It returns the literal in the form the host answers it (a decimal
// with the field's scale, a timestamp in UTC), which is what the package
// keeps. Null is refused, and so are literals of point and structured
// fields: literals compare with concrete values.
func CheckValue(f *model.Field, v any) (any, error) {
	if v == nil {
		return nil, errors.New("want a value, not null")
	}
	if f.Type == model.TypeCRS84Point || f.Type == model.TypeStructured {
		return nil, fmt.Errorf("%s field cannot be compared with a literal", an(f.Type))
	}
	w, err := values.Literal(f, v)
	if err != nil {
		return nil, err
	}
	return w, nil
}
