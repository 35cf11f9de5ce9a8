package access

import (
	"context"
	"errors"
	"fmt"

	"github.com/registrum/registrum/host/auth"
	"github.com/registrum/registrum/model"
)

// ActionRequest asks whether the caller may invoke an immediate action.
type ActionRequest struct {
	Action             *model.Action
	Bearer             string
	UnusableCredential bool
	// Profile is the selected access profile, "" for the action's default.
	Profile string
}

// ActionGrant is what an action decision allows: the invoke operation under
// one profile, and the row boundaries of the action's targets, by entity.
type ActionGrant struct {
	Profile            string
	PrincipalReference string
	// Targets bounds every record an effect reaches, by entity id; an
	// entity missing from it is not a target the grant allows.
	Targets map[string]Boundaries
}

// ActionDecider decides action invocations.
type ActionDecider interface {
	DecideAction(ctx context.Context, r ActionRequest) (*ActionGrant, error)
}

// DecideAction decides whether the caller may invoke the action, with the
// same token and profile checks as Decide: a profile with an action grant
// for it (the one selected, else the only or the default one), its scopes,
// purposes and principal, the invoke operation, and every target's row
// boundary claims. Refusals are the concealed 404 (401 for a rejected
// token).
func (d *Profiles) DecideAction(ctx context.Context, r ActionRequest) (*ActionGrant, error) {
	if r.Action == nil {
		return nil, concealed("no such action")
	}
	if r.Bearer == "" && r.UnusableCredential {
		return nil, refused(errors.New("access: an Authorization header without a bearer token"))
	}
	var claims *auth.Claims
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
	var chosen *profile
	var ag *model.ActionGrant
	var eligible []*profile
	for _, p := range d.byID {
		for _, g := range p.m.ActionGrants {
			if g.Action == r.Action.ID {
				if r.Profile == p.m.ID || (r.Profile == "" && p.m.Default) {
					chosen, ag = p, g
				}
				eligible = append(eligible, p)
			}
		}
	}
	if chosen == nil && r.Profile == "" && len(eligible) == 1 {
		chosen = eligible[0]
		for _, g := range chosen.m.ActionGrants {
			if g.Action == r.Action.ID {
				ag = g
			}
		}
	}
	if chosen == nil {
		return nil, concealed("no profile selected for action %s", r.Action.ID)
	}
	if !contains(ag.Operations, model.OpInvoke) {
		return nil, concealed("profile %q does not grant invoke on action %s", chosen.m.ID, r.Action.ID)
	}
	out := &ActionGrant{Profile: chosen.m.ID, Targets: map[string]Boundaries{}}
	if !chosen.m.Anonymous {
		if claims == nil {
			return nil, concealed("profile %q needs a token", chosen.m.ID)
		}
		principal := stringClaim(claims, principalClaimOf(chosen.m))
		if principal == "" {
			return nil, concealed("profile %q: principal claim missing", chosen.m.ID)
		}
		for _, s := range chosen.m.RequiredScopes {
			if !claims.HasScope(s) {
				return nil, concealed("profile %q: a required scope is missing", chosen.m.ID)
			}
		}
		if len(chosen.m.RequiredPurposes) > 0 && !contains(chosen.m.RequiredPurposes, claims.Purpose) {
			return nil, concealed("profile %q: purpose not among requiredPurposes", chosen.m.ID)
		}
		out.PrincipalReference = d.reference(principal)
	}
	for i, tg := range ag.Targets {
		e := d.pkg.EntityByID(tg.Entity)
		if e == nil {
			return nil, fmt.Errorf("access: action target %d names unknown entity %q", i, tg.Entity)
		}
		if tg.RowBoundaries.Unrestricted {
			out.Targets[e.ID] = nil
			continue
		}
		rules, err := compileRules(e, tg.RowBoundaries, chosen.m.Anonymous, "targets")
		if err != nil {
			return nil, err
		}
		bs, err := d.resolveAll(rules, claims)
		if err != nil {
			return nil, concealed("profile %q: %v", chosen.m.ID, err)
		}
		out.Targets[e.ID] = bs
	}
	return out, nil
}

// DecideAction grants every action with unrestricted targets.
func (Unrestricted) DecideAction(_ context.Context, r ActionRequest) (*ActionGrant, error) {
	if r.Action == nil {
		return nil, concealed("no such action")
	}
	return &ActionGrant{Targets: nil}, nil
}
