// Package layout derives the database layout of a compiled package: one
// current-state table per entity in schema registrum_data, with typed columns,
// and the constraints PostgreSQL enforces itself (unique among live records,
// references, temporal non-overlap, value checks), so concurrent writers on
// several hosts can never violate them.
//
// The layout is a pure function of the package model. Its schema fingerprint
// is the sha256 of the generated DDL; the compiler records it in the package
// and the store refuses to serve a package whose fingerprint differs from the
// layout the database holds.
package layout

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
)

// Version is the version of the layout rules; it is part of the DDL, so a
// change of the rules changes every fingerprint.
const Version = "registrum-layout-v1"

// Schema is the PostgreSQL schema that holds the entity tables.
const Schema = "registrum_data"

// Lifecycle values of a record.
const (
	LifecycleActive     = "active"
	LifecycleTombstoned = "tombstoned"
)

// Fixed columns of every entity table.
const (
	ColRecordID        = "record_id"
	ColRevision        = "revision"
	ColLifecycle       = "lifecycle"
	ColCreatedAt       = "created_at"
	ColUpdatedAt       = "updated_at"
	ColPackageRevision = "package_revision"
)

// maxIdentifier is PostgreSQL's identifier length limit (NAMEDATALEN-1).
const maxIdentifier = 63

// name builds a PostgreSQL identifier from a prefix and authored ids, keeping
// it readable and unique: too long a name is shortened with a digest suffix.
func name(prefix string, parts ...string) string {
	full := prefix + strings.Join(parts, "__")
	if len(full) <= maxIdentifier {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	return full[:maxIdentifier-17] + "_" + hex.EncodeToString(sum[:8])
}

// Table returns the quoted, schema-qualified table of an entity.
func Table(e *model.Entity) string {
	return pgx.Identifier{Schema, name("e_", e.ID)}.Sanitize()
}

// TableName returns the unqualified table name of an entity.
func TableName(e *model.Entity) string { return name("e_", e.ID) }

// Column returns the quoted column of a field.
func Column(f *model.Field) string { return pgx.Identifier{ColumnName(f)}.Sanitize() }

// ColumnName returns the unquoted column name of a field.
func ColumnName(f *model.Field) string { return name("f_", f.ID) }

// SQLType returns the column type of a field type.
func SQLType(f *model.Field) (string, error) {
	switch f.Type {
	case model.TypeString, model.TypeText, model.TypeCode:
		return "text", nil
	case model.TypeInteger:
		return "bigint", nil
	case model.TypeDecimal:
		if f.Precision != nil && f.Scale != nil {
			return fmt.Sprintf("numeric(%d,%d)", *f.Precision, *f.Scale), nil
		}
		return "numeric", nil
	case model.TypeBoolean:
		return "boolean", nil
	case model.TypeDate:
		return "date", nil
	case model.TypeTimestamp:
		return "timestamptz", nil
	case model.TypeUUID, model.TypeReference:
		return "uuid", nil
	case model.TypeCRS84Point, model.TypeStructured:
		return "jsonb", nil
	}
	return "", fmt.Errorf("layout: field %s has unknown type %q", f.ID, f.Type)
}

// DDL returns the statements that create the layout of p, in order.
func DDL(p *model.Package) ([]string, error) {
	stmts := []string{
		"-- " + Version,
		"CREATE EXTENSION IF NOT EXISTS btree_gist",
		"CREATE SCHEMA IF NOT EXISTS " + pgx.Identifier{Schema}.Sanitize(),
	}
	var later []string // foreign keys, after every table exists
	for _, e := range p.Entities {
		create, deferred, err := entityDDL(p, e)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, create...)
		later = append(later, deferred...)
	}
	return append(stmts, later...), nil
}

// Fingerprint returns "sha256:<hex>" of the DDL of p.
func Fingerprint(p *model.Package) (string, error) {
	stmts, err := DDL(p)
	if err != nil {
		return "", err
	}
	return canonjson.DigestBytes([]byte(strings.Join(stmts, ";\n") + ";\n")), nil
}

