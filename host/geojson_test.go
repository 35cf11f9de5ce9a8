package host_test

import (
	"bytes"
	"os"
	"sync"
	"testing"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geojson"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

var geojsonSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	raw, err := os.ReadFile("testdata/geojson/rfc7946.schema.json")
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	const url = "https://registrum.test/schemas/rfc7946/feature-collection.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
})

// geojsonCheck holds a spatial adapter answer to two consumers that know
// nothing of Registrum: a JSON Schema of RFC 7946 feature collections
// (testdata/geojson) checked by a JSON Schema validator, and the GeoJSON
// decoder of a geometry library, which must read every feature as a point
// (or no geometry) in CRS84 degrees.
func geojsonCheck(t *testing.T, body []byte) {
	t.Helper()
	sch, err := geojsonSchema()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if err := sch.Validate(doc); err != nil {
		t.Fatalf("not an RFC 7946 feature collection: %v\n%s", err, body)
	}
	fc, err := geojson.UnmarshalFeatureCollection(body)
	if err != nil {
		t.Fatalf("orb/geojson cannot read the feature collection: %v", err)
	}
	for _, f := range fc.Features {
		if f.ID == nil {
			t.Errorf("orb/geojson reads a feature without id")
		}
		if f.Geometry == nil {
			continue
		}
		p, ok := f.Geometry.(orb.Point)
		if !ok {
			t.Errorf("orb/geojson reads a %T, want a point", f.Geometry)
			continue
		}
		if p.Lon() < -180 || p.Lon() > 180 || p.Lat() < -90 || p.Lat() > 90 {
			t.Errorf("point %v is outside CRS84 degrees", p)
		}
	}
}

// TestGeoJSONCheckRefusesWhatIsNotGeoJSON keeps the consumers honest: the
// schema refuses collections that break RFC 7946.
func TestGeoJSONCheckRefusesWhatIsNotGeoJSON(t *testing.T) {
	sch, err := geojsonSchema()
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`{"type":"FeatureCollection"}`,
		`{"type":"Featurecollection","features":[]}`,
		`{"type":"FeatureCollection","features":[{"type":"Feature","properties":{}}]}`,
		`{"type":"FeatureCollection","features":[{"type":"Feature","geometry":null}]}`,
		`{"type":"FeatureCollection","features":[{"type":"Feature","id":{},"geometry":null,"properties":{}}]}`,
		`{"type":"FeatureCollection","features":[{"type":"Feature","geometry":{"type":"Point","coordinates":[1]},"properties":{}}]}`,
		`{"type":"FeatureCollection","features":[{"type":"Feature","geometry":{"type":"Point","coordinates":["1","2"]},"properties":{}}]}`,
		`{"type":"FeatureCollection","features":[{"type":"Feature","geometry":{"type":"Pt","coordinates":[1,2]},"properties":{}}]}`,
		`{"type":"FeatureCollection","crs":{},"features":[]}`,
	} {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(bad)))
		if err != nil {
			t.Fatal(err)
		}
		if sch.Validate(doc) == nil {
			t.Errorf("schema accepts %s", bad)
		}
	}
}
