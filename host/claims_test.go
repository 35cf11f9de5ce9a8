package host_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// names lists the names of a page's records, in order.
func names(t *testing.T, b []byte) []string {
	t.Helper()
	var page struct {
		Items []struct {
			DomainData map[string]any `json:"domainData"`
		} `json:"items"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatalf("not a page: %s", b)
	}
	out := []string{}
	for _, it := range page.Items {
		out = append(out, fmt.Sprint(it.DomainData["name"]))
	}
	return out
}

// TestListClaimsOfTheRealIssuerBoundRows runs the host against Registrum's
// own issuer: the standard client's "districts" direct claim is a
// space-delimited string (with repeated spaces) read as an "in" list, and
// the Evidence-profile client reads through a profile that requires its
// evidence claims (grant id as principal, requester tags as scopes and as a
// JSON-array "in" boundary, evidence audience as an "equals" boundary),
// with the claim names the host took from the issuer's accessTokens.claims.
func TestListClaimsOfTheRealIssuerBoundRows(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{
		Scopes: []string{"offices:write", "offices:read"},
		Claims: map[string]string{"districts": "north  east "},
	}, nil)
	dsn := storetest.NewDatabase(t)
	_, srv := serve(t, deployment(t, "testdata/claims", dsn, is.HostAuthentication()))
	standard := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	evidence := caller{srv: srv, token: is.Token(t, issuertest.EvidenceClientID)}

	for _, o := range []struct{ name, district, requester, audience string }{
		{"A-north-dev", "north", "dev", "https://evidence.localhost"},
		{"B-east-other", "east", "other", "https://evidence.localhost"},
		{"C-south-dev", "south", "dev", "https://evidence.localhost"},
		{"D-west-dev-elsewhere", "west", "dev", "https://elsewhere.test"},
	} {
		body := fmt.Sprintf(`{"data":{"name":%q,"district":%q,"requester":%q,"audience":%q}}`, o.name, o.district, o.requester, o.audience)
		if resp, b := standard.do(t, "POST", "/v1/records/offices?accessProfile=registrar", "application/json", body); resp.StatusCode != 201 {
			t.Fatalf("create %s: %d %s", o.name, resp.StatusCode, b)
		}
	}

	// The space-delimited districts claim: north and east only.
	resp, b := standard.do(t, "GET", "/v1/records/offices?$orderby=name", "", "")
	if got := names(t, b); resp.StatusCode != 200 || !slices.Equal(got, []string{"A-north-dev", "B-east-other"}) {
		t.Fatalf("regional list: %d %s", resp.StatusCode, b)
	}

	// The evidence client: requester tags ["dev"] (a JSON array) and its
	// evidence audience; the grant id is its principal.
	resp, b = evidence.do(t, "GET", "/v1/records/offices?accessProfile=evidence&$orderby=name", "", "")
	if got := names(t, b); resp.StatusCode != 200 || !slices.Equal(got, []string{"A-north-dev", "C-south-dev"}) {
		t.Fatalf("evidence list: %d %s", resp.StatusCode, b)
	}
	// Neither client satisfies the other's profile: the standard token has
	// no grant id, the evidence token no offices:read scope.
	if resp, b := standard.do(t, "GET", "/v1/records/offices?accessProfile=evidence", "", ""); resp.StatusCode != 404 {
		t.Fatalf("standard client on the evidence profile: %d %s", resp.StatusCode, b)
	}
	if resp, b := evidence.do(t, "GET", "/v1/records/offices", "", ""); resp.StatusCode != 404 {
		t.Fatalf("evidence client on the regional profile: %d %s", resp.StatusCode, b)
	}
}
