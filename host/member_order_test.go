package host_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// memberOrderProject has a point and a structured field readable through
// live reads, :snapshot and revisions.
const memberOrderProject = `format: registrum.project/v1
registry:
  id: order
  version: 1.0.0
  language: en
  canonicalBaseIri: https://order.example.test
entities:
  - id: site
    route: sites
    dataset: sites
    fields:
      - {id: name, type: string, maxLength: 64, required: true}
      - {id: location, type: crs84-point}
profiles:
  - id: clerk
    default: true
    principalClaim: sub
    requiredScopes: ["sites:write"]
    grants:
      - entity: site
        operations: [create, get, list, revisions, snapshot]
        readableFields: [name, location]
        writableFields: [name, location]
        rowBoundaries: unrestricted
`

// serveSites serves memberOrderProject on a database of its own and
// returns its clerk.
func serveSites(t *testing.T) caller {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "registry.yaml"), []byte(memberOrderProject), 0o644); err != nil {
		t.Fatal(err)
	}
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"sites:write"}}, nil)
	_, srv := serve(t, deployment(t, dir, storetest.NewDatabase(t), is.HostAuthentication()))
	return caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
}

// domainDataBytes returns the raw domainData of each item of a collection
// answer (or of the envelope, for a single record).
func domainDataBytes(t *testing.T, b []byte) []json.RawMessage {
	t.Helper()
	var doc struct {
		Data *struct {
			DomainData json.RawMessage `json:"domainData"`
		} `json:"data"`
		Items []struct {
			DomainData json.RawMessage `json:"domainData"`
		} `json:"items"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	if doc.Data != nil {
		return []json.RawMessage{doc.Data.DomainData}
	}
	var out []json.RawMessage
	for _, it := range doc.Items {
		out = append(out, it.DomainData)
	}
	return out
}

// TestRecordedValuesAreWrittenAsLiveReadsWriteThem: a point (and the
// numbers in it) read through :snapshot and revisions has the same bytes
// as on a live read, whatever order and number form the database keeps
// recorded values in.
func TestRecordedValuesAreWrittenAsLiveReadsWriteThem(t *testing.T) {
	clerk := serveSites(t)

	// Members in the order a client might send them, numbers in a form
	// the host normalizes.
	loc, _ := clerk.create(t, "sites", `{"name":"A","location":{"coordinates":[4.50,52.0e0],"type":"Point"}}`)

	resp, live := clerk.do(t, "GET", loc, "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("live read: %d %s", resp.StatusCode, live)
	}
	want := domainDataBytes(t, live)[0]
	if !bytes.Contains(want, []byte(`"location":{"coordinates":[4.5,52],"type":"Point"}`)) {
		t.Fatalf("live domainData: %s", want)
	}
	resp, list := clerk.do(t, "GET", "/v1/records/sites", "", "")
	if got := domainDataBytes(t, list); resp.StatusCode != 200 || len(got) != 1 || !bytes.Equal(got[0], want) {
		t.Fatalf("list read: %d %s, want domainData %s", resp.StatusCode, list, want)
	}
	for _, path := range []string{"/v1/records/sites:snapshot", loc + "/revisions"} {
		resp, b := clerk.do(t, "GET", path, "", "")
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		got := domainDataBytes(t, b)
		if len(got) != 1 || !bytes.Equal(got[0], want) {
			t.Errorf("GET %s writes domainData\n %s\nlive reads write\n %s", path, got, want)
		}
	}
}