func entityDDL(p *model.Package, e *model.Entity) (create, deferred []string, err error) {
	o, err := entityObjects(p, e)
	if err != nil {
		return nil, nil, err
	}
	return o.create(), o.foreignKeyStatements(), nil
}

// entityObjects derives the table of e and the named objects on it.
func entityObjects(p *model.Package, e *model.Entity) (*EntityObjects, error) {
	o := &EntityObjects{Entity: e, Table: Table(e)}
	table := o.Table
	tname := TableName(e)
	fixed := []string{
		ColRecordID + " uuid PRIMARY KEY",
		ColRevision + " bigint NOT NULL CHECK (" + ColRevision + " > 0)",
		ColLifecycle + " text NOT NULL CHECK (" + ColLifecycle + " IN ('" + LifecycleActive + "', '" + LifecycleTombstoned + "'))",
		ColCreatedAt + " timestamptz NOT NULL",
		ColUpdatedAt + " timestamptz NOT NULL",
		ColPackageRevision + " text NOT NULL",
	}
	o.Fixed = fixed
	var checks []string
	for _, f := range e.Fields {
		typ, err := SQLType(f)
		if err != nil {
			return nil, err
		}
		col := Column(f)
		def := typ
		if f.Required {
			def += " NOT NULL"
		}
		o.Columns = append(o.Columns, Object{Name: col, Def: def})
		checks = append(checks, fieldChecks(f, col)...)
	}
	for i, c := range checks {
		o.Constraints = append(o.Constraints, Object{Name: pgx.Identifier{name("c_", tname, "v"+strconv.Itoa(i))}.Sanitize(), Def: "CHECK (" + c + ")"})
	}
	live := "(" + ColLifecycle + " = '" + LifecycleActive + "')"
	for _, c := range e.Constraints {
		cname := pgx.Identifier{name("k_", tname, c.ID)}.Sanitize()
		switch c.Kind {
		case model.ConstraintUnique:
			parts, err := columns(e, c.Fields)
			if err != nil {
				return nil, fmt.Errorf("layout: entity %s constraint %s: %w", e.ID, c.ID, err)
			}
			var with []string
			for _, col := range parts {
				with = append(with, col+" WITH =")
			}
			o.Constraints = append(o.Constraints, Object{Name: cname, Def: "EXCLUDE USING btree (" + strings.Join(with, ", ") + ") WHERE " + live + " DEFERRABLE INITIALLY DEFERRED"})
		case model.ConstraintTemporalNonOverlap:
			if e.Temporal == nil {
				return nil, fmt.Errorf("layout: entity %s constraint %s: temporal-non-overlap on a non-temporal entity", e.ID, c.ID)
			}
			scope, err := columns(e, c.ScopeFields)
			if err != nil {
				return nil, fmt.Errorf("layout: entity %s constraint %s: %w", e.ID, c.ID, err)
			}
			bounds, err := columns(e, []string{e.Temporal.StartField, e.Temporal.EndField})
			if err != nil {
				return nil, fmt.Errorf("layout: entity %s constraint %s: %w", e.ID, c.ID, err)
			}
			rangeFn := "tstzrange"
			if e.Temporal.Type == model.TypeDate {
				rangeFn = "daterange"
			}
			var with []string
			for _, col := range scope {
				with = append(with, col+" WITH =")
			}
			with = append(with, rangeFn+"("+bounds[0]+", "+bounds[1]+", '[)') WITH &&")
			o.Constraints = append(o.Constraints, Object{Name: cname, Def: "EXCLUDE USING gist (" + strings.Join(with, ", ") + ") WHERE " + live + " DEFERRABLE INITIALLY DEFERRED"})
		case model.ConstraintCheck:
			expr, err := checkExpr(e, c)
			if err != nil {
				return nil, fmt.Errorf("layout: entity %s constraint %s: %w", e.ID, c.ID, err)
			}
			o.Constraints = append(o.Constraints, Object{Name: cname, Def: "CHECK (" + expr + ")"})
		case model.ConstraintReference:
			// Reference fields get their foreign key below in any case.
		default:
			return nil, fmt.Errorf("layout: entity %s constraint %s: unknown kind %q", e.ID, c.ID, c.Kind)
		}
	}
	for _, f := range e.Fields {
		if f.Type != model.TypeReference {
			continue
		}
		target := p.EntityByID(f.Target)
		if target == nil {
			return nil, fmt.Errorf("layout: entity %s field %s references unknown entity %q", e.ID, f.ID, f.Target)
		}
		o.ForeignKeys = append(o.ForeignKeys, Object{Name: pgx.Identifier{name("r_", tname, f.ID)}.Sanitize(),
			Def: "FOREIGN KEY (" + Column(f) + ") REFERENCES " + Table(target) + " (" + ColRecordID + ") DEFERRABLE INITIALLY DEFERRED"})
		iname := pgx.Identifier{name("i_", tname, f.ID)}.Sanitize()
		o.Indexes = append(o.Indexes, Object{Name: iname, Def: "CREATE INDEX " + iname + " ON " + table + " (" + Column(f) + ")"})
	}
	if e.GeoJSON != nil {
		f := e.Field(e.GeoJSON.GeometryField)
		if f == nil || f.Type != model.TypeCRS84Point {
			return nil, fmt.Errorf("layout: entity %s geojson.geometryField %q is not a crs84-point field", e.ID, e.GeoJSON.GeometryField)
		}
		gname := pgx.Identifier{name("g_", tname, f.ID)}.Sanitize()
		o.Indexes = append(o.Indexes, Object{Name: gname, Def: "CREATE INDEX " + gname + " ON " + table + " USING gist (" + PointExpr(f) + ") WHERE " + live})
	}
	for _, ix := range e.Indexes {
		parts, err := columns(e, ix.Fields)
		if err != nil {
			return nil, fmt.Errorf("layout: entity %s index %s: %w", e.ID, ix.ID, err)
		}
		xname := pgx.Identifier{name("x_", tname, ix.ID)}.Sanitize()
		o.Indexes = append(o.Indexes, Object{Name: xname, Def: "CREATE INDEX " + xname + " ON " + table + " (" + strings.Join(parts, ", ") + ", " + ColRecordID + ")"})
	}
	return o, nil
}

