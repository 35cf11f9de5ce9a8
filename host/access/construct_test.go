package access_test

import (
	"context"
	"strings"
	"testing"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/auth"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/model"
)

func TestNewProfilesRefusesInconsistentProfiles(t *testing.T) {
	base := compiled(t)
	ks := authtest.NewKeyServer(t, authtest.NewKey(t, "k1"))
	v, err := auth.NewVerifier(authSettings(ks.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	noPurpose := authSettings(ks.URL)
	noPurpose.AuthorityClaims.Purpose = ""
	vNoPurpose, err := auth.NewVerifier(noPurpose, nil)
	if err != nil {
		t.Fatal(err)
	}
	prof := func(p *model.Package, id string) *model.Profile { return p.ProfileByID(id) }
	cases := []struct {
		name  string
		edit  func(p *model.Package)
		v     *auth.Verifier
		nilFn bool
		want  string
	}{
		{"two defaults on one route", func(p *model.Package) { prof(p, "auditor").Default = true }, v, false,
			`profiles[2] ("auditor"): route of entity "parcel" already has default profile "clerk"`},
		{"repeated profile id", func(p *model.Package) { prof(p, "inspector").ID = "clerk" }, v, false, `profiles[3] ("clerk"): profile id is repeated`},
		{"empty profile id", func(p *model.Package) { prof(p, "inspector").ID = "" }, v, false, "profiles[3]: profile id is empty"},
		{"unknown entity", func(p *model.Package) { prof(p, "clerk").Grants[0].Entity = "ghost" }, v, false, `grants[0].entity: entity "ghost" is not declared`},
		{"entity granted twice", func(p *model.Package) {
			a := prof(p, "auditor")
			a.Grants = append(a.Grants, a.Grants[0])
		}, v, false, `grants[2].entity: entity "parcel" is already granted`},
		{"unknown operation", func(p *model.Package) { prof(p, "clerk").Grants[0].Operations[0] = "erase" }, v, false, `grants[0].operations[0]: unknown operation "erase"`},
		{"unknown readable field", func(p *model.Package) {
			g := prof(p, "clerk").Grants[0]
			g.ReadableFields = append(g.ReadableFields, "ghost")
		}, v, false, `grants[0].readableFields[5]: entity "parcel" has no field "ghost"`},
		{"unknown sortable field", func(p *model.Package) { prof(p, "clerk").Grants[0].SortableFields = []string{"ghost"} }, v, false, `grants[0].sortableFields[0]`},
		{"boundary on an unknown field", func(p *model.Package) { prof(p, "clerk").Grants[0].RowBoundaries.Rules[0].Field = "ghost" }, v, false,
			`grants[0].rowBoundaries[0].field: entity "parcel" has no field "ghost"`},
		{"boundary on a text field", func(p *model.Package) { prof(p, "clerk").Grants[0].RowBoundaries.Rules[0].Field = "note" }, v, false,
			`rowBoundaries[0].field: a text field cannot bound rows`},
		{"boundary with an unknown operator", func(p *model.Package) { prof(p, "clerk").Grants[0].RowBoundaries.Rules[0].Operator = "like" }, v, false,
			`rowBoundaries[0].operator: "like" is neither equals nor in`},
		{"boundary without a claim", func(p *model.Package) { prof(p, "clerk").Grants[0].RowBoundaries.Rules[0].Claim = "" }, v, false, `rowBoundaries[0].claim: is required`},
		{"neither unrestricted nor rules", func(p *model.Package) { prof(p, "clerk").Grants[0].RowBoundaries = model.RowBoundaries{} }, v, false,
			`grants[0].rowBoundaries: must be unrestricted or list at least one rule`},
		{"anonymous with rules", func(p *model.Package) {
			prof(p, "public").Grants[0].RowBoundaries = model.RowBoundaries{Rules: []*model.RowRule{{Field: "district", Claim: "d", Operator: "equals"}}}
		}, v, false, `profiles[0] ("public").grants[0].rowBoundaries: an anonymous profile has no token claims`},
		{"token profile without scopes", func(p *model.Package) { prof(p, "clerk").RequiredScopes = nil }, v, false,
			`profiles[1] ("clerk").requiredScopes: a profile that is not anonymous needs at least one required scope`},
		{"anonymous with scopes", func(p *model.Package) { prof(p, "public").RequiredScopes = []string{"x"} }, v, false, `an anonymous profile has no requiredScopes`},
		{"purposes without a configured purpose claim", func(p *model.Package) {}, vNoPurpose, false,
			`profiles[2] ("auditor"): requiredPurposes needs authentication.authorityClaims.purpose`},
		{"profiles with tokens but no verifier", func(p *model.Package) {}, nil, false, `profiles[1] ("clerk"): a profile that is not anonymous needs a token verifier`},
		{"profiles with tokens but no principal reference", func(p *model.Package) {}, v, true, `a profile that is not anonymous needs a token verifier and a principal reference function`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := copyPackage(t, base)
			tc.edit(p)
			ref := principalRef
			if tc.nilFn {
				ref = nil
			}
			_, err := access.NewProfiles(p, tc.v, ref)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("anonymous-only packages need no verifier", func(t *testing.T) {
		p := copyPackage(t, base)
		p.Profiles = []*model.Profile{prof(p, "public")}
		d, err := access.NewProfiles(p, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		notice := p.EntityByID("notice")
		if _, err := d.Decide(context.Background(), access.Request{Operation: model.OpGet, Entity: notice}); err != nil {
			t.Fatal(err)
		}
		// With no issuer configured a presented token cannot be verified: refused, not ignored.
		if _, err := d.Decide(context.Background(), access.Request{Operation: model.OpGet, Entity: notice, Bearer: "a.b.c"}); code(err) != problem.AuthenticationRefused {
			t.Fatalf("err = %v, want 401", err)
		}
	})
}

func TestOtherBoundariesOfAProfileAreCheckedAndResolved(t *testing.T) {
	f := newFixture(t)
	regions := model.RowBoundaries{Rules: []*model.RowRule{{Field: "region", Claim: "regions", Operator: model.BoundaryIn}}}
	p := copyPackage(t, f.pkg)
	p.ProfileByID("clerk").Grants[0].ApplyTargets = []*model.Target{{Entity: "survey", RowBoundaries: regions}}
	ks := authtest.NewKeyServer(t, f.key)
	v, err := auth.NewVerifier(authSettings(ks.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := access.NewProfiles(p, v, principalRef)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	survey := p.EntityByID("survey")
	g, err := d.Decide(ctx, access.Request{Operation: model.OpGet, Entity: p.EntityByID("parcel"),
		Bearer: f.token("scope", "parcels:write", "district", "north", "regions", []string{"r1", "r2"})})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := g.BoundariesOf(survey, g.Source.ApplyTargets[0].RowBoundaries)
	if err != nil {
		t.Fatal(err)
	}
	if !bs.Admits(map[string]any{"region": "r2"}) || bs.Admits(map[string]any{"region": "r3"}) || len(bs) != 1 {
		t.Fatalf("target boundaries = %#v", bs)
	}
	if bs, err := g.BoundariesOf(survey, model.RowBoundaries{Unrestricted: true}); err != nil || len(bs) != 0 {
		t.Fatalf("unrestricted: %v %v", bs, err)
	}
	// Without the claim the target's records are not reachable.
	g2, err := d.Decide(ctx, access.Request{Operation: model.OpGet, Entity: p.EntityByID("parcel"),
		Bearer: f.token("scope", "parcels:write", "district", "north")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g2.BoundariesOf(survey, g2.Source.ApplyTargets[0].RowBoundaries); err == nil || !strings.Contains(err.Error(), `claim "regions" missing`) {
		t.Fatalf("err = %v", err)
	}

	for _, tc := range []struct {
		name string
		edit func(p *model.Package)
		want string
	}{
		{"apply target on an unknown entity", func(p *model.Package) {
			p.ProfileByID("clerk").Grants[0].ApplyTargets = []*model.Target{{Entity: "ghost", RowBoundaries: regions}}
		}, `profiles[1] ("clerk").grants[0].applyTargets[0].entity: entity "ghost" is not declared`},
		{"apply target rule on an unknown field", func(p *model.Package) {
			p.ProfileByID("clerk").Grants[0].ApplyTargets = []*model.Target{{Entity: "parcel", RowBoundaries: regions}}
		}, `applyTargets[0].rowBoundaries[0].field: entity "parcel" has no field "region"`},
		{"request presence rule on a text field", func(p *model.Package) {
			p.ProfileByID("clerk").Grants[0].RequestPresence = []*model.RequestPresence{{RequestEntity: "parcel",
				RowBoundaries: model.RowBoundaries{Rules: []*model.RowRule{{Field: "note", Claim: "c", Operator: "equals"}}}}}
		}, `requestPresence[0].rowBoundaries[0].field: a text field cannot bound rows`},
		{"action target without boundaries", func(p *model.Package) {
			p.ProfileByID("clerk").ActionGrants = []*model.ActionGrant{{Action: "a", Operations: []string{model.OpInvoke}, Targets: []*model.Target{{Entity: "survey"}}}}
		}, `actionGrants[0].targets[0].rowBoundaries: must be unrestricted or list at least one rule`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := copyPackage(t, f.pkg)
			tc.edit(p)
			if _, err := access.NewProfiles(p, v, principalRef); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
