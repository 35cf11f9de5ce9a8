package access

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/registrum/registrum/host/auth"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
)

// MaximumBoundaryValues bounds the members of an "in" boundary claim; a
// longer claim does not satisfy the profile.
const MaximumBoundaryValues = 256

// entityOperations are the operations an entity grant may list.
var entityOperations = map[string]bool{
	model.OpCreate: true, model.OpGet: true, model.OpList: true, model.OpPatch: true,
	model.OpTombstone: true, model.OpBatch: true, model.OpRevisions: true, model.OpSnapshot: true,
	model.OpSubmitRequest: true, model.OpReviseRequest: true, model.OpCancelRequest: true,
	model.OpApplyRequest: true,
}

// boundableTypes are the field types a row boundary may compare.
var boundableTypes = map[model.FieldType]bool{
	model.TypeString: true, model.TypeCode: true, model.TypeInteger: true, model.TypeDecimal: true,
	model.TypeDate: true, model.TypeTimestamp: true, model.TypeUUID: true, model.TypeReference: true,
}

// Profiles is the profile decider of one package. Build it with NewProfiles.
type Profiles struct {
	byID         map[string]*profile
	routes       map[string]*route // by entity id
	verifier     *auth.Verifier
	principalRef func(string) string
	codec        *values.Codec
	refs         referenceCache
	pkg          *model.Package
}

// referenceCacheEntries bounds the cache of principal references.
const referenceCacheEntries = 4096

// referenceCache remembers the keyed references of recent principals, so
// that a caller's many requests cost one keyed hash. Principals come only
// from verified tokens.
type referenceCache struct {
	mu sync.Mutex
	m  map[string]string
}

// reference returns the keyed reference of principal.
func (d *Profiles) reference(principal string) string {
	d.refs.mu.Lock()
	ref, ok := d.refs.m[principal]
	d.refs.mu.Unlock()
	if ok {
		return ref
	}
	ref = d.principalRef(principal)
	d.refs.mu.Lock()
	if d.refs.m == nil || len(d.refs.m) >= referenceCacheEntries {
		// Start afresh rather than track recency.
		d.refs.m = make(map[string]string, 64)
	}
	d.refs.m[principal] = ref
	d.refs.mu.Unlock()
	return ref
}

type route struct {
	def      *profile
	eligible []*profile
}

type profile struct {
	m      *model.Profile
	grants map[string]*grant // by entity id
}

type grant struct {
	src                                    *model.Grant
	ops                                    map[string]bool
	readable, writable, filterable, sortby FieldSet
	rules                                  []rule
}

type rule struct {
	field    *model.Field
	claim    string
	operator string
}

// NewProfiles checks the package's access profiles and returns their
// decider. v verifies bearer tokens and principalRef turns a principal into
// its keyed reference; both may be nil only when every profile is
// anonymous. The package is refused, naming the profile and member, when a
// profile id is empty or repeated, a route has more than one default
// profile, a grant names an unknown entity, operation or field, repeats an
// entity, has row boundaries that are neither unrestricted nor rules, or a
// rule compares a field that cannot bound rows, uses an unknown operator or
// names no claim; when an anonymous profile has token conditions or row
// rules, or a profile that is not anonymous requires no scope; and when a
// profile requires purposes but no purpose claim is configured. Row
// boundaries of request presences, apply targets and action targets are
// checked the same way.
func NewProfiles(pkg *model.Package, v *auth.Verifier, principalRef func(principal string) string) (*Profiles, error) {
	if pkg == nil {
		return nil, errors.New("access: no package")
	}
	codec, err := values.NewCodec(pkg)
	if err != nil {
		return nil, fmt.Errorf("access: %w", err)
	}
	d := &Profiles{byID: map[string]*profile{}, routes: map[string]*route{}, verifier: v, principalRef: principalRef, codec: codec, pkg: pkg}
	for i, mp := range pkg.Profiles {
		at := fmt.Sprintf("profiles[%d]", i)
		if mp == nil || mp.ID == "" {
			return nil, fmt.Errorf("access: %s: profile id is empty", at)
		}
		at = fmt.Sprintf("profiles[%d] (%q)", i, mp.ID)
		if d.byID[mp.ID] != nil {
			return nil, fmt.Errorf("access: %s: profile id is repeated", at)
		}
		p, err := d.compileProfile(pkg, mp, at)
		if err != nil {
			return nil, err
		}
		d.byID[mp.ID] = p
		for _, g := range mp.Grants {
			r := d.routes[g.Entity]
			if r == nil {
				r = &route{}
				d.routes[g.Entity] = r
			}
			r.eligible = append(r.eligible, p)
			if mp.Default {
				if r.def != nil {
					return nil, fmt.Errorf("access: %s: route of entity %q already has default profile %q; a route has one default profile", at, g.Entity, r.def.m.ID)
				}
				r.def = p
			}
		}
	}
	return d, nil
}

