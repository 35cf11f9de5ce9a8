package dev

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/registrum/registrum/issuer"
	"github.com/registrum/registrum/model"
)

// maximumClaimBytes is the issuer's bound on a direct claim value.
const maximumClaimBytes = 512

// demoClients is the authority `registrum dev` gives its demo clients: the
// standard client's direct claims (a sample value for every row-boundary
// claim of the project, and the purpose), and which client satisfies which
// profile.
type demoClients struct {
	// Claims are the standard demo client's direct claims.
	Claims map[string]string
	// PurposeClaim names the purpose claim, "" when no profile requires one.
	PurposeClaim string
	// Profiles maps a client id ("" for no token) to the profiles it satisfies.
	Profiles map[string][]string
	// Skipped names boundary claims the standard client cannot carry, with why.
	Skipped []string
}

// reservedClaims are the claims the issuer writes itself; they cannot be
// direct claims.
var reservedClaims = map[string]bool{"iss": true, "aud": true, "exp": true, "iat": true, "nbf": true, "jti": true, "client_id": true, "sub": true, "scope": true}

// evidenceClaim reports whether name is one of the dev issuer's evidence claims.
func evidenceClaim(name string) bool {
	n := issuer.DevEvidenceClaims
	return slices.Contains([]string{n.Principal, n.RequesterTags, n.EvidenceAudience, n.GrantID, n.GrantAuthority, n.Actor}, name)
}

// planDemoClients gives the standard demo client the walkthrough's claims,
// then a sample for every other row-boundary claim of every profile that is
// not anonymous (grants, request presences, apply and action targets): an
// "in" claim holds the field's samples as one space-delimited string (a code
// field's whole vocabulary), an "equals" claim one sample. Claims that are
// nested paths, reserved, or the dev issuer's evidence claims are not direct
// claims and are skipped. The purpose is the walkthrough profile's first
// required purpose, else the first one any profile requires.
func planDemoClients(p *model.Package, walk *Walkthrough) *demoClients {
	d := &demoClients{Claims: map[string]string{}, Profiles: map[string][]string{}}
	if walk != nil {
		for k, v := range walk.Claims {
			d.Claims[k] = v
		}
		d.PurposeClaim = walk.PurposeClaim
	}
	for _, pr := range p.Profiles {
		if len(pr.RequiredPurposes) > 0 && d.PurposeClaim == "" {
			d.PurposeClaim = "purpose"
			d.Claims["purpose"] = pr.RequiredPurposes[0]
		}
	}
	skipped := map[string]bool{}
	eachRule(p, func(e *model.Entity, r *model.RowRule) {
		if _, done := d.Claims[r.Claim]; done || skipped[r.Claim] {
			return
		}
		why := ""
		switch {
		case strings.Contains(r.Claim, "."):
			why = "a nested claim path"
		case reservedClaims[r.Claim]:
			why = "a claim the issuer writes itself"
		case evidenceClaim(r.Claim):
			return // the Evidence client carries it
		case r.Claim == d.PurposeClaim:
			why = "the purpose claim"
		}
		v, ok := "", false
		if why == "" {
			if v, ok = boundarySample(e.Field(r.Field), r.Operator == model.BoundaryIn); !ok {
				why = "no sample value of field " + r.Field
			}
		}
		if why != "" {
			skipped[r.Claim] = true
			d.Skipped = append(d.Skipped, fmt.Sprintf("%s (%s)", r.Claim, why))
			return
		}
		d.Claims[r.Claim] = v
	})
	sort.Strings(d.Skipped)
	d.mapProfiles(p)
	return d
}

// eachRule calls fn for every row-boundary rule of the package's profiles
// that are not anonymous, with the entity it bounds.
func eachRule(p *model.Package, fn func(*model.Entity, *model.RowRule)) {
	for _, pr := range p.Profiles {
		if !pr.Anonymous {
			profileRules(p, pr, fn)
		}
	}
}

// profileRules calls fn for every row-boundary rule of one profile: its
// grants, request presences, apply targets and action targets.
func profileRules(p *model.Package, pr *model.Profile, fn func(*model.Entity, *model.RowRule)) {
	visit := func(entity string, rb model.RowBoundaries) {
		e := p.EntityByID(entity)
		if e == nil || rb.Unrestricted {
			return
		}
		for _, r := range rb.Rules {
			if r != nil && e.Field(r.Field) != nil && r.Claim != "" {
				fn(e, r)
			}
		}
	}
	for _, g := range pr.Grants {
		visit(g.Entity, g.RowBoundaries)
		for _, rp := range g.RequestPresence {
			visit(rp.RequestEntity, rp.RowBoundaries)
		}
		for _, tg := range g.ApplyTargets {
			visit(tg.Entity, tg.RowBoundaries)
		}
	}
	for _, ag := range pr.ActionGrants {
		for _, tg := range ag.Targets {
			visit(tg.Entity, tg.RowBoundaries)
		}
	}
}

