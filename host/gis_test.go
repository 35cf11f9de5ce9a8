package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

type featureCollection struct {
	Type     string `json:"type"`
	Features []struct {
		Type     string `json:"type"`
		ID       string `json:"id"`
		Geometry *struct {
			Type        string    `json:"type"`
			Coordinates []float64 `json:"coordinates"`
		} `json:"geometry"`
		Properties map[string]any `json:"properties"`
	} `json:"features"`
	NumberReturned int `json:"numberReturned"`
	Links          []struct {
		Rel  string `json:"rel"`
		Href string `json:"href"`
		Type string `json:"type"`
	} `json:"links"`
}

func (fc featureCollection) next() string {
	for _, l := range fc.Links {
		if l.Rel == "next" {
			return l.Href
		}
	}
	return ""
}

// features reads a feature collection, checking its media type and that it
// is GeoJSON to independent consumers (geojsonCheck).
func (c caller) features(t *testing.T, path string) featureCollection {
	t.Helper()
	resp, b := c.do(t, "GET", path, "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/geo+json" {
		t.Fatalf("GET %s: Content-Type %q", path, ct)
	}
	geojsonCheck(t, b)
	// Links are written as they are: a client comparing hrefs must not
	// meet HTML escapes (\u0026 for '&').
	if bytes.Contains(b, []byte(`\u0026`)) || bytes.Contains(b, []byte(`\u003c`)) {
		t.Fatalf("GET %s: HTML-escaped JSON: %s", path, b)
	}
	var fc featureCollection
	if err := json.Unmarshal(b, &fc); err != nil {
		t.Fatalf("GET %s: %v %s", path, err, b)
	}
	// A feature's properties are written as domainData is: members in the
	// order of their names.
	var raw struct {
		Features []struct {
			Properties json.RawMessage `json:"properties"`
		} `json:"features"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, f := range raw.Features {
		if names := memberNames(t, f.Properties); !slices.IsSorted(names) {
			t.Fatalf("GET %s: properties %s, members not in the order of their names", path, f.Properties)
		}
	}
	if fc.Type != "FeatureCollection" || fc.NumberReturned != len(fc.Features) {
		t.Fatalf("GET %s: %s", path, b)
	}
	return fc
}

// memberNames returns the names of a JSON object's members, in the order
// written.
func memberNames(t *testing.T, obj json.RawMessage) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s: not an object", obj)
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// names follows every next link from path and returns the names of the
// features, in order.
func (c caller) featureNames(t *testing.T, path string) string {
	t.Helper()
	var out []string
	for path != "" {
		fc := c.features(t, path)
		for _, f := range fc.Features {
			out = append(out, fmt.Sprint(f.Properties["name"]))
		}
		path = fc.next()
	}
	return strings.Join(out, ",")
}

func (c caller) refused(t *testing.T, path string, status int, code string) {
	t.Helper()
	resp, b := c.do(t, "GET", path, "", "")
	if resp.StatusCode != status || !strings.Contains(string(b), `"code":"`+code+`"`) {
		t.Errorf("GET %s: %d %s, want %d %s", path, resp.StatusCode, b, status, code)
	}
}

func TestSpatialAdapterOverHTTP(t *testing.T) {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"sites:write"}, Claims: map[string]string{"district": "north"}}, nil)
	dsn := storetest.NewDatabase(t)
	_, srv := serve(t, deployment(t, "testdata/gis", dsn, is.HostAuthentication()))
	clerk := caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)}
	anon := caller{srv: srv}
	forged := caller{srv: srv, token: clerk.token[:len(clerk.token)-4] + "AAAA"}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	create := func(name, location string) string {
		t.Helper()
		data := `{"name":"` + name + `","district":"north"`
		if location != "" {
			data += `,"location":` + location
		}
		resp, b := clerk.do(t, "POST", "/v1/records/sites", "application/json", `{"data":`+data+`}}`)
		if resp.StatusCode != 201 {
			t.Fatalf("create %s: %d %s", name, resp.StatusCode, b)
		}
		return resp.Header.Get("Location")
	}
	pt := func(lon, lat string) string { return `{"type":"Point","coordinates":[` + lon + `,` + lat + `]}` }
	ids := map[string]string{}
	for _, s := range []struct{ name, loc string }{
		{"paris", pt("2.35", "48.85")},
		{"berlin", pt("13.4", "52.52")},
		{"edge", pt("10", "50")}, // on the edges of bbox 0,40,10,50
		{"fiji", pt("179.5", "-17.7")},
		{"samoa", pt("-171.8", "-13.8")},
		{"pole", pt("0", "90")},
		{"nowhere", ""},
		{"south", pt("2.3", "48.8")}, // moved out of the caller's district below
		{"gone", pt("2.4", "48.9")},  // tombstoned below
	} {
		ids[s.name] = create(s.name, s.loc)
	}
	if _, err := conn.Exec(ctx, `UPDATE registrum_data.e_site SET f_district = 'south' WHERE record_id = $1::uuid`, strings.TrimPrefix(ids["south"], "/v1/records/sites/")); err != nil {
		t.Fatal(err)
	}
	resp, _ := clerk.do(t, "GET", ids["gone"], "", "")
	if resp, b := clerk.do(t, "DELETE", ids["gone"], "", "", "If-Match", resp.Header.Get("ETag")); resp.StatusCode != 200 {
		t.Fatalf("tombstone: %d %s", resp.StatusCode, b)
	}
	// Record ids sort the features; the expected orders below use them.
	byID := func(names ...string) string {
		slices.SortFunc(names, func(a, b string) int { return strings.Compare(ids[a], ids[b]) })
		return strings.Join(names, ",")
	}

	t.Run("public documents", func(t *testing.T) {
		for _, c := range []caller{anon, forged} {
			resp, b := c.do(t, "GET", "/v1/gis/conformance", "", "")
			if resp.StatusCode != 200 || string(b) != `{"conformsTo":["engine-gis-bounded-crs84-point-bbox-v1"]}` {
				t.Errorf("conformance: %d %s", resp.StatusCode, b)
			}
			resp, b = c.do(t, "GET", "/v1/gis", "", "")
			if resp.StatusCode != 200 || !strings.Contains(string(b), `"href":"/v1/gis/collections"`) || !strings.Contains(string(b), `"href":"/v1/gis/api"`) {
				t.Errorf("landing: %d %s", resp.StatusCode, b)
			}
			resp, b = c.do(t, "GET", "/v1/gis/api", "", "")
			_, doc := c.do(t, "GET", "/openapi.json", "", "")
			if resp.StatusCode != 200 || string(b) != string(doc) || !strings.Contains(string(b), `"/v1/gis/collections/sites/items"`) {
				t.Errorf("api: %d", resp.StatusCode)
			}
		}
		for _, path := range []string{"/v1/gis", "/v1/gis/conformance", "/v1/gis/collections", "/v1/gis/collections/sites"} {
			_, b := clerk.do(t, "GET", path, "", "")
			if s := strings.ToLower(string(b)); strings.Contains(s, "opengis") || strings.Contains(s, "ogcapi") || strings.Contains(s, "extent") {
				t.Errorf("%s claims OGC conformance or carries an extent: %s", path, b)
			}
		}
	})

	t.Run("answers match the served OpenAPI document", func(t *testing.T) {
		_, doc := anon.do(t, "GET", "/openapi.json", "", "")
		d, err := libopenapi.NewDocument(doc)
		if err != nil {
			t.Fatal(err)
		}
		v, errs := validator.NewValidator(d)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		for _, tc := range []struct {
			c      caller
			path   string
			status int
		}{
			{anon, "/v1/gis", 200}, {anon, "/v1/gis/conformance", 200}, {anon, "/v1/gis/api", 200},
			{clerk, "/v1/gis/collections", 200}, {clerk, "/v1/gis/collections/sites", 200},
			{clerk, "/v1/gis/collections/sites/items?bbox=-180,-90,180,90&limit=2", 200},
			{clerk, "/v1/gis/collections/sites/items?limit=10000", 200},
			{anon, "/v1/gis/collections/sites/items?accessProfile=public&bbox=170,-30,-170,0", 200},
			{clerk, "/v1/gis/collections/sites/items?limit=0", 400},
			{anon, "/v1/gis/collections/sites/items", 404},
			{clerk, "/v1/records/sites?bbox=0,40,10,50&$top=1", 200},
		} {
			req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
			if tc.c.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.c.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			if resp.StatusCode != tc.status {
				t.Errorf("%s: %d %s", tc.path, resp.StatusCode, body)
				continue
			}
			if tc.status == 200 {
				if ok, errs := v.ValidateHttpRequest(req); !ok {
					t.Errorf("%s: the request does not match the document: %v", tc.path, errs)
				}
			}
			if ok, errs := v.ValidateHttpResponse(req, resp); !ok {
				for _, e := range errs {
					t.Errorf("%s: the answer does not match the document: %s %s %v", tc.path, e.Message, e.Reason, e.SchemaValidationErrors)
				}
			}
		}
		// The check is not vacuous: a collection that is no GeoJSON fails it.
		req, _ := http.NewRequest("GET", srv.URL+"/v1/gis/collections/sites/items", nil)
		bad := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/geo+json"}}, Request: req,
			Body: io.NopCloser(strings.NewReader(`{"type":"FeatureCollection","features":[{"type":"Feature","id":"x","geometry":{"type":"Point","coordinates":[1]},"properties":{}}]}`))}
		if ok, _ := v.ValidateHttpResponse(req, bad); ok {
			t.Error("the document accepts a feature whose point has one coordinate")
		}
	})

	t.Run("collections follow the profile", func(t *testing.T) {
		resp, b := clerk.do(t, "GET", "/v1/gis/collections", "", "")
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"id":"sites"`) || strings.Contains(string(b), "offices") {
			t.Errorf("clerk collections: %d %s", resp.StatusCode, b)
		}
		// The blind profile may list sites but not read their point.
		resp, b = clerk.do(t, "GET", "/v1/gis/collections?accessProfile=blind", "", "")
		if resp.StatusCode != 200 || strings.Contains(string(b), `"id":"sites"`) {
			t.Errorf("blind collections: %d %s", resp.StatusCode, b)
		}
		// A profile the package does not declare is concealed, as on every
		// other route, not an empty list.
		clerk.refused(t, "/v1/gis/collections?accessProfile=no-such-profile", 404, "resource.not_found")
		anon.refused(t, "/v1/gis/collections?accessProfile=no-such-profile", 404, "resource.not_found")
		clerk.refused(t, "/v1/gis/collections/sites?accessProfile=blind", 404, "resource.not_found")
		clerk.refused(t, "/v1/gis/collections/sites/items?accessProfile=blind", 404, "resource.not_found")
		// Without a token: the anonymous profile, by name.
		resp, b = anon.do(t, "GET", "/v1/gis/collections", "", "")
		if resp.StatusCode != 200 || strings.Contains(string(b), `"id":"sites"`) {
			t.Errorf("anonymous default collections: %d %s", resp.StatusCode, b)
		}
		resp, b = anon.do(t, "GET", "/v1/gis/collections?accessProfile=public", "", "")
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"href":"/v1/gis/collections/sites/items?accessProfile=public"`) {
			t.Errorf("public collections: %d %s", resp.StatusCode, b)
		}
		resp, b = clerk.do(t, "GET", "/v1/gis/collections/sites", "", "")
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"itemType":"feature"`) {
			t.Errorf("collection: %d %s", resp.StatusCode, b)
		}
		anon.refused(t, "/v1/gis/collections/sites", 404, "resource.not_found")
		anon.refused(t, "/v1/gis/collections/sites/items", 404, "resource.not_found")
		anon.refused(t, "/v1/gis/collections/offices", 404, "resource.not_found")
		clerk.refused(t, "/v1/gis/collections/offices/items", 404, "resource.not_found")
		forged.refused(t, "/v1/gis/collections", 401, "authentication.refused")
		forged.refused(t, "/v1/gis/collections/sites/items", 401, "authentication.refused")
		forged.refused(t, "/v1/gis/collections/sites/items?accessProfile=public", 401, "authentication.refused")
	})

	t.Run("items under the row boundary", func(t *testing.T) {
		all := byID("paris", "berlin", "edge", "fiji", "samoa", "pole", "nowhere")
		if got := clerk.featureNames(t, "/v1/gis/collections/sites/items"); got != all {
			t.Errorf("items: %s, want %s", got, all)
		}
		fc := clerk.features(t, "/v1/gis/collections/sites/items?bbox=2,48,3,49")
		if len(fc.Features) != 1 || fc.Features[0].ID != strings.TrimPrefix(ids["paris"], "/v1/records/sites/") ||
			fc.Features[0].Geometry == nil || !slices.Equal(fc.Features[0].Geometry.Coordinates, []float64{2.35, 48.85}) ||
			fc.Features[0].Properties["district"] != "north" || fc.Features[0].Properties["location"] != nil || len(fc.Features[0].Properties) != 2 {
			t.Errorf("paris: %+v", fc)
		}
		// The anonymous profile reads the point only, everywhere.
		fc = anon.features(t, "/v1/gis/collections/sites/items?accessProfile=public&bbox=2,48,3,49")
		if len(fc.Features) != 2 || len(fc.Features[0].Properties) != 0 {
			t.Errorf("public: %+v", fc)
		}
	})

	t.Run("bbox", func(t *testing.T) {
		for bbox, want := range map[string]string{
			"0,40,10,50":              byID("paris", "edge"),
			"10,50,20,60":             byID("berlin", "edge"),
			"10,50,10,50":             "edge",
			"170,-30,-170,0":          byID("fiji", "samoa"),
			"179.5,-17.7,-171.8,-10":  byID("fiji", "samoa"),
			"179.6,-90,-171.9,90":     "",
			"-180,-90,180,90":         byID("paris", "berlin", "edge", "fiji", "samoa", "pole"),
			"-1,89,1,90":              "pole",
			"-0.0,89.000,0.00,90":     "pole",
			"100.5,-0.25,100.75,0.25": "",
		} {
			if got := clerk.featureNames(t, "/v1/gis/collections/sites/items?bbox="+url.QueryEscape(bbox)); got != want {
				t.Errorf("bbox %s: %q, want %q", bbox, got, want)
			}
			var names []string
			path := "/v1/records/sites?$top=1&bbox=" + url.QueryEscape(bbox)
			for path != "" {
				p := clerk.page(t, path)
				for _, it := range p.Items {
					names = append(names, fmt.Sprint(it.DomainData["name"]))
				}
				path = ""
				if p.PageInfo.NextCursor != nil {
					path = "/v1/records/sites?$skiptoken=" + url.QueryEscape(*p.PageInfo.NextCursor)
				}
			}
			if got := strings.Join(names, ","); got != want {
				t.Errorf("records bbox %s: %q, want %q", bbox, got, want)
			}
		}
		for _, bad := range []string{"", "1,2,3", "1,2,3,4,5", "181,0,182,1", "-181,0,0,1", "0,-91,1,0", "0,0,1,91",
			"0,10,1,5", "1e1,0,20,1", "0x1,0,2,1", " 1,0,2,1", "1,0,2,1 ", "+1,0,2,1", "1.,0,2,1", ".5,0,2,1", "NaN,0,1,1", "Inf,0,1,1",
			"a,b,c,d", "1,,2,3", strings.Repeat("1", 40) + ",0,1,1"} {
			clerk.refused(t, "/v1/gis/collections/sites/items?bbox="+url.QueryEscape(bad), 400, "query.invalid")
			clerk.refused(t, "/v1/records/sites?bbox="+url.QueryEscape(bad), 400, "query.invalid")
		}
		clerk.refused(t, "/v1/gis/collections/sites/items?bbox=0,0,1,1&bbox=0,0,1,1", 400, "query.invalid")
		// bbox is an option of point entities only, and of profiles that read the point.
		clerk.refused(t, "/v1/records/offices?bbox=0,0,1,1", 400, "query.invalid")
		clerk.refused(t, "/v1/records/sites?accessProfile=blind&bbox=0,0,1,1", 400, "query.invalid")
	})

	t.Run("limit and cursors", func(t *testing.T) {
		all := byID("paris", "berlin", "edge", "fiji", "samoa", "pole", "nowhere")
		for _, limit := range []string{"1", "2", "3", "7", "10000"} {
			if got := clerk.featureNames(t, "/v1/gis/collections/sites/items?limit="+limit); got != all {
				t.Errorf("limit %s: %s, want %s", limit, got, all)
			}
		}
		fc := clerk.features(t, "/v1/gis/collections/sites/items?limit=2&bbox=-180,-90,180,90")
		next := fc.next()
		if len(fc.Features) != 2 || !strings.HasPrefix(next, "/v1/gis/collections/sites/items?cursor=") {
			t.Fatalf("page: %+v", fc)
		}
		if got := clerk.featureNames(t, next); got != strings.Join(strings.Split(byID("paris", "berlin", "edge", "fiji", "samoa", "pole"), ",")[2:], ",") {
			t.Errorf("after the cursor: %s", got)
		}
		for _, bad := range []string{"0", "10001", "-1", "01", "1.5", "x", ""} {
			clerk.refused(t, "/v1/gis/collections/sites/items?limit="+bad, 400, "query.invalid")
		}
		for _, bad := range []string{"$top=5", "$filter=name%20eq%20'x'", "bbox=0,0,1,1&f=json", "crs=x"} {
			clerk.refused(t, "/v1/gis/collections/sites/items?"+bad, 400, "query.invalid")
		}
		tok := strings.TrimPrefix(next, "/v1/gis/collections/sites/items?cursor=")
		// A cursor comes alone, belongs to this read, this profile and this caller.
		clerk.refused(t, next+"&limit=2", 400, "query.invalid")
		clerk.refused(t, next+"&bbox=0,0,1,1", 400, "query.invalid")
		clerk.refused(t, "/v1/records/sites?$skiptoken="+tok, 400, "query.cursor_invalid")
		clerk.refused(t, next+"&accessProfile=public", 400, "query.cursor_invalid")
		clerk.refused(t, next[:len(next)-3]+"AAA", 400, "query.cursor_invalid")
		clerk.refused(t, "/v1/gis/collections/sites/items?cursor=", 400, "query.cursor_invalid")
		p := clerk.page(t, "/v1/records/sites?$top=1&bbox=-180,-90,180,90")
		clerk.refused(t, "/v1/gis/collections/sites/items?cursor="+url.QueryEscape(*p.PageInfo.NextCursor), 400, "query.cursor_invalid")
		// The anonymous caller's next link keeps its profile.
		fc = anon.features(t, "/v1/gis/collections/sites/items?accessProfile=public&limit=1")
		if n := fc.next(); !strings.HasSuffix(n, "&accessProfile=public") || len(anon.features(t, n).Features) != 1 {
			t.Errorf("public next: %q", n)
		}
	})
}
