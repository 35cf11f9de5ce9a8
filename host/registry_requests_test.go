package host_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// clerkProfile is added to the copy of testdata/requests: a profile that
// reads the child's address only, never the guardian, the contact change's
// child_id only, and the address change's address only.
const clerkProfile = `
  - id: clerk
    requiredScopes: ["families:write"]
    grants:
      - {entity: child, operations: [get], readableFields: [address], rowBoundaries: unrestricted}
      - {entity: contact_change, operations: [get], readableFields: [child_id], rowBoundaries: unrestricted}
      - {entity: address_change, operations: [get], readableFields: [address], rowBoundaries: unrestricted}
`

// canonJSON re-encodes a JSON text with its object members in sorted order.
func canonJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// TestRegistryDescribesChangeRequestCapabilities: GET /v1/registry over real
// HTTP, with a real issuer and database, describes the change request of
// each request entity (tengo, WebAssembly and declarative planners), and
// leaves out for a narrower profile what it cannot read while still counting
// every write.
func TestRegistryDescribesChangeRequestCapabilities(t *testing.T) {
	dir := requestProject(t)
	f, err := os.OpenFile(filepath.Join(dir, "registry.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(clerkProfile); err != nil {
		t.Fatal(err)
	}
	f.Close()
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"families:write"}}, nil)
	_, srv := serve(t, deployment(t, dir, storetest.NewDatabase(t), is.HostAuthentication()))
	c := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}

	capabilities := func(path string) map[string]json.RawMessage {
		t.Helper()
		resp, b := c.do(t, "GET", path, "", "")
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		var doc struct {
			Entities []struct {
				ID            string          `json:"id"`
				ChangeRequest json.RawMessage `json:"changeRequest"`
			} `json:"entities"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		out := map[string]json.RawMessage{}
		for _, e := range doc.Entities {
			out[e.ID] = e.ChangeRequest
		}
		return out
	}
	check := func(who, entity string, got json.RawMessage, want string) {
		t.Helper()
		if got == nil {
			t.Errorf("%s: %s has no changeRequest", who, entity)
			return
		}
		if g, w := canonJSON(t, got), canonJSON(t, []byte(want)); g != w {
			t.Errorf("%s: %s changeRequest =\n%s\nwant\n%s", who, entity, g, w)
		}
	}

	const (
		abi      = `"abi":"registrum.change-request-plan/v1"`
		manual   = `"review":{"mode":"none"},"application":{"mode":"manual","executor":null,"dispositions":["apply"],"queueReasons":[]},"retention":{"mode":"retain"}`
		contact  = `[{"id":"new_guardian","operation":"create","target":{"entity":"guardian"},"fields":["name","relationship"]},{"id":"update_child","operation":"patch","target":{"entity":"child","fromField":"child_id"},"fields":["address","phone","guardian_id","case_notes"]}]`
		targetsF = `{"entity":"guardian","id":"name","apiName":"name"},{"entity":"guardian","id":"relationship","apiName":"relationship"},` +
			`{"entity":"child","id":"address","apiName":"address"},{"entity":"child","id":"phone","apiName":"phone"},` +
			`{"entity":"child","id":"guardian_id","apiName":"guardianId"},{"entity":"child","id":"case_notes","apiName":"caseNotes"}`
	)
	all := capabilities("/v1/registry")
	check("family", "contact_change", all["contact_change"], `{"planner":{"kind":"tengo",`+abi+`,
		"limits":{"wallTimeMilliseconds":500,"maximumInputBytes":1048576,"maximumOutputBytes":1048576,"maximumAllocations":200000},
		"possibleWriteCount":2,"writes":`+contact+`},`+manual+`,"effects":[],
		"fields":[`+targetsF+`,{"entity":"contact_change","id":"child_id","apiName":"childId"}]}`)
	check("family", "contact_change_wasm", all["contact_change_wasm"], `{"planner":{"kind":"wasm",`+abi+`,
		"limits":{"wallTimeMilliseconds":500,"memoryPages":512,"maximumInputBytes":1048576,"maximumOutputBytes":1048576},
		"possibleWriteCount":2,"writes":`+contact+`},`+manual+`,"effects":[],
		"fields":[`+targetsF+`,{"entity":"contact_change_wasm","id":"child_id","apiName":"childId"}]}`)
	check("family", "address_change", all["address_change"], `{"planner":{"kind":"declarative","abi":null,"limits":null,"possibleWriteCount":null,"writes":[]},`+manual+`,
		"effects":[{"id":"move","operation":"patch","target":{"entity":"child","fromField":"child_id"},"set":[{"field":"address","fromField":"address"}],"clear":[]}],
		"fields":[{"entity":"child","id":"address","apiName":"address"},{"entity":"address_change","id":"child_id","apiName":"childId"},{"entity":"address_change","id":"address","apiName":"address"}]}`)
	for _, plain := range []string{"guardian", "child"} {
		if all[plain] != nil {
			t.Errorf("%s has a changeRequest capability: %s", plain, all[plain])
		}
	}

	// The clerk: no guardian, only the child's address. The tengo planner's
	// create on guardian is left out and its patch shows address alone, yet
	// possibleWriteCount is 2; the declarative patch's target selector
	// (child_id) is unreadable, so its one effect is left out.
	clerk := capabilities("/v1/registry?accessProfile=clerk")
	check("clerk", "contact_change", clerk["contact_change"], `{"planner":{"kind":"tengo",`+abi+`,
		"limits":{"wallTimeMilliseconds":500,"maximumInputBytes":1048576,"maximumOutputBytes":1048576,"maximumAllocations":200000},
		"possibleWriteCount":2,"writes":[{"id":"update_child","operation":"patch","target":{"entity":"child","fromField":"child_id"},"fields":["address"]}]},`+manual+`,"effects":[],
		"fields":[{"entity":"child","id":"address","apiName":"address"},{"entity":"contact_change","id":"child_id","apiName":"childId"}]}`)
	check("clerk", "address_change", clerk["address_change"], `{"planner":{"kind":"declarative","abi":null,"limits":null,"possibleWriteCount":null,"writes":[]},`+manual+`,"effects":[],"fields":[]}`)
	if _, listed := clerk["contact_change_wasm"]; listed {
		t.Error("clerk: contact_change_wasm is listed without a grant")
	}
}
