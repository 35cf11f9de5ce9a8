package access_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/auth"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/model"
)

// TestDecidesWithTokensOfTheRealIssuer runs the issuer's dev deployment in
// process, registers the standard client with the scopes and claims the
// fixture's profiles read, and decides with the tokens it issues.
func TestDecidesWithTokensOfTheRealIssuer(t *testing.T) {
	// The standard client's authority: a district claim for the clerk's boundary.
	is := authtest.StartIssuer(t, issuertest.DevOptions{
		Scopes: []string{"parcels:write", "parcels:read"},
		Claims: map[string]string{"purpose": "local-development", "district": "south"},
	}, nil)
	acfg := authSettings(is.JWKSURL)
	acfg.Issuer, acfg.Audience = is.Config.Issuer, "urn:registrum:dev"
	v, err := auth.NewVerifier(acfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := v.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	pkg := compiled(t)
	d, err := access.NewProfiles(pkg, v, principalRef)
	if err != nil {
		t.Fatal(err)
	}
	tok := is.Token(t, issuertest.StandardClientID)

	parcel := pkg.EntityByID("parcel")
	g, err := d.Decide(ctx, access.Request{Operation: model.OpCreate, Entity: parcel, Bearer: tok})
	if err != nil {
		t.Fatalf("clerk refused an issued token: %v", err)
	}
	if g.Profile != "clerk" || g.PrincipalReference != "ref:service:demo-standard" {
		t.Fatalf("grant = %+v", g)
	}
	if got := g.Boundaries(); !reflect.DeepEqual(got, access.Boundaries{{Field: "district", Operator: "equals", Claim: "district", Values: []any{"south"}}}) {
		t.Fatalf("boundaries = %#v", got)
	}
	if !g.Admits(map[string]any{"district": "south"}) || g.Admits(map[string]any{"district": "north"}) {
		t.Fatal("Admits does not follow the issued district claim")
	}
	// The auditor needs audit:read and an audit purpose, which the issued token lacks.
	_, err = d.Decide(ctx, access.Request{Operation: model.OpGet, Entity: parcel, Profile: "auditor", Bearer: tok})
	if code(err) != problem.ResourceNotFound {
		t.Fatalf("auditor: err = %v, want the concealed 404", err)
	}
	// The issued token altered by one byte of its signature is refused with 401.
	bad := tok[:len(tok)-2] + flip(tok[len(tok)-2])
	if _, err := d.Decide(ctx, access.Request{Operation: model.OpGet, Entity: parcel, Bearer: bad}); code(err) != problem.AuthenticationRefused {
		t.Fatalf("altered token: err = %v, want 401", err)
	}
}

func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}
