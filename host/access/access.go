// Package access decides, in one place, whether a caller may perform an
// operation on an entity and which fields and records it may then read and
// write. Every read and write of the record host asks a Decider before
// touching the store.
//
// Packages with access profiles are decided by NewProfiles: it selects one
// profile per request, admits the caller against it (verifying the bearer
// token with host/auth), and returns a Grant carrying the profile's field
// sets and the row boundaries resolved from the token's claims. Refusals are
// *problem.Error values: the concealed problem.NotFound for anything the
// caller may not see, authentication.refused for a presented and rejected
// token.
package access

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/registrum/registrum/host/auth"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
)

// Request is what a decision is asked about.
type Request struct {
	// Operation is a model operation (model.OpCreate, model.OpGet, …).
	Operation string
	Entity    *model.Entity
	// Bearer is the presented access token, "" when none was presented.
	Bearer string
	// UnusableCredential is true when an Authorization header was sent
	// that carries no bearer token (another scheme, or an empty token; see
	// auth.BearerToken). It is refused like a rejected token: 401.
	UnusableCredential bool
	// Profile is the access profile the caller selected (accessProfile), ""
	// for the route's default.
	Profile string
}

// Grant is what a decision allows. Field sets hold authored field ids.
type Grant struct {
	// Profile is the access profile that granted the operation.
	Profile string
	// Anonymous is true when the profile admits callers without a token.
	Anonymous bool
	// PrincipalReference is the keyed reference of the caller, "" for anonymous.
	PrincipalReference string
	// Purpose is the token's purpose claim, "" when anonymous or absent.
	Purpose string
	// Readable and Writable hold the fields the caller may read and write.
	Readable FieldSet
	Writable FieldSet
	// Filterable and Sortable hold the fields $filter and $orderby may name.
	Filterable FieldSet
	Sortable   FieldSet
	// AllowCount allows $count.
	AllowCount bool
	// Source is the profile's authored grant on the entity (request
	// visibility, provenance fields, apply targets and the like), nil for
	// Unrestricted.
	Source *model.Grant

	boundaries Boundaries
	claims     *auth.Claims // nil when anonymous
	decider    *Profiles    // nil for Unrestricted
}

// Boundary is one resolved row boundary: a record is inside it when its
// Field holds one of Values. Values are storage forms (see model/values):
// string, int64 or time.Time; an "equals" boundary has exactly one value,
// an "in" boundary the members of its claim (possibly none: then no record
// is inside).
type Boundary struct {
	// Field is the authored field id.
	Field string
	// Operator is model.BoundaryEquals or model.BoundaryIn.
	Operator string
	// Claim names the token claim the values came from.
	Claim string
	// Values are the allowed storage-form values.
	Values []any
}

// Boundaries are row boundaries that must all hold; none means unrestricted.
type Boundaries []Boundary

// Admits reports whether a record with the given storage-form values (keyed
// by authored field id) lies inside every boundary. A field that is absent
// or null is outside any boundary on it.
func (bs Boundaries) Admits(values map[string]any) bool {
	for _, b := range bs {
		v, ok := values[b.Field]
		if !ok || v == nil || !b.holds(v) {
			return false
		}
	}
	return true
}

func (bs Boundaries) clone() Boundaries {
	out := make(Boundaries, len(bs))
	for i, b := range bs {
		b.Values = append([]any(nil), b.Values...)
		out[i] = b
	}
	return out
}

// Document returns the boundaries as canonical JSON (RFC 8785): an array
// of {field, operator, values} in declaration order, each value a string
// (integers in decimal, timestamps in RFC 3339 UTC), so 64-bit integers stay
// exact. Cursors and snapshots bind it (keyed by their own secret) so that a
// continuation under other boundaries is refused.
func (bs Boundaries) Document() ([]byte, error) {
	type doc struct {
		Field    string   `json:"field"`
		Operator string   `json:"operator"`
		Values   []string `json:"values"`
	}
	out := make([]doc, 0, len(bs))
	for _, b := range bs {
		d := doc{Field: b.Field, Operator: b.Operator, Values: make([]string, len(b.Values))}
		for i, v := range b.Values {
			switch x := v.(type) {
			case string:
				d.Values[i] = x
			case int64:
				d.Values[i] = strconv.FormatInt(x, 10)
			case time.Time:
				d.Values[i] = x.UTC().Format(time.RFC3339Nano)
			case bool:
				d.Values[i] = strconv.FormatBool(x)
			default:
				return nil, fmt.Errorf("access: boundary on %s holds a %T, not a storage form", b.Field, v)
			}
		}
		out = append(out, d)
	}
	raw, err := canonjson.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("access: encode boundaries: %w", err)
	}
	return raw, nil
}

// Boundaries returns the row boundaries of the granted entity that must all
// hold for a record to be visible and writable; none when the grant is
// unrestricted. The store and query layers add them to every read (lists,
// counts, cursors, single reads) and check them on every write.
func (g *Grant) Boundaries() Boundaries { return g.boundaries.clone() }

// Admits reports whether a record of the granted entity with the given
// storage-form values lies inside every row boundary of the grant.
func (g *Grant) Admits(values map[string]any) bool { return g.boundaries.Admits(values) }

// BoundariesOf resolves other row boundaries of the same profile — a
// request presence, an apply target or an action target of the package,
// which NewProfiles has checked — on entity e against the caller's token.
// An error means a claim is missing or invalid: the records they bound are
// not visible to this caller (the concealed 404); the error is for logs.
func (g *Grant) BoundariesOf(e *model.Entity, rb model.RowBoundaries) (Boundaries, error) {
	if rb.Unrestricted {
		return nil, nil
	}
	if g.decider == nil {
		return nil, errors.New("access: row boundaries cannot be resolved without a profile decider")
	}
	rules, err := compileRules(e, rb, false, "rowBoundaries")
	if err != nil {
		return nil, err
	}
	bs, err := g.decider.resolveAll(rules, g.claims)
	if err != nil {
		return nil, fmt.Errorf("access: %w", err)
	}
	return bs, nil
}

func (b *Boundary) holds(v any) bool {
	for _, allowed := range b.Values {
		if sameValue(v, allowed) {
			return true
		}
	}
	return false
}

// sameValue compares two storage-form values.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return false
}

// Decider makes access decisions. A refusal is returned as an error the edge
// renders: the concealed not-found for anything the caller may not see,
// authentication.refused for a presented and rejected token.
type Decider interface {
	Decide(ctx context.Context, r Request) (*Grant, error)
}

// Unrestricted grants every operation and every field to every caller, with
// no row boundaries. It is the decider of deployments without access
// profiles (development packages); packages with profiles are decided by
// NewProfiles.
type Unrestricted struct{}

// Decide grants everything: every field readable and writable, every field
// of a filterable type filterable and of a sortable type sortable, and $count.
func (Unrestricted) Decide(_ context.Context, r Request) (*Grant, error) {
	var all, filterable, sortable []string
	for _, f := range r.Entity.Fields {
		all = append(all, f.ID)
		switch f.Type {
		case model.TypeText, model.TypeStructured, model.TypeCRS84Point:
		case model.TypeBoolean:
			filterable = append(filterable, f.ID)
		default:
			filterable = append(filterable, f.ID)
			sortable = append(sortable, f.ID)
		}
	}
	every := NewFieldSet(all...)
	return &Grant{Profile: r.Profile, Readable: every, Writable: every,
		Filterable: NewFieldSet(filterable...), Sortable: NewFieldSet(sortable...), AllowCount: true}, nil
}
