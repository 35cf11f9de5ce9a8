package host_test

import (
	"fmt"
	"testing"
)

// TestLargeAnswersDeclareTheirLength: an answer larger than net/http's
// own buffer (2 KiB) declares its Content-Length rather than being sent
// chunked: pages of records and snapshots, and the OpenAPI document; a
// small record answer declares it too.
func TestLargeAnswersDeclareTheirLength(t *testing.T) {
	clerk := serveSites(t)
	var loc string
	for i := range 30 {
		loc, _ = clerk.create(t, "sites", fmt.Sprintf(`{"name":"site number %d","location":{"type":"Point","coordinates":[4.5,52]}}`, i))
	}
	for _, path := range []string{"/v1/records/sites?$top=50", "/v1/records/sites:snapshot?$top=50", "/openapi.json", loc} {
		resp, b := clerk.do(t, "GET", path, "", "")
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		if len(b) <= 2048 && path != loc {
			t.Fatalf("GET %s: %d bytes, want an answer larger than 2 KiB", path, len(b))
		}
		if resp.ContentLength != int64(len(b)) || len(resp.TransferEncoding) != 0 {
			t.Errorf("GET %s: Content-Length %d, Transfer-Encoding %v for a body of %d bytes", path, resp.ContentLength, resp.TransferEncoding, len(b))
		}
	}
}
