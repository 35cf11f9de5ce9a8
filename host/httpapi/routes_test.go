package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/httpapi"
	"github.com/registrum/registrum/host/metadata"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/host/requests"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/project"
	"github.com/registrum/registrum/project/generate"
	"github.com/registrum/registrum/store/storetest"
)

// operational are the routes outside the registry's API, which the
// document does not list.
var operational = []string{"GET /health", "GET /ready"}

// TestOpenAPIDescribesExactlyTheServedRoutes compiles projects that declare
// every capability, serves each package, and walks the router's route
// table against the served /openapi.json in both directions: every route
// served is documented, every documented operation is served. The served
// document is byte for byte the packaged one.
func TestOpenAPIDescribesExactlyTheServedRoutes(t *testing.T) {
	for _, dir := range []string{"../../examples/childsupport", "../../project/testdata/full", "../../project/testdata/minimal"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			res, err := project.Compile(dir, project.Options{Fingerprint: func(p *model.Package) (string, error) {
				q := *p
				return storetest.Complete(t, &q).SchemaFingerprint, nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			pkgDir := t.TempDir()
			if err := res.Write(pkgDir); err != nil {
				t.Fatal(err)
			}
			pkg, err := model.Load(pkgDir)
			if err != nil {
				t.Fatal(err)
			}
			docs, err := metadata.Load(pkg, pkgDir)
			if err != nil {
				t.Fatal(err)
			}
			st := storetest.Open(t, storetest.NewPool(t), pkg)
			keys, err := records.DeriveKeys(bytes.Repeat([]byte("k"), 32))
			if err != nil {
				t.Fatal(err)
			}
			svc, err := records.New(records.Options{Store: st, Keys: keys, Access: access.Unrestricted{}, Plans: requests.FrozenPlans{}})
			if err != nil {
				t.Fatal(err)
			}
			api := httpapi.New(withRooms(t, httpapi.Options{Records: svc, Documents: docs, Access: access.Unrestricted{}}))
			srv := httptest.NewServer(api)
			defer srv.Close()

			resp, err := http.Get(srv.URL + "/openapi.json")
			if err != nil {
				t.Fatal(err)
			}
			served, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !bytes.Equal(served, res.Contents[model.OpenAPIPath]) {
				t.Fatal("the served openapi.json differs from the packaged one")
			}
			want, err := generate.OpenAPI(pkg)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(served, want) {
				t.Fatal("the served openapi.json differs from generate.OpenAPI of the loaded package")
			}
			var doc struct {
				Paths map[string]map[string]json.RawMessage `json:"paths"`
			}
			if err := json.Unmarshal(served, &doc); err != nil {
				t.Fatal(err)
			}
			var documented []string
			for path, item := range doc.Paths {
				for method := range item {
					documented = append(documented, strings.ToUpper(method)+" "+path)
				}
			}
			sort.Strings(documented)

			var routed []string
			err = chi.Walk(api.Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
				if r := method + " " + route; !slices.Contains(operational, r) {
					routed = append(routed, r)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(routed)
			for _, r := range routed {
				if !slices.Contains(documented, r) {
					t.Errorf("served but not in openapi.json: %s", r)
				}
			}
			for _, d := range documented {
				if !slices.Contains(routed, d) {
					t.Errorf("in openapi.json but not served: %s", d)
				}
			}

			// Every documented operation, its path parameters filled in,
			// is matched by the router, not left to its not-found.
			for _, d := range documented {
				method, path, _ := strings.Cut(d, " ")
				path = strings.ReplaceAll(path, "{recordId}", "00000000-0000-4000-8000-000000000000")
				if !api.Router().Match(chi.NewRouteContext(), method, path) {
					t.Errorf("%s: the router does not match %s", d, path)
				}
			}
		})
	}
}
