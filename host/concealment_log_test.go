package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/registrum/registrum/host"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// reasonsProject has offices bounded by district, a request entity shown
// only to its owner, a profile whose scope no token holds, and an
// unbounded profile the test writes outside the district with.
const reasonsProject = `format: registrum.project/v1
registry:
  id: reasons
  version: 1.0.0
  language: en
  canonicalBaseIri: https://reasons.example.test
entities:
  - id: office
    route: offices
    dataset: offices
    fields:
      - {id: name, type: string, maxLength: 64, required: true}
      - {id: district, type: code, values: [north, south], required: true}
  - id: rename
    route: renames
    dataset: offices
    fields:
      - {id: name, type: string, maxLength: 64, required: true}
    changeRequest:
      effects:
        - id: note
          operation: create
          target: {entity: office}
          set: {name: {fromField: name}, district: {value: north}}
      review: {mode: none}
      application: {mode: manual}
profiles:
  - id: clerk
    default: true
    principalClaim: sub
    requiredScopes: ["offices:write"]
    grants:
      - entity: office
        operations: [create, get, list]
        readableFields: [name, district]
        writableFields: [name, district]
        rowBoundaries: [{field: district, claim: district, operator: equals}]
      - entity: rename
        operations: [create, get, patch, submit_request, cancel_request]
        readableFields: [name]
        writableFields: [name]
        requestVisibility: owner
        rowBoundaries: unrestricted
  - id: auditor
    principalClaim: sub
    requiredScopes: ["offices:audit"]
    grants:
      - entity: office
        operations: [get, list]
        readableFields: [name]
        rowBoundaries: unrestricted
  - id: registrar
    principalClaim: sub
    requiredScopes: ["offices:write"]
    grants:
      - entity: office
        operations: [create, get]
        readableFields: [name, district]
        writableFields: [name, district]
        rowBoundaries: unrestricted
`

// captured keeps every record a logger writes.
type captured struct {
	mu      sync.Mutex
	records []slog.Record
}

func (c *captured) Enabled(context.Context, slog.Level) bool { return true }

func (c *captured) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.records = append(c.records, r.Clone())
	return nil
}

func (c *captured) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *captured) WithGroup(string) slog.Handler      { return c }

// concealment returns the attributes of the debug record of the refusal
// answered under traceID, nil when there is none.
func (c *captured) concealment(traceID string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.records {
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.String()
			return true
		})
		if r.Level == slog.LevelDebug && r.Message == "refusal concealed" && attrs["trace_id"] == traceID {
			return attrs
		}
	}
	return nil
}