// boundarySample returns a claim value for a boundary on f: for "in", every
// code of a code field (else one sample) space-delimited, within the
// issuer's 512 bytes; for "equals", one sample.
func boundarySample(f *model.Field, in bool) (string, bool) {
	if f == nil {
		return "", false
	}
	if in && f.Type == model.TypeCode && len(f.Values) > 0 {
		s := strings.Join(f.Values, " ")
		if len(s) <= maximumClaimBytes && !slices.ContainsFunc(f.Values, func(v string) bool { return v == "" || strings.Contains(v, " ") }) {
			return s, true
		}
	}
	v, ok := sampleValue(f, 0)
	if !ok {
		return "", false
	}
	switch v.(type) {
	case string, int64:
	default:
		return "", false
	}
	s := fmt.Sprint(v)
	if s == "" || len(s) > maximumClaimBytes || (in && strings.Contains(s, " ")) {
		return "", false
	}
	return s, true
}

// mapProfiles works out which demo client satisfies which profile: the
// standard client holds every required scope, its purpose and the claims of
// planDemoClients; the Evidence client holds its requester tag (its scopes
// on the record host) and the evidence claims. A profile that neither
// satisfies is listed under no client.
func (d *demoClients) mapProfiles(p *model.Package) {
	n := issuer.DevEvidenceClaims
	evidence := map[string]bool{n.Principal: true, n.RequesterTags: true, n.EvidenceAudience: true, n.GrantID: true, n.GrantAuthority: true}
	for _, pr := range p.Profiles {
		if pr.Anonymous {
			d.Profiles[""] = append(d.Profiles[""], pr.ID)
			continue
		}
		principal := pr.PrincipalClaim
		if principal == "" {
			principal = "sub"
		}
		standard := principal == "sub" || d.Claims[principal] != ""
		if len(pr.RequiredPurposes) > 0 {
			standard = standard && slices.Contains(pr.RequiredPurposes, d.Claims[d.PurposeClaim])
		}
		ev := evidence[principal] && len(pr.RequiredPurposes) == 0 &&
			!slices.ContainsFunc(pr.RequiredScopes, func(s string) bool { return s != issuer.DevEvidenceRequesterTag })
		profileRules(p, pr, func(_ *model.Entity, r *model.RowRule) {
			standard = standard && d.Claims[r.Claim] != ""
			ev = ev && evidence[r.Claim]
		})
		switch {
		case standard:
			d.Profiles[issuer.DevStandardClientID] = append(d.Profiles[issuer.DevStandardClientID], pr.ID)
		case ev:
			d.Profiles[issuer.DevEvidenceClientID] = append(d.Profiles[issuer.DevEvidenceClientID], pr.ID)
		default:
			d.Profiles["-"] = append(d.Profiles["-"], pr.ID)
		}
	}
}

// print writes which client maps to which profile, the claims the standard
// client was given, and where adding one's own client is described.
func (d *demoClients) print(w io.Writer, setup *issuer.DevSetup) {
	fmt.Fprintln(w, "Which demo client uses which access profile (pass ?accessProfile=<id> where it is not the route's default):")
	for _, c := range setup.Clients {
		list := "none of this project's profiles"
		if ids := d.Profiles[c.ID]; len(ids) > 0 {
			list = strings.Join(ids, ", ")
		}
		fmt.Fprintf(w, "  %-14s (%s profile)  %s\n", c.ID, c.Profile, list)
	}
	if ids := d.Profiles[""]; len(ids) > 0 {
		fmt.Fprintf(w, "  %-14s                     %s\n", "no token", strings.Join(ids, ", "))
	}
	if ids := d.Profiles["-"]; len(ids) > 0 {
		fmt.Fprintf(w, "  %-14s                     %s (add a client of your own)\n", "no demo client", strings.Join(ids, ", "))
	}
	if len(d.Claims) > 0 {
		names := make([]string, 0, len(d.Claims))
		for k := range d.Claims {
			names = append(names, k)
		}
		sort.Strings(names)
		fmt.Fprintf(w, "The %s client's claims:", issuer.DevStandardClientID)
		for _, k := range names {
			fmt.Fprintf(w, " %s=%q", k, d.Claims[k])
		}
		fmt.Fprintln(w)
	}
	if len(d.Skipped) > 0 {
		fmt.Fprintf(w, "Boundary claims no demo client carries: %s\n", strings.Join(d.Skipped, ", "))
	}
	fmt.Fprintln(w, "To add a client of your own, see \"Demo clients of registrum dev\" in docs/authentication.md.")
	fmt.Fprintln(w)
}