func (d *Profiles) compileProfile(pkg *model.Package, mp *model.Profile, at string) (*profile, error) {
	if mp.Anonymous {
		if len(mp.RequiredScopes) > 0 || len(mp.RequiredPurposes) > 0 || mp.PrincipalClaim != "" {
			return nil, fmt.Errorf("access: %s: an anonymous profile has no requiredScopes, requiredPurposes or principalClaim", at)
		}
	} else {
		if d.verifier == nil || d.principalRef == nil {
			return nil, fmt.Errorf("access: %s: a profile that is not anonymous needs a token verifier and a principal reference function", at)
		}
		if len(mp.RequiredScopes) == 0 {
			return nil, fmt.Errorf("access: %s.requiredScopes: a profile that is not anonymous needs at least one required scope", at)
		}
		if len(mp.RequiredPurposes) > 0 && d.verifier.PurposeClaim() == "" {
			return nil, fmt.Errorf("access: %s: requiredPurposes needs authentication.authorityClaims.purpose to be configured", at)
		}
	}
	p := &profile{m: mp, grants: map[string]*grant{}}
	for j, mg := range mp.Grants {
		gat := fmt.Sprintf("%s.grants[%d]", at, j)
		if mg == nil {
			return nil, fmt.Errorf("access: %s: empty grant", gat)
		}
		e := pkg.EntityByID(mg.Entity)
		if e == nil {
			return nil, fmt.Errorf("access: %s.entity: entity %q is not declared", gat, mg.Entity)
		}
		if p.grants[e.ID] != nil {
			return nil, fmt.Errorf("access: %s.entity: entity %q is already granted by this profile", gat, e.ID)
		}
		g, err := compileGrant(pkg, e, mg, mp.Anonymous, gat)
		if err != nil {
			return nil, err
		}
		p.grants[e.ID] = g
	}
	for j, ag := range mp.ActionGrants {
		if ag == nil {
			return nil, fmt.Errorf("access: %s.actionGrants[%d]: empty grant", at, j)
		}
		for k, tg := range ag.Targets {
			if err := checkTarget(pkg, tg, mp.Anonymous, fmt.Sprintf("%s.actionGrants[%d].targets[%d]", at, j, k)); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

func compileGrant(pkg *model.Package, e *model.Entity, mg *model.Grant, anonymous bool, at string) (*grant, error) {
	g := &grant{src: mg, ops: map[string]bool{}}
	for i, op := range mg.Operations {
		if !entityOperations[op] {
			return nil, fmt.Errorf("access: %s.operations[%d]: unknown operation %q", at, i, op)
		}
		g.ops[op] = true
	}
	var err error
	for _, fs := range []struct {
		name  string
		ids   []string
		slots bool
		out   *FieldSet
	}{
		{"readableFields", mg.ReadableFields, true, &g.readable},
		{"writableFields", mg.WritableFields, true, &g.writable},
		{"filterableFields", mg.FilterableFields, false, &g.filterable},
		{"sortableFields", mg.SortableFields, false, &g.sortby},
	} {
		if *fs.out, err = fieldSet(e, fs.ids, fs.slots, at+"."+fs.name); err != nil {
			return nil, err
		}
	}
	if g.rules, err = compileRules(e, mg.RowBoundaries, anonymous, at+".rowBoundaries"); err != nil {
		return nil, err
	}
	// The profile's other boundaries are resolved on demand (Grant.BoundariesOf);
	// they are checked here so that a request never meets a broken rule.
	for i, rp := range mg.RequestPresence {
		rat := fmt.Sprintf("%s.requestPresence[%d]", at, i)
		re := pkg.EntityByID(rp.RequestEntity)
		if re == nil {
			return nil, fmt.Errorf("access: %s.requestEntity: entity %q is not declared", rat, rp.RequestEntity)
		}
		if _, err := compileRules(re, rp.RowBoundaries, anonymous, rat+".rowBoundaries"); err != nil {
			return nil, err
		}
	}
	for i, tg := range mg.ApplyTargets {
		if err := checkTarget(pkg, tg, anonymous, fmt.Sprintf("%s.applyTargets[%d]", at, i)); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func checkTarget(pkg *model.Package, tg *model.Target, anonymous bool, at string) error {
	if tg == nil {
		return fmt.Errorf("access: %s: empty target", at)
	}
	te := pkg.EntityByID(tg.Entity)
	if te == nil {
		return fmt.Errorf("access: %s.entity: entity %q is not declared", at, tg.Entity)
	}
	_, err := compileRules(te, tg.RowBoundaries, anonymous, at+".rowBoundaries")
	return err
}

// compileRules checks row boundaries on entity e and returns their rules
// (none when unrestricted).
func compileRules(e *model.Entity, rb model.RowBoundaries, anonymous bool, at string) ([]rule, error) {
	switch {
	case rb.Unrestricted && len(rb.Rules) > 0:
		return nil, fmt.Errorf("access: %s: unrestricted and rules at once", at)
	case rb.Unrestricted:
		return nil, nil
	case len(rb.Rules) == 0:
		return nil, fmt.Errorf("access: %s: must be unrestricted or list at least one rule", at)
	case anonymous:
		return nil, fmt.Errorf("access: %s: an anonymous profile has no token claims: its row boundaries must be unrestricted", at)
	}
	rules := make([]rule, 0, len(rb.Rules))
	for i, r := range rb.Rules {
		rat := fmt.Sprintf("%s[%d]", at, i)
		if r == nil {
			return nil, fmt.Errorf("access: %s: empty rule", rat)
		}
		f := e.Field(r.Field)
		if f == nil {
			return nil, fmt.Errorf("access: %s.field: entity %q has no field %q", rat, e.ID, r.Field)
		}
		if !boundableTypes[f.Type] {
			return nil, fmt.Errorf("access: %s.field: a %s field cannot bound rows", rat, f.Type)
		}
		if r.Claim == "" {
			return nil, fmt.Errorf("access: %s.claim: is required", rat)
		}
		op := r.Operator
		if op == "" {
			op = model.BoundaryEquals
		}
		if op != model.BoundaryEquals && op != model.BoundaryIn {
			return nil, fmt.Errorf("access: %s.operator: %q is neither equals nor in", rat, r.Operator)
		}
		rules = append(rules, rule{field: f, claim: r.Claim, operator: op})
	}
	return rules, nil
}

func fieldSet(e *model.Entity, ids []string, slots bool, at string) (FieldSet, error) {
	for i, id := range ids {
		if e.Field(id) == nil && !(slots && hasSlot(e, id)) {
			return FieldSet{}, fmt.Errorf("access: %s[%d]: entity %q has no field %q", at, i, e.ID, id)
		}
	}
	return NewFieldSet(ids...), nil
}

func hasSlot(e *model.Entity, id string) bool {
	for _, s := range e.Attachments {
		if s.ID == id {
			return true
		}
	}
	return false
}

// Decide selects the request's profile, admits the caller and returns the
// grant. The order, and what each step answers:
//
//  1. A presented token is verified first, whatever the profile: a rejected
//     token is 401 authentication.refused.
//  2. Selection: accessProfile names the profile (it must grant the entity);
//     else the route's default profile; else the route's sole profile;
//     else none. No profile: concealed 404.
//  3. An anonymous profile admits without a token; a verified token
//     presented with it is not used (no principal, nothing merged).
//  4. Otherwise: no token → 404; the profile's principal claim must hold a
//     non-empty string → else 404; every required scope → else 404; the
//     purpose among requiredPurposes when set → else 404.
//  5. The operation must be granted on the entity → else 404.
//  6. Every row-boundary claim must be present and hold valid values of its
//     field → else 404.
func (d *Profiles) Decide(ctx context.Context, r Request) (*Grant, error) {
	if r.Entity == nil {
		return nil, problem.NotFound()
	}
	var claims *auth.Claims
	if r.Bearer == "" && r.UnusableCredential {
		return nil, refused(errors.New("access: an Authorization header without a bearer token"))
	}
	if r.Bearer != "" {
		if d.verifier == nil {
			return nil, refused(errors.New("access: a token was presented but no issuer is configured"))
		}
		c, err := d.verifier.Verify(ctx, r.Bearer)
		if err != nil {
			return nil, refused(err)
		}
		claims = c
	}
	p, err := d.selectProfile(r)
	if err != nil {
		return nil, err
	}
	g := p.grants[r.Entity.ID]
	if p.m.Anonymous {
		if !g.ops[r.Operation] {
			return nil, concealed("profile %q does not grant %s on %s", p.m.ID, r.Operation, r.Entity.ID)
		}
		out := g.result(p.m, "", nil)
		out.decider = d
		return out, nil
	}
	if claims == nil {
		return nil, concealed("profile %q needs a token", p.m.ID)
	}
	principal := stringClaim(claims, principalClaimOf(p.m))
	if principal == "" {
		return nil, concealed("profile %q: principal claim %q missing", p.m.ID, principalClaimOf(p.m))
	}
	for _, s := range p.m.RequiredScopes {
		if !claims.HasScope(s) {
			return nil, concealed("profile %q: a required scope is missing", p.m.ID)
		}
	}
	if len(p.m.RequiredPurposes) > 0 && !contains(p.m.RequiredPurposes, claims.Purpose) {
		return nil, concealed("profile %q: purpose not among requiredPurposes", p.m.ID)
	}
	if !g.ops[r.Operation] {
		return nil, concealed("profile %q does not grant %s on %s", p.m.ID, r.Operation, r.Entity.ID)
	}
	bounds, err := d.resolveAll(g.rules, claims)
	if err != nil {
		return nil, concealed("profile %q: %v", p.m.ID, err)
	}
	out := g.result(p.m, d.reference(principal), bounds)
	out.claims, out.decider, out.Purpose = claims, d, claims.Purpose
	return out, nil
}

func (d *Profiles) resolveAll(rules []rule, claims *auth.Claims) (Boundaries, error) {
	bounds := make(Boundaries, 0, len(rules))
	for _, ru := range rules {
		if claims == nil {
			return nil, fmt.Errorf("row boundary claim %q missing", ru.claim)
		}
		b, err := d.resolve(ru, claims)
		if err != nil {
			return nil, err
		}
		bounds = append(bounds, b)
	}
	return bounds, nil
}

func (d *Profiles) selectProfile(r Request) (*profile, error) {
	if r.Profile != "" {
		p := d.byID[r.Profile]
		if p == nil || p.grants[r.Entity.ID] == nil {
			return nil, concealed("no profile %q on %s", r.Profile, r.Entity.ID)
		}
		return p, nil
	}
	rt := d.routes[r.Entity.ID]
	switch {
	case rt == nil:
		return nil, concealed("no profile grants %s", r.Entity.ID)
	case rt.def != nil:
		return rt.def, nil
	case len(rt.eligible) == 1:
		return rt.eligible[0], nil
	}
	return nil, concealed("%s has several profiles and no default: accessProfile is required", r.Entity.ID)
}

// resolve reads a rule's claim and converts it to storage-form values of
// the rule's field.
func (d *Profiles) resolve(ru rule, claims *auth.Claims) (Boundary, error) {
	b := Boundary{Field: ru.field.ID, Operator: ru.operator, Claim: ru.claim}
	v, ok := claims.Claim(ru.claim)
	if !ok || v == nil {
		return b, fmt.Errorf("row boundary claim %q missing", ru.claim)
	}
	if ru.operator == model.BoundaryEquals {
		sv, err := d.storageValue(ru.field, v)
		if err != nil {
			return b, fmt.Errorf("row boundary claim %q: %w", ru.claim, err)
		}
		b.Values = []any{sv}
		return b, nil
	}
	var list []any
	switch x := v.(type) {
	case []any:
		list = x
	case string:
		// Registrum's issuer writes direct claims as strings only: an "in"
		// claim is then one space-delimited list (docs/decisions/row-boundary-claims.md).
		pieces, err := spaceDelimited(x)
		if err != nil {
			return b, fmt.Errorf("row boundary claim %q: %w", ru.claim, err)
		}
		list = pieces
	default:
		return b, fmt.Errorf("row boundary claim %q is neither an array nor a space-delimited string", ru.claim)
	}
	if len(list) > MaximumBoundaryValues {
		return b, fmt.Errorf("row boundary claim %q has more than %d members", ru.claim, MaximumBoundaryValues)
	}
	b.Values = make([]any, 0, len(list))
	for i, m := range list {
		sv, err := d.storageValue(ru.field, m)
		if err != nil {
			return b, fmt.Errorf("row boundary claim %q member %d: %w", ru.claim, i, err)
		}
		b.Values = append(b.Values, sv)
	}
	return b, nil
}

// spaceDelimited splits an "in" claim written as one string on U+0020
// spaces; empty pieces (leading, trailing or repeated spaces) are dropped,
// so "" and "   " are empty lists. More than MaximumBoundaryValues pieces
// is an error, found without splitting the whole string.
func spaceDelimited(s string) ([]any, error) {
	var out []any
	for piece := range strings.SplitSeq(s, " ") {
		if piece == "" {
			continue
		}
		if len(out) == MaximumBoundaryValues {
			return nil, fmt.Errorf("has more than %d members", MaximumBoundaryValues)
		}
		out = append(out, piece)
	}
	return out, nil
}

// storageValue checks a claim value as a wire value of the field (the same
// checks a written value passes) and returns its storage form.
func (d *Profiles) storageValue(f *model.Field, v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, errors.New("null")
	case []any, map[string]any:
		return nil, errors.New("not a single value")
	case json.Number:
		if f.Type == model.TypeDecimal {
			v = string(x)
		}
	case string:
		// A string claim (the only kind Registrum's issuer writes) on an
		// integer field holds the integer's canonical decimal text.
		if f.Type == model.TypeInteger {
			if !canonicalInteger(x) {
				return nil, errors.New("not a valid value of the field")
			}
			v = json.Number(x)
		}
	}
	sv, err := d.codec.Decode(f, v)
	if err != nil {
		return nil, errors.New("not a valid value of the field")
	}
	if sv == nil {
		return nil, errors.New("null")
	}
	return sv, nil
}

// canonicalInteger reports whether s is an integer in canonical decimal
// form: 0, or an optional minus sign and digits without a leading zero.
func canonicalInteger(s string) bool {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || digits[0] == '0' && (len(digits) > 1 || len(s) > len(digits)) {
		return false
	}
	s = digits
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (g *grant) result(p *model.Profile, principalRef string, bounds Boundaries) *Grant {
	return &Grant{
		Profile:            p.ID,
		Anonymous:          p.Anonymous,
		PrincipalReference: principalRef,
		Readable:           g.readable,
		Writable:           g.writable,
		Filterable:         g.filterable,
		Sortable:           g.sortby,
		AllowCount:         g.src.AllowCount,
		Source:             g.src,
		boundaries:         bounds,
	}
}

func principalClaimOf(p *model.Profile) string {
	if p.PrincipalClaim == "" {
		return "sub"
	}
	return p.PrincipalClaim
}

func stringClaim(c *auth.Claims, name string) string {
	v, _ := c.Claim(name)
	s, _ := v.(string)
	return s
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// concealed is the 404 every unsatisfied decision answers; the cause is for
// logs only and never names a token value.
func concealed(format string, args ...any) *problem.Error {
	e := problem.NotFound()
	e.Cause = fmt.Errorf("access: "+format, args...)
	return e
}

// refused is the 401 of a presented and rejected token; the detail says
// nothing of why, the cause keeps the reason category for logs.
func refused(cause error) *problem.Error {
	e := problem.New(problem.AuthenticationRefused, "The access token was refused.")
	e.Cause = cause
	return e
}