// TestConcealedReasonsAreLoggedNotAnswered: the reason behind each
// concealed 404 (and refused token) reaches the server's debug log with
// the answer's trace id; the answer is the same concealed problem whatever
// the reason, and names none.
func TestConcealedReasonsAreLoggedNotAnswered(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "registry.yaml"), []byte(reasonsProject), 0o644); err != nil {
		t.Fatal(err)
	}
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"offices:write"}, Claims: map[string]string{"district": "north"}}, func(dir string) {
		priv, pub := issuertest.GenerateKey(t, "ES256")
		privJSON, _ := priv.MarshalJSON()
		pubJSON, _ := pub.MarshalJSON()
		if err := os.WriteFile(filepath.Join(dir, "client-keys", "colleague.jwk"), privJSON, 0o600); err != nil {
			t.Fatal(err)
		}
		reg := fmt.Sprintf("clientId: colleague\nprincipal: service:colleague\nauthorization:\n  scopes: [\"offices:write\"]\n  claims:\n    district: north\nkeys:\n  - %s\n", pubJSON)
		if err := os.WriteFile(filepath.Join(dir, "clients", "colleague.yaml"), []byte(reg), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	is.Setup.Clients = append(is.Setup.Clients, issuertest.DevClient{ID: "colleague", Profile: "standard",
		KeyFile: filepath.Join(filepath.Dir(is.Setup.ConfigPath), "client-keys", "colleague.jwk"), Audience: is.Setup.TokenURL})
	logs := &captured{}
	h, err := host.Open(context.Background(), deployment(t, dir, storetest.NewDatabase(t), is.HostAuthentication()), slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(func() {
		srv.Close()
		h.Close()
	})
	clerk := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	colleague := caller{srv: srv, token: is.Token(t, "colleague")}
	anonymous := caller{srv: srv}

	south, _ := clerk.create(t, "offices?accessProfile=registrar", `{"name":"S","district":"south"}`)
	request, _ := clerk.create(t, "renames", `{"name":"R"}`)
	const absent = "/v1/records/offices/00000000-0000-4000-8000-000000000000"

	reasons := []string{"unknown_path", "missing_token", "unusable_credential", "token_refused", "unknown_profile",
		"profile_not_satisfied", "no_record", "outside_boundary", "hidden_by_request_visibility"}
	cases := []struct {
		reason string
		status int
		call   func() (int, []byte)
	}{
		{"unknown_path", 404, func() (int, []byte) { r, b := clerk.do(t, "GET", "/v1/nothing/here", "", ""); return r.StatusCode, b }},
		{"unknown_path", 404, func() (int, []byte) {
			r, b := clerk.do(t, "GET", "/v1/records/offices/not-a-uuid", "", "")
			return r.StatusCode, b
		}},
		{"missing_token", 404, func() (int, []byte) {
			r, b := anonymous.do(t, "GET", "/v1/records/offices", "", "")
			return r.StatusCode, b
		}},
		{"unusable_credential", 401, func() (int, []byte) {
			r, b := anonymous.do(t, "GET", "/v1/records/offices", "", "", "Authorization", "Basic dXNlcjpwYXNz")
			return r.StatusCode, b
		}},
		{"token_refused", 401, func() (int, []byte) {
			r, b := caller{srv: srv, token: "not.a.token"}.do(t, "GET", "/v1/records/offices", "", "")
			return r.StatusCode, b
		}},
		{"unknown_profile", 404, func() (int, []byte) {
			r, b := clerk.do(t, "GET", "/v1/records/offices?accessProfile=nobody", "", "")
			return r.StatusCode, b
		}},
		{"profile_not_satisfied", 404, func() (int, []byte) {
			r, b := clerk.do(t, "GET", "/v1/records/offices?accessProfile=auditor", "", "")
			return r.StatusCode, b
		}},
		{"no_record", 404, func() (int, []byte) { r, b := clerk.do(t, "GET", absent, "", ""); return r.StatusCode, b }},
		{"outside_boundary", 404, func() (int, []byte) { r, b := clerk.do(t, "GET", south, "", ""); return r.StatusCode, b }},
		{"outside_boundary", 404, func() (int, []byte) {
			r, b := clerk.do(t, "POST", "/v1/records/offices", "application/json", `{"data":{"name":"X","district":"south"}}`)
			return r.StatusCode, b
		}},
		{"hidden_by_request_visibility", 404, func() (int, []byte) { r, b := colleague.do(t, "GET", request, "", ""); return r.StatusCode, b }},
	}
	answers := map[int]string{}
	for _, tc := range cases {
		status, b := tc.call()
		var doc struct {
			TraceID string `json:"traceId"`
		}
		if err := json.Unmarshal(b, &doc); err != nil || status != tc.status || doc.TraceID == "" {
			t.Fatalf("%s: %d %s, want %d", tc.reason, status, b, tc.status)
		}
		// The answer is the same for every reason of its status and
		// names none of them.
		answer := traceIDMember.ReplaceAllString(string(b), `"traceId":""`)
		if prev, ok := answers[status]; ok && prev != answer {
			t.Errorf("%s: the answer differs from another %d's:\n%s\n%s", tc.reason, status, answer, prev)
		}
		answers[status] = answer
		for _, r := range reasons {
			if strings.Contains(string(b), r) {
				t.Errorf("%s: the answer names a reason: %s", tc.reason, b)
			}
		}
		// The log has the reason, under the answer's trace id.
		got := logs.concealment(doc.TraceID)
		if got == nil || got["reason"] != tc.reason {
			t.Errorf("%s: logged %v", tc.reason, got)
		}
	}
}