// Object is a named object of an entity table: a column (Def its type and
// nullability), a table constraint (Def its definition), an index (Def its
// CREATE INDEX statement) or a foreign key (Def its definition).
type Object struct {
	Name, Def string
}

// EntityObjects is the layout of one entity: its table and the objects on
// it, in the order the DDL creates them.
type EntityObjects struct {
	Entity      *model.Entity
	Table       string
	Fixed       []string // the fixed columns' definitions
	Columns     []Object // field columns
	Constraints []Object
	Indexes     []Object
	ForeignKeys []Object
}

// create returns the CREATE TABLE statement and the index statements.
func (o *EntityObjects) create() []string {
	cols := append([]string(nil), o.Fixed...)
	for _, c := range o.Columns {
		cols = append(cols, c.Name+" "+c.Def)
	}
	for _, c := range o.Constraints {
		cols = append(cols, "CONSTRAINT "+c.Name+" "+c.Def)
	}
	out := []string{"CREATE TABLE " + o.Table + " (\n  " + strings.Join(cols, ",\n  ") + "\n)"}
	for _, ix := range o.Indexes {
		out = append(out, ix.Def)
	}
	return out
}

// foreignKeyStatements returns the statements that add the foreign keys.
func (o *EntityObjects) foreignKeyStatements() []string {
	out := make([]string, 0, len(o.ForeignKeys))
	for _, fk := range o.ForeignKeys {
		out = append(out, "ALTER TABLE "+o.Table+" ADD CONSTRAINT "+fk.Name+" "+fk.Def)
	}
	return out
}

