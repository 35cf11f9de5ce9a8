package access_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/auth"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/model"
)

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestDecideSelectsAdmitsAndConceals(t *testing.T) {
	f := newFixture(t)
	clerk := []any{"scope", "parcels:write", "district", "north"}
	auditor := []any{"scope", "parcels:read audit:read", "purpose", "audit", "districts", []string{"north", "east"}, "org", 7}
	tok := func(base []any, kv ...any) string { return f.token(append(append([]any{}, base...), kv...)...) }
	cases := []struct {
		name    string
		entity  string
		op      string
		profile string
		bearer  string
		want    problem.Code // "" grants
		grantBy string
		ref     string
	}{
		// Selection.
		{"default profile of the route", "parcel", model.OpGet, "", tok(clerk), "", "clerk", "ref:service:c1"},
		{"accessProfile selects another", "parcel", model.OpGet, "auditor", tok(auditor), "", "auditor", "ref:c1"},
		{"unknown profile name", "parcel", model.OpGet, "nobody", tok(clerk), problem.ResourceNotFound, "", ""},
		{"profile that does not grant the route", "parcel", model.OpGet, "inspector", tok(clerk, "scope", "surveys:read"), problem.ResourceNotFound, "", ""},
		{"sole profile of a route is selected", "notice", model.OpList, "", "", "", "public", ""},
		{"several profiles and no default", "survey", model.OpGet, "", tok(nil, "scope", "surveys:read"), problem.ResourceNotFound, "", ""},
		{"several profiles, one named", "survey", model.OpGet, "inspector", tok(nil, "scope", "surveys:read"), "", "inspector", "ref:service:c1"},
		// Anonymous profiles.
		{"anonymous without a token", "parcel", model.OpList, "public", "", "", "public", ""},
		{"anonymous with a valid token stays anonymous", "parcel", model.OpGet, "public", tok(clerk), "", "public", ""},
		{"anonymous with a rejected token", "parcel", model.OpGet, "public", tok(clerk, "aud", "urn:other"), problem.AuthenticationRefused, "", ""},
		{"anonymous operation not granted", "parcel", model.OpCreate, "public", "", problem.ResourceNotFound, "", ""},
		// Tokens.
		{"missing token", "parcel", model.OpGet, "", "", problem.ResourceNotFound, "", ""},
		{"rejected token: expired", "parcel", model.OpGet, "", tok(clerk, "iat", time.Now().Add(-10*time.Minute).Unix(), "exp", time.Now().Add(-time.Minute).Unix()), problem.AuthenticationRefused, "", ""},
		{"rejected token: garbage", "parcel", model.OpGet, "", "garbage", problem.AuthenticationRefused, "", ""},
		{"credential of another scheme", "parcel", model.OpGet, "public", "", problem.AuthenticationRefused, "", ""},
		{"rejected token on a route without a profile answer", "survey", model.OpGet, "", tok(clerk, "iss", "https://other.test"), problem.AuthenticationRefused, "", ""},
		// Admission dimensions.
		{"principal claim missing", "parcel", model.OpGet, "", tok(clerk, "sub", nil), problem.ResourceNotFound, "", ""},
		{"principal claim not a string", "parcel", model.OpGet, "", tok(clerk, "sub", 12), problem.ResourceNotFound, "", ""},
		{"profile's own principal claim missing", "parcel", model.OpGet, "auditor", tok(auditor, "client_id", nil), problem.ResourceNotFound, "", ""},
		{"required scope missing", "parcel", model.OpGet, "", tok(clerk, "scope", "parcels:read"), problem.ResourceNotFound, "", ""},
		{"one of two required scopes missing", "parcel", model.OpGet, "auditor", tok(auditor, "scope", "parcels:read"), problem.ResourceNotFound, "", ""},
		{"no scope claim", "parcel", model.OpGet, "", tok(clerk, "scope", nil), problem.ResourceNotFound, "", ""},
		{"purpose among the required ones", "parcel", model.OpGet, "auditor", tok(auditor, "purpose", "inspection"), "", "auditor", "ref:c1"},
		{"purpose not among the required ones", "parcel", model.OpGet, "auditor", tok(auditor, "purpose", "marketing"), problem.ResourceNotFound, "", ""},
		{"purpose missing", "parcel", model.OpGet, "auditor", tok(auditor, "purpose", nil), problem.ResourceNotFound, "", ""},
		{"operation not granted", "parcel", model.OpTombstone, "", tok(clerk), problem.ResourceNotFound, "", ""},
		{"operation granted", "parcel", model.OpPatch, "", tok(clerk), "", "clerk", "ref:service:c1"},
		// Row-boundary claims.
		{"boundary claim missing", "parcel", model.OpGet, "", tok(clerk, "district", nil), problem.ResourceNotFound, "", ""},
		{"boundary claim outside the field's values", "parcel", model.OpGet, "", tok(clerk, "district", "central"), problem.ResourceNotFound, "", ""},
		{"equals boundary claim is an array", "parcel", model.OpGet, "", tok(clerk, "district", []string{"north"}), problem.ResourceNotFound, "", ""},
		{"in boundary claim neither an array nor a string", "parcel", model.OpGet, "auditor", tok(auditor, "districts", map[string]any{"north": true}), problem.ResourceNotFound, "", ""},
		{"in boundary claim as a number", "parcel", model.OpGet, "auditor", tok(auditor, "districts", 7), problem.ResourceNotFound, "", ""},
		{"in boundary claim with an invalid member", "parcel", model.OpGet, "auditor", tok(auditor, "districts", []string{"north", "central"}), problem.ResourceNotFound, "", ""},
		{"in boundary claim as a space-delimited string", "parcel", model.OpGet, "auditor", tok(auditor, "districts", "north east"), "", "auditor", "ref:c1"},
		{"in boundary claim as a string with an invalid member", "parcel", model.OpGet, "auditor", tok(auditor, "districts", "north central"), problem.ResourceNotFound, "", ""},
		{"in boundary claim as a string at its member bound", "parcel", model.OpGet, "auditor", tok(auditor, "districts", strings.Repeat("north ", access.MaximumBoundaryValues)), "", "auditor", "ref:c1"},
		{"in boundary claim as a string over its member bound", "parcel", model.OpGet, "auditor", tok(auditor, "districts", strings.Repeat(" north", access.MaximumBoundaryValues+1)), problem.ResourceNotFound, "", ""},
		{"integer boundary claim as a canonical string", "parcel", model.OpGet, "auditor", tok(auditor, "org", "7"), "", "auditor", "ref:c1"},
		{"integer boundary claim as a string with a leading zero", "parcel", model.OpGet, "auditor", tok(auditor, "org", "07"), problem.ResourceNotFound, "", ""},
		{"integer boundary claim as a string with a sign", "parcel", model.OpGet, "auditor", tok(auditor, "org", "+7"), problem.ResourceNotFound, "", ""},
		{"integer boundary claim as a fractional string", "parcel", model.OpGet, "auditor", tok(auditor, "org", "7.0"), problem.ResourceNotFound, "", ""},
		{"in boundary claim at its member bound", "parcel", model.OpGet, "auditor", tok(auditor, "districts", repeat("north", access.MaximumBoundaryValues)), "", "auditor", "ref:c1"},
		{"in boundary claim over its member bound", "parcel", model.OpGet, "auditor", tok(auditor, "districts", repeat("north", access.MaximumBoundaryValues+1)), problem.ResourceNotFound, "", ""},
	}
	// why names, for the logs only, the step that refused.
	why := map[string]string{
		"unknown profile name":                                   `no profile "nobody"`,
		"profile that does not grant the route":                  `no profile "inspector"`,
		"several profiles and no default":                        "accessProfile is required",
		"anonymous operation not granted":                        "does not grant create",
		"missing token":                                          "needs a token",
		"principal claim missing":                                `principal claim "sub"`,
		"principal claim not a string":                           `principal claim "sub"`,
		"profile's own principal claim missing":                  `principal claim "client_id"`,
		"required scope missing":                                 "required scope",
		"one of two required scopes missing":                     "required scope",
		"no scope claim":                                         "required scope",
		"purpose not among the required ones":                    "purpose",
		"purpose missing":                                        "purpose",
		"operation not granted":                                  "does not grant tombstone",
		"boundary claim missing":                                 `claim "district" missing`,
		"boundary claim outside the field's values":              "not a valid value",
		"equals boundary claim is an array":                      "not a single value",
		"in boundary claim neither an array nor a string":        "neither an array nor a space-delimited string",
		"in boundary claim as a number":                          "neither an array nor a space-delimited string",
		"in boundary claim with an invalid member":               "member 1",
		"in boundary claim as a string with an invalid member":   "member 1",
		"in boundary claim as a string over its member bound":    "more than",
		"integer boundary claim as a string with a leading zero": `claim "org"`,
		"integer boundary claim as a string with a sign":         `claim "org"`,
		"integer boundary claim as a fractional string":          `claim "org"`,
		"in boundary claim over its member bound":                "more than",
		"rejected token: expired":                                "expired",
		"rejected token: garbage":                                "malformed",
		"credential of another scheme":                           "without a bearer token",
		"anonymous with a rejected token":                        "audience",
		"rejected token on a route without a profile answer":     "issuer",
	}
	notFound := problem.NotFound().Doc("https://problems.test", "trace")
	var refusedDoc *problem.Document
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := access.Request{Operation: tc.op, Entity: f.entity(tc.entity), Bearer: tc.bearer, Profile: tc.profile}
			if tc.name == "credential of another scheme" {
				r.Bearer, r.UnusableCredential = auth.BearerToken("Basic dXNlcjpwYXNz")
				r.UnusableCredential = r.UnusableCredential && r.Bearer == ""
			}
			g, err := f.d.Decide(context.Background(), r)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if g.Profile != tc.grantBy || g.PrincipalReference != tc.ref || g.Anonymous != (tc.ref == "") {
					t.Fatalf("grant by %q ref %q anonymous %v, want %q %q", g.Profile, g.PrincipalReference, g.Anonymous, tc.grantBy, tc.ref)
				}
				return
			}
			if got := code(err); got != tc.want {
				t.Fatalf("err = %v, want %s", err, tc.want)
			}
			if w, ok := why[tc.name]; !ok || !strings.Contains(err.Error(), w) {
				t.Fatalf("refused for another reason: %v (want %q)", err, w)
			}
			doc := problem.Wrap(err).Doc("https://problems.test", "trace")
			switch tc.want {
			case problem.ResourceNotFound:
				// Every concealed refusal is the same document as an unknown path.
				if !reflect.DeepEqual(doc, notFound) {
					t.Fatalf("concealed refusal differs from the unknown-path one: %+v", doc)
				}
			case problem.AuthenticationRefused:
				if doc.Status != 401 {
					t.Fatalf("status %d", doc.Status)
				}
				if refusedDoc == nil {
					refusedDoc = &doc
				} else if !reflect.DeepEqual(doc, *refusedDoc) {
					t.Fatalf("401 documents differ, so they tell why: %+v vs %+v", doc, *refusedDoc)
				}
			}
			body, _ := json.Marshal(doc)
			if tc.bearer != "" && strings.Contains(err.Error()+string(body), tc.bearer) {
				t.Fatal("the refusal carries the token")
			}
		})
	}
}

