package dev

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/auth"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/issuer"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/project"
	"github.com/registrum/registrum/store/layout"
)

// TestDemoClientsUseEveryProfileOfTheExample runs the dev issuer with the
// claims planDemoClients gives the example, reads its tokens through the
// authentication section dev writes for the record host, and decides with
// the example's profiles: the standard client passes the caseworker's "in"
// boundary on health_districts (a space-delimited claim), and the Evidence
// client's token is read under the issuer's evidence claim names.
func TestDemoClientsUseEveryProfileOfTheExample(t *testing.T) {
	res, err := project.Compile("../../../../examples/childsupport", project.Options{Fingerprint: layout.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	pkg := res.Package
	demo := planDemoClients(pkg, planWalkthrough(pkg))
	eachRule(pkg, func(_ *model.Entity, r *model.RowRule) {
		if demo.Claims[r.Claim] == "" {
			t.Errorf("boundary claim %q has no sample", r.Claim)
		}
	})
	want := map[string][]string{"": {"public-read"}, issuer.DevStandardClientID: {"applicant", "caseworker"}}
	if !reflect.DeepEqual(demo.Profiles, want) || len(demo.Skipped) != 0 {
		t.Fatalf("profiles %v skipped %v, want %v", demo.Profiles, demo.Skipped, want)
	}

	is := issuertest.Start(t, issuertest.Options{Dev: issuer.DevOptions{Scopes: requiredScopes(pkg), Claims: demo.Claims}})
	cfg := hostAuthentication(t, authBlock(is.Config, strings.TrimPrefix(is.BaseURL, "http://"), demo.PurposeClaim))
	if ac := cfg.AuthorityClaims; ac.RequesterTags != issuer.DevEvidenceClaims.RequesterTags || ac.GrantID != issuer.DevEvidenceClaims.GrantID || ac.Actor != issuer.DevEvidenceClaims.Actor {
		t.Fatalf("authority claims %+v are not the issuer's", ac)
	}
	v, err := auth.NewVerifier(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := access.NewProfiles(pkg, v, func(p string) string { return "ref:" + p })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g, err := d.Decide(ctx, access.Request{Operation: model.OpList, Entity: pkg.EntityByID("case"), Profile: "caseworker", Bearer: is.Token(t, issuertest.StandardClientID)})
	if err != nil {
		t.Fatalf("caseworker refused the standard demo client: %v", err)
	}
	if b := g.Boundaries(); len(b) != 1 || !reflect.DeepEqual(b[0].Values, []any{"north", "south", "east", "west"}) {
		t.Fatalf("boundaries %#v", b)
	}
	c, err := v.Verify(ctx, is.Token(t, issuertest.EvidenceClientID))
	if err != nil || c.Evidence == nil || c.Evidence.GrantID != issuer.DevEvidenceGrantID || !c.HasScope(issuer.DevEvidenceRequesterTag) {
		t.Fatalf("evidence token: %v %+v", err, c)
	}

	var out bytes.Buffer
	demo.print(&out, is.Setup)
	for _, s := range []string{"demo-standard  (standard profile)  applicant, caseworker", "demo-evidence  (evidence profile)  none", "no token", "public-read", `health_districts="north south east west"`, "docs/authentication.md"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the printed map lacks %q:\n%s", s, out.String())
		}
	}
}

// TestDemoClaimsForOtherBoundaries covers claims the standard client cannot
// carry (nested paths, the issuer's evidence claims) and an Evidence-only
// profile.
func TestDemoClaimsForOtherBoundaries(t *testing.T) {
	pkg := &model.Package{
		Entities: []*model.Entity{{ID: "office", Fields: []*model.Field{
			{ID: "org", APIName: "org", Type: model.TypeInteger},
			{ID: "district", APIName: "district", Type: model.TypeCode, Values: []string{"n", "s"}},
			{ID: "requester", APIName: "requester", Type: model.TypeString},
		}}},
		Profiles: []*model.Profile{
			{ID: "orgs", RequiredScopes: []string{"x"}, Grants: []*model.Grant{{Entity: "office", RowBoundaries: model.RowBoundaries{Rules: []*model.RowRule{
				{Field: "org", Claim: "orgs", Operator: model.BoundaryIn}, {Field: "district", Claim: "subject.district"}}}}}},
			{ID: "evidence", PrincipalClaim: "grant_id", RequiredScopes: []string{"dev"}, Grants: []*model.Grant{{Entity: "office", RowBoundaries: model.RowBoundaries{Rules: []*model.RowRule{
				{Field: "requester", Claim: "requester_tags", Operator: model.BoundaryIn}}}}}},
		},
	}
	demo := planDemoClients(pkg, nil)
	if !reflect.DeepEqual(demo.Claims, map[string]string{"orgs": "1"}) {
		t.Fatalf("claims %v", demo.Claims)
	}
	if !reflect.DeepEqual(demo.Skipped, []string{"subject.district (a nested claim path)"}) {
		t.Fatalf("skipped %v", demo.Skipped)
	}
	want := map[string][]string{"-": {"orgs"}, issuer.DevEvidenceClientID: {"evidence"}}
	if !reflect.DeepEqual(demo.Profiles, want) {
		t.Fatalf("profiles %v, want %v", demo.Profiles, want)
	}
}

// hostAuthentication loads the record host's configuration with the given
// authentication section, as dev writes it, and returns that section.
func hostAuthentication(t *testing.T, section string) *config.Authentication {
	t.Helper()
	p := filepath.Join(t.TempDir(), "registrum.yaml")
	doc := "version: 1\nlistener: {address: 127.0.0.1, port: 0}\ndatabase: {url: \"host=/tmp dbname=x\"}\npackage: package\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n" + section
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p)
	if err != nil {
		t.Fatalf("the authentication section dev writes does not load: %v\n%s", err, section)
	}
	return c.Authentication
}
