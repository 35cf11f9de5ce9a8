package access_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/auth"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/host/model"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/issuer"
	"github.com/registrum/registrum/sdk/tokensource"
)

// TestDecidesWithTokensOfTheRealIssuer runs the issuer's dev deployment in
// process, registers the standard client with the scopes and claims the
// fixture's profiles read, and decides with the tokens it issues.
func TestDecidesWithTokensOfTheRealIssuer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	setup, err := issuer.WriteDevSetup(t.TempDir(), issuer.DevOptions{Port: ln.Addr().(*net.TCPAddr).Port,
		Scopes: []string{"parcels:write", "parcels:read"}})
	if err != nil {
		t.Fatal(err)
	}
	// The standard client's authority: a district claim for the clerk's boundary.
	reg := filepath.Join(filepath.Dir(setup.ConfigPath), "clients", issuer.DevStandardClientID+".yaml")
	raw, err := os.ReadFile(reg)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(raw), `purpose: "local-development"`, "purpose: \"local-development\"\n    district: \"south\"", 1)
	if edited == string(raw) {
		t.Fatal("dev registration changed shape: no purpose claim to extend")
	}
	if err := os.WriteFile(reg, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	icfg, err := issuer.LoadConfig(setup.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := issuer.New(icfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })

	acfg := &config.Authentication{
		Issuer: icfg.Issuer, JWKSURL: "http://" + ln.Addr().String() + "/.well-known/jwks.json", Audience: "urn:registrum:dev",
		Algorithm: "ES256", ScopeClaim: "scope", ScopeSeparator: " ",
		AuthorityClaims:  config.AuthorityClaims{Principal: "sub", Purpose: "purpose"},
		ClockSkewSeconds: intp(30), KeySetRefreshSeconds: intp(300), KeySetAllowanceSeconds: intp(3600),
	}
	v, err := auth.NewVerifier(acfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	pkg := compiled(t)
	d, err := access.NewProfiles(pkg, v, principalRef)
	if err != nil {
		t.Fatal(err)
	}

	var client issuer.DevClient
	for _, c := range setup.Clients {
		if c.ID == issuer.DevStandardClientID {
			client = c
		}
	}
	keyRaw, err := os.ReadFile(client.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	var key jose.JSONWebKey
	if err := key.UnmarshalJSON(keyRaw); err != nil {
		t.Fatal(err)
	}
	src, err := tokensource.New(tokensource.Config{TokenURL: setup.TokenURL, ClientID: client.ID, Key: &key, Audience: client.Audience})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := src.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}

	parcel := pkg.EntityByID("parcel")
	g, err := d.Decide(ctx, access.Request{Operation: model.OpCreate, Entity: parcel, Bearer: tok.AccessToken})
	if err != nil {
		t.Fatalf("clerk refused an issued token: %v", err)
	}
	if g.Profile != "clerk" || g.PrincipalReference != "ref:service:demo-standard" {
		t.Fatalf("grant = %+v", g)
	}
	if got := g.Boundaries(); !reflect.DeepEqual(got, []access.Boundary{{Field: "district", Operator: "equals", Claim: "district", Values: []any{"south"}}}) {
		t.Fatalf("boundaries = %#v", got)
	}
	if !g.Admits(map[string]any{"district": "south"}) || g.Admits(map[string]any{"district": "north"}) {
		t.Fatal("Admits does not follow the issued district claim")
	}
	// The auditor needs audit:read and an audit purpose, which the issued token lacks.
	_, err = d.Decide(ctx, access.Request{Operation: model.OpGet, Entity: parcel, Profile: "auditor", Bearer: tok.AccessToken})
	if code(err) != problem.ResourceNotFound {
		t.Fatalf("auditor: err = %v, want the concealed 404", err)
	}
	// The issued token altered by one byte of its signature is refused with 401.
	bad := tok.AccessToken[:len(tok.AccessToken)-2] + flip(tok.AccessToken[len(tok.AccessToken)-2])
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