// PointExpr returns the SQL expression of a crs84-point field as a
// PostgreSQL point (x = longitude, y = latitude), NULL when the field is.
// The spatial index of an entity served on the spatial adapter is a GiST
// index on exactly this expression, so bounding box reads (querysql) that
// compare it with a box use the index; no PostGIS is needed.
func PointExpr(f *model.Field) string {
	col := Column(f)
	return "point(((" + col + " -> 'coordinates') ->> 0)::float8, ((" + col + " -> 'coordinates') ->> 1)::float8)"
}

func columns(e *model.Entity, ids []string) ([]string, error) {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		f := e.Field(id)
		if f == nil {
			return nil, fmt.Errorf("unknown field %q", id)
		}
		out = append(out, Column(f))
	}
	return out, nil
}

// fieldChecks returns the value checks implied by a field's type bounds.
// Patterns and structured schemas are checked by the host, since their
// dialects differ from PostgreSQL's.
func fieldChecks(f *model.Field, col string) []string {
	var out []string
	switch f.Type {
	case model.TypeString, model.TypeText:
		if f.MinLength != nil {
			out = append(out, fmt.Sprintf("char_length(%s) >= %d", col, *f.MinLength))
		}
		if f.MaxLength != nil {
			out = append(out, fmt.Sprintf("char_length(%s) <= %d", col, *f.MaxLength))
		}
	case model.TypeInteger:
		if f.Minimum != nil {
			out = append(out, fmt.Sprintf("%s >= %d", col, *f.Minimum))
		}
		if f.Maximum != nil {
			out = append(out, fmt.Sprintf("%s <= %d", col, *f.Maximum))
		}
	case model.TypeCode:
		if len(f.Values) > 0 {
			quoted := make([]string, len(f.Values))
			for i, v := range f.Values {
				quoted[i] = quoteLiteral(v)
			}
			out = append(out, col+" IN ("+strings.Join(quoted, ", ")+")")
		}
	}
	return out
}

var checkOperators = map[string]string{
	model.CheckEq: "=", model.CheckNe: "<>", model.CheckLt: "<",
	model.CheckLe: "<=", model.CheckGt: ">", model.CheckGe: ">=",
}

func checkExpr(e *model.Entity, c *model.Constraint) (string, error) {
	f := e.Field(c.Field)
	if f == nil {
		return "", fmt.Errorf("unknown field %q", c.Field)
	}
	op, ok := checkOperators[c.Operator]
	if !ok {
		return "", fmt.Errorf("unknown operator %q", c.Operator)
	}
	col := Column(f)
	if c.OtherField != "" {
		other := e.Field(c.OtherField)
		if other == nil {
			return "", fmt.Errorf("unknown field %q", c.OtherField)
		}
		return fmt.Sprintf("%s IS NULL OR %s IS NULL OR %s %s %s", col, Column(other), col, op, Column(other)), nil
	}
	lit, err := literal(f, c.Value)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s IS NULL OR %s %s %s", col, col, op, lit), nil
}

// literal renders a constraint value as a typed SQL literal.
func literal(f *model.Field, v any) (string, error) {
	typ, err := SQLType(f)
	if err != nil {
		return "", err
	}
	switch x := v.(type) {
	case string:
		return quoteLiteral(x) + "::" + typ, nil
	case bool:
		return strconv.FormatBool(x), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64) + "::" + typ, nil
	case int:
		return strconv.Itoa(x) + "::" + typ, nil
	case int64:
		return strconv.FormatInt(x, 10) + "::" + typ, nil
	case json.Number:
		if _, err := strconv.ParseFloat(string(x), 64); err != nil {
			return "", fmt.Errorf("value %q is not a number", x)
		}
		return string(x) + "::" + typ, nil
	}
	return "", fmt.Errorf("value of type %T cannot be a check value", v)
}

// quoteLiteral quotes s as a standard SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
