package host_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

type caller struct {
	srv   *httptest.Server
	token string
}

// do sends one request through hosttest.Caller and reads the whole answer.
func (c caller) do(t *testing.T, method, path, ctype, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return hosttest.Caller{URL: c.srv.URL, Token: c.token}.Do(t, method, path, ctype, body, hdr...)
}

// withoutTrace returns a problem document without its traceId.
func withoutTrace(t *testing.T, b []byte) string {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("not a problem document: %s", b)
	}
	delete(p, "traceId")
	out, _ := json.Marshal(p)
	return string(out)
}

func TestRowBoundariesAndConcealmentWithRealTokens(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"offices:write"}, Claims: map[string]string{"district": "north"}}, nil)
	auth := is.HostAuthentication()
	dsn := storetest.NewDatabase(t)
	cfg := deployment(t, "testdata/bounded", dsn, auth)
	_, srv := serve(t, cfg)
	clerk := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	anonymous := caller{srv: srv}

	resp, b := clerk.do(t, "POST", "/v1/records/offices", "application/json", `{"data":{"name":"N1","district":"north"}}`)
	if resp.StatusCode != 201 {
		t.Fatalf("create inside the boundary: %d %s", resp.StatusCode, b)
	}
	northLoc, northTag := resp.Header.Get("Location"), resp.Header.Get("ETag")
	clerk.do(t, "POST", "/v1/records/offices", "application/json", `{"data":{"name":"N2","district":"north"}}`)

	// Outside the boundary: the same concealed not-found as an unknown route.
	resp, outside := clerk.do(t, "POST", "/v1/records/offices", "application/json", `{"data":{"name":"S1","district":"south"}}`)
	if resp.StatusCode != 404 {
		t.Fatalf("create outside the boundary: %d %s", resp.StatusCode, outside)
	}
	resp, b = clerk.do(t, "PATCH", northLoc, "application/json-patch+json", `[{"op":"replace","path":"/data/district","value":"south"}]`, "If-Match", northTag)
	if resp.StatusCode != 404 {
		t.Fatalf("patch moving a record out of the boundary: %d %s", resp.StatusCode, b)
	}
	// A south office written by someone else (directly in the store) stays invisible.
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var southID string
	if err := conn.QueryRow(context.Background(), `INSERT INTO registrum_data.e_office (record_id, revision, lifecycle, created_at, updated_at, package_revision, f_name, f_district)
		VALUES (gen_random_uuid(), 1, 'active', now(), now(), 'x', 'S2', 'south') RETURNING record_id::text`).Scan(&southID); err != nil {
		t.Fatal(err)
	}
	resp, hidden := clerk.do(t, "GET", "/v1/records/offices/"+southID, "", "")
	if resp.StatusCode != 404 {
		t.Fatalf("read outside the boundary: %d %s", resp.StatusCode, hidden)
	}
	resp, b = clerk.do(t, "GET", "/v1/records/offices?$count=true&$orderby=name", "", "")
	var page struct {
		Items []struct {
			DomainData map[string]any `json:"domainData"`
		} `json:"items"`
		Count int `json:"count"`
	}
	json.Unmarshal(b, &page)
	if resp.StatusCode != 200 || page.Count != 2 || len(page.Items) != 2 || page.Items[0].DomainData["name"] != "N1" {
		t.Fatalf("list inside the boundary: %d %s", resp.StatusCode, b)
	}

	// Missing token, unsatisfied profile, unknown profile, unknown route,
	// outside the boundary: one concealed answer, identical but for traceId.
	_, noToken := anonymous.do(t, "GET", "/v1/records/offices", "", "")
	_, unsatisfied := clerk.do(t, "GET", "/v1/records/offices?accessProfile=auditor", "", "")
	_, unknownProfile := clerk.do(t, "GET", "/v1/records/offices?accessProfile=nobody", "", "")
	_, unknownRoute := clerk.do(t, "GET", "/v1/records/nowhere", "", "")
	_, wrongMethod := clerk.do(t, "PUT", "/v1/records/offices", "", "")
	want := withoutTrace(t, hidden)
	for name, got := range map[string][]byte{"no token": noToken, "unsatisfied profile": unsatisfied, "unknown profile": unknownProfile,
		"unknown route": unknownRoute, "wrong method": wrongMethod, "create outside": outside} {
		if withoutTrace(t, got) != want {
			t.Errorf("%s answers %s, outside the boundary answers %s", name, got, want)
		}
	}
	// A presented, rejected token is refused as such.
	resp, b = caller{srv: srv, token: clerk.token + "x"}.do(t, "GET", "/v1/records/offices", "", "")
	if resp.StatusCode != 401 || !strings.Contains(string(b), "authentication.refused") {
		t.Fatalf("rejected token: %d %s", resp.StatusCode, b)
	}
}