func TestGrantsNarrowFieldsPerProfile(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	parcel := f.entity("parcel")
	clerk, err := f.d.Decide(ctx, access.Request{Operation: model.OpList, Entity: parcel, Bearer: f.token("scope", "parcels:write", "district", "north")})
	if err != nil {
		t.Fatal(err)
	}
	want := struct{ r, w, fl, so []string }{[]string{"area", "district", "note", "org", "parcel-code"}, []string{"area", "note"}, []string{"area"}, []string{"area"}}
	if !reflect.DeepEqual(clerk.Readable.IDs(), want.r) || !reflect.DeepEqual(clerk.Writable.IDs(), want.w) || !reflect.DeepEqual(clerk.Filterable.IDs(), want.fl) || !reflect.DeepEqual(clerk.Sortable.IDs(), want.so) || !clerk.AllowCount {
		t.Fatalf("clerk grant = %+v", clerk)
	}
	if clerk.Source == nil || clerk.Source.Entity != "parcel" {
		t.Fatalf("source grant = %+v", clerk.Source)
	}
	auditor, err := f.d.Decide(ctx, access.Request{Operation: model.OpGet, Entity: parcel, Profile: "auditor",
		Bearer: f.token("scope", "parcels:read audit:read", "purpose", "audit", "districts", []string{"north"}, "org", 7)})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(auditor.Readable.IDs(), []string{"district", "parcel-code"}) || auditor.Writable.Len() != 0 || auditor.Filterable.Len() != 0 || auditor.AllowCount {
		t.Fatalf("auditor grant = %+v", auditor)
	}
	public, err := f.d.Decide(ctx, access.Request{Operation: model.OpGet, Entity: parcel, Profile: "public"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(public.Readable.IDs(), []string{"parcel-code"}) || public.Writable.Len() != 0 {
		t.Fatalf("public grant = %+v", public)
	}
	// A caller changing the ids it was given does not change the grant or
	// the next decision (field sets are immutable; IDs returns a copy).
	ids := clerk.Readable.IDs()
	ids[0] = "secret"
	again, _ := f.d.Decide(ctx, access.Request{Operation: model.OpList, Entity: parcel, Bearer: f.token("scope", "parcels:write", "district", "north")})
	if again.Readable.Has("secret") || clerk.Readable.Has("secret") || !again.Readable.Has("area") {
		t.Fatal("a caller changed a grant's field set")
	}
}

func TestRowBoundariesEqualsAndIn(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	parcel := f.entity("parcel")
	clerk, err := f.d.Decide(ctx, access.Request{Operation: model.OpGet, Entity: parcel, Bearer: f.token("scope", "parcels:write", "district", "north")})
	if err != nil {
		t.Fatal(err)
	}
	if got := clerk.Boundaries(); !reflect.DeepEqual(got, access.Boundaries{{Field: "district", Operator: model.BoundaryEquals, Claim: "district", Values: []any{"north"}}}) {
		t.Fatalf("clerk boundaries = %#v", got)
	}
	auditor, err := f.d.Decide(ctx, access.Request{Operation: model.OpList, Entity: parcel, Profile: "auditor",
		Bearer: f.token("scope", "parcels:read audit:read", "purpose", "audit", "districts", []string{"north", "east"}, "org", 7)})
	if err != nil {
		t.Fatal(err)
	}
	wantB := access.Boundaries{
		{Field: "district", Operator: model.BoundaryIn, Claim: "districts", Values: []any{"north", "east"}},
		{Field: "org", Operator: model.BoundaryEquals, Claim: "org", Values: []any{int64(7)}},
	}
	if got := auditor.Boundaries(); !reflect.DeepEqual(got, wantB) {
		t.Fatalf("auditor boundaries = %#v", got)
	}
	for _, tc := range []struct {
		grant  *access.Grant
		record map[string]any
		want   bool
	}{
		{clerk, map[string]any{"district": "north", "area": int64(3)}, true},
		{clerk, map[string]any{"district": "south"}, false},
		{clerk, map[string]any{"district": nil}, false},
		{clerk, map[string]any{}, false},
		{auditor, map[string]any{"district": "north", "org": int64(7)}, true},
		{auditor, map[string]any{"district": "east", "org": int64(7)}, true},
		{auditor, map[string]any{"district": "south", "org": int64(7)}, false},
		{auditor, map[string]any{"district": "north", "org": int64(8)}, false},
		{auditor, map[string]any{"district": "north"}, false},
		{auditor, map[string]any{"district": "north", "org": "7"}, false},
	} {
		if got := tc.grant.Admits(tc.record); got != tc.want {
			t.Errorf("%s.Admits(%v) = %v, want %v", tc.grant.Profile, tc.record, got, tc.want)
		}
	}
	// Boundaries returns a copy.
	auditor.Boundaries()[0].Values[0] = "south"
	if !auditor.Admits(map[string]any{"district": "north", "org": int64(7)}) {
		t.Fatal("Boundaries exposes the grant's own values")
	}
	// An empty in-claim admits the profile but no record: an empty array,
	// an empty string, or a string of spaces only.
	for _, claim := range []any{[]string{}, "", "   "} {
		empty, err := f.d.Decide(ctx, access.Request{Operation: model.OpList, Entity: parcel, Profile: "auditor",
			Bearer: f.token("scope", "parcels:read audit:read", "purpose", "audit", "districts", claim, "org", 7)})
		if err != nil {
			t.Fatalf("empty in-claim %q: %v", claim, err)
		}
		if len(empty.Boundaries()[0].Values) != 0 {
			t.Fatalf("empty in-claim %q: boundaries %v", claim, empty.Boundaries())
		}
		for _, d := range []string{"north", "south", "east", "west"} {
			if empty.Admits(map[string]any{"district": d, "org": int64(7)}) {
				t.Fatalf("an empty in-claim %q admitted %s", claim, d)
			}
		}
	}
	// A space-delimited in-claim resolves like the array of its pieces;
	// leading, trailing and repeated spaces add nothing.
	spaced, err := f.d.Decide(ctx, access.Request{Operation: model.OpList, Entity: parcel, Profile: "auditor",
		Bearer: f.token("scope", "parcels:read audit:read", "purpose", "audit", "districts", "  north   east ", "org", "7")})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := spaced.Boundaries(), auditor.Boundaries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("space-delimited boundaries = %#v, want %#v", got, want)
	}
	// Unrestricted grants have no boundaries and admit every record.
	public, _ := f.d.Decide(ctx, access.Request{Operation: model.OpGet, Entity: parcel, Profile: "public"})
	if len(public.Boundaries()) != 0 || !public.Admits(map[string]any{}) {
		t.Fatal("an unrestricted grant is bounded")
	}
}

// TestBoundaryValuesTakeTheFieldsStorageForm checks claims of every type a
// boundary may compare against records in storage form.
func TestBoundaryValuesTakeTheFieldsStorageForm(t *testing.T) {
	ip := func(v int) *int { return &v }
	e := &model.Entity{ID: "thing", Route: "things", Fields: []*model.Field{
		{ID: "when", APIName: "when", Type: model.TypeTimestamp},
		{ID: "day", APIName: "day", Type: model.TypeDate},
		{ID: "amount", APIName: "amount", Type: model.TypeDecimal, Precision: ip(6), Scale: ip(2)},
		{ID: "uid", APIName: "uid", Type: model.TypeUUID},
	}}
	rules := []*model.RowRule{
		{Field: "when", Claim: "when", Operator: model.BoundaryEquals},
		{Field: "day", Claim: "days", Operator: model.BoundaryIn},
		{Field: "amount", Claim: "amount", Operator: model.BoundaryEquals},
		{Field: "uid", Claim: "uid", Operator: model.BoundaryEquals},
	}
	pkg := &model.Package{Entities: []*model.Entity{e}, Profiles: []*model.Profile{{
		ID: "p", Default: true, RequiredScopes: []string{"s"}, PrincipalClaim: "sub",
		Grants: []*model.Grant{{Entity: "thing", Operations: []string{model.OpGet}, RowBoundaries: model.RowBoundaries{Rules: rules}}},
	}}}
	key := authtest.NewKey(t, "k1")
	v, err := auth.NewVerifier(authSettings(authtest.NewKeyServer(t, key).URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := access.NewProfiles(pkg, v, principalRef)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims := map[string]any{"iss": testIssuer, "aud": testAudience, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": "j", "sub": "s1", "scope": "s",
		"when": "2026-03-01T10:00:00+02:00", "days": []string{"2026-03-01", "2026-03-02"}, "amount": 12.5, "uid": "0b8f6a52-1d2c-4e7b-9a3e-2f1c5d6e7a8b"}
	g, err := d.Decide(context.Background(), access.Request{Operation: model.OpGet, Entity: e, Bearer: key.Sign(t, "at+jwt", claims)})
	if err != nil {
		t.Fatal(err)
	}
	rec := map[string]any{"when": time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC), "day": "2026-03-02", "amount": "12.50", "uid": "0b8f6a52-1d2c-4e7b-9a3e-2f1c5d6e7a8b"}
	if !g.Admits(rec) {
		t.Fatalf("record in storage form not admitted; boundaries %#v", g.Boundaries())
	}
	for field, other := range map[string]any{"when": time.Date(2026, 3, 1, 8, 0, 1, 0, time.UTC), "day": "2026-03-03", "amount": "12.51", "uid": "1b8f6a52-1d2c-4e7b-9a3e-2f1c5d6e7a8b"} {
		moved := map[string]any{}
		for k, v := range rec {
			moved[k] = v
		}
		moved[field] = other
		if g.Admits(moved) {
			t.Errorf("record with %s = %v admitted", field, other)
		}
	}
	// A decimal claim with more digits than the field's scale cannot match: the profile is not satisfied.
	claims["amount"] = 12.555
	if _, err := d.Decide(context.Background(), access.Request{Operation: model.OpGet, Entity: e, Bearer: key.Sign(t, "at+jwt", claims)}); code(err) != problem.ResourceNotFound {
		t.Fatalf("err = %v, want the concealed 404", err)
	}
}

func TestBoundaryDocumentIsCanonicalAndExact(t *testing.T) {
	bs := access.Boundaries{
		{Field: "org", Operator: model.BoundaryEquals, Claim: "org", Values: []any{int64(9007199254740993)}},
		{Field: "when", Operator: model.BoundaryIn, Claim: "w", Values: []any{time.Date(2026, 3, 1, 10, 0, 0, 0, time.FixedZone("x", 7200)), "2026-03-02"}},
	}
	doc, err := bs.Document()
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"field":"org","operator":"equals","values":["9007199254740993"]},{"field":"when","operator":"in","values":["2026-03-01T08:00:00Z","2026-03-02"]}]`
	if string(doc) != want {
		t.Fatalf("document = %s\nwant       %s", doc, want)
	}
	// Integers one apart stay apart (a float encoding would merge them).
	other := access.Boundaries{{Field: "org", Operator: model.BoundaryEquals, Values: []any{int64(9007199254740992)}}}
	od, _ := other.Document()
	if string(od) == `[{"field":"org","operator":"equals","values":["9007199254740993"]}]` {
		t.Fatal("distinct integers give one document")
	}
	if d, err := (access.Boundaries{}).Document(); err != nil || string(d) != "[]" {
		t.Fatalf("unrestricted document = %s, %v", d, err)
	}
	if _, err := (access.Boundaries{{Field: "x", Values: []any{3.5}}}).Document(); err == nil {
		t.Fatal("a value that is not a storage form was encoded")
	}
}

func TestGrantCarriesThePurpose(t *testing.T) {
	f := newFixture(t)
	g, err := f.d.Decide(context.Background(), access.Request{Operation: model.OpGet, Entity: f.entity("parcel"), Profile: "auditor",
		Bearer: f.token("scope", "parcels:read audit:read", "purpose", "inspection", "districts", []string{"north"}, "org", 7)})
	if err != nil {
		t.Fatal(err)
	}
	if g.Purpose != "inspection" {
		t.Fatalf("purpose = %q", g.Purpose)
	}
	pub, _ := f.d.Decide(context.Background(), access.Request{Operation: model.OpGet, Entity: f.entity("parcel"), Profile: "public",
		Bearer: f.token("scope", "parcels:read", "purpose", "inspection")})
	if pub.Purpose != "" || pub.PrincipalReference != "" {
		t.Fatalf("an anonymous grant carries the token's authority: %+v", pub)
	}
}

func TestPrincipalReferencesAreComputedOncePerPrincipal(t *testing.T) {
	f := newFixture(t)
	calls := map[string]int{}
	v, err := auth.NewVerifier(authSettings(authtest.NewKeyServer(t, f.key).URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := access.NewProfiles(f.pkg, v, func(p string) string { calls[p]++; return "ref:" + p })
	if err != nil {
		t.Fatal(err)
	}
	parcel := f.entity("parcel")
	for i := range 5 {
		for _, sub := range []string{"service:a", "service:b"} {
			g, err := d.Decide(context.Background(), access.Request{Operation: model.OpList, Entity: parcel,
				Bearer: f.token("sub", sub, "jti", fmt.Sprint(sub, i), "scope", "parcels:write", "district", "north")})
			if err != nil {
				t.Fatal(err)
			}
			if g.PrincipalReference != "ref:"+sub {
				t.Fatalf("reference %q for %s", g.PrincipalReference, sub)
			}
		}
	}
	if calls["service:a"] != 1 || calls["service:b"] != 1 {
		t.Fatalf("keyed reference computed %v times, want once per principal", calls)
	}
}
