package access_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/auth"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/project"
	"github.com/registrum/registrum/store/layout"
)

const (
	testIssuer   = "https://issuer.test"
	testAudience = "urn:registrum:test"
)

func intp(v int) *int { return &v }

// compiled returns the fixture project compiled as authors compile theirs.
func compiled(t *testing.T) *model.Package {
	t.Helper()
	r, err := project.Compile("testdata/registry", project.Options{Fingerprint: layout.Fingerprint})
	if err != nil {
		t.Fatalf("compile fixture: %v", err)
	}
	return r.Package
}

// copyPackage deep-copies a package so a test can break it.
func copyPackage(t *testing.T, p *model.Package) *model.Package {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var out model.Package
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func authSettings(url string) *config.Authentication {
	return &config.Authentication{
		Issuer: testIssuer, JWKSURL: url, Audience: testAudience, Algorithm: "ES256",
		ScopeClaim: "scope", ScopeSeparator: " ",
		AuthorityClaims:  config.AuthorityClaims{Principal: "sub", Purpose: "purpose"},
		ClockSkewSeconds: intp(30), KeySetRefreshSeconds: intp(300), KeySetAllowanceSeconds: intp(3600),
	}
}

func principalRef(p string) string { return "ref:" + p }

// fixture is a decider over the compiled fixture with a test key set.
type fixture struct {
	t   *testing.T
	key *authtest.Key
	d   *access.Profiles
	pkg *model.Package
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	key := authtest.NewKey(t, "k1")
	ks := authtest.NewKeyServer(t, key)
	v, err := auth.NewVerifier(authSettings(ks.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	pkg := compiled(t)
	d, err := access.NewProfiles(pkg, v, principalRef)
	if err != nil {
		t.Fatalf("NewProfiles: %v", err)
	}
	return &fixture{t: t, key: key, d: d, pkg: pkg}
}

// token signs claims valid now, overlaid with kv pairs (nil deletes).
func (f *fixture) token(kv ...any) string {
	now := time.Now()
	c := map[string]any{
		"iss": testIssuer, "aud": testAudience, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"jti": "t1", "client_id": "c1", "sub": "service:c1",
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(c, kv[i].(string))
		} else {
			c[kv[i].(string)] = kv[i+1]
		}
	}
	return f.key.Sign(f.t, "at+jwt", c)
}

func (f *fixture) entity(id string) *model.Entity {
	e := f.pkg.EntityByID(id)
	if e == nil {
		f.t.Fatalf("no entity %q", id)
	}
	return e
}

func code(err error) problem.Code {
	var pe *problem.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
