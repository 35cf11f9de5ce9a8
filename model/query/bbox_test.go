package query

import (
	"strings"
	"testing"

	"github.com/registrum/registrum/model"
)

func TestParseBBoxBoundsAndCanonicalForm(t *testing.T) {
	for in, want := range map[string]string{
		"-180,-90,180,90":  "-180,-90,180,90",
		"-0,-0.0,0.000,00": "0,0,0,0",
		"170,-20,-170,20":  "170,-20,-170,20", // crosses the antimeridian
		"10.50,1,10.5,1":   "10.5,1,10.5,1",
		"1,2,3":            "", // three numbers
	} {
		b, err := ParseBBox(in)
		if want == "" {
			if err == nil {
				t.Errorf("%s accepted", in)
			}
			continue
		}
		if err != nil || b.String() != want {
			t.Errorf("%s: %v %v, want %s", in, b, err, want)
		}
	}
	if b, _ := ParseBBox("170,-20,-170,20"); !b.CrossesAntimeridian() {
		t.Error("170..-170 does not cross the antimeridian")
	}
	if b, _ := ParseBBox("-170,-20,170,20"); b.CrossesAntimeridian() {
		t.Error("-170..170 crosses the antimeridian")
	}
	// A number of 32 bytes is read, of 33 refused; the whole option of 128
	// bytes is read, of 129 refused.
	n32 := "1." + strings.Repeat("0", 30)
	if _, err := ParseBBox(n32 + ",0,2,1"); err != nil {
		t.Errorf("a 32-byte number: %v", err)
	}
	if _, err := ParseBBox(n32 + "0,0,2,1"); err == nil {
		t.Error("a 33-byte number accepted")
	}
	n31 := "1." + strings.Repeat("0", 29)
	at128 := strings.Join([]string{n32, n32, n31 + "0", "1." + strings.Repeat("0", 27)}, ",")
	if len(at128) != 128 {
		t.Fatalf("%d bytes", len(at128))
	}
	if _, err := ParseBBox(at128); err != nil {
		t.Errorf("128 bytes: %v", err)
	}
	if _, err := ParseBBox(at128 + "0"); err == nil || !strings.Contains(err.Error(), "longer than 128 bytes") {
		t.Errorf("129 bytes: %v", err)
	}
	// Only an entity served on the adapter, and a grant reading its point, take bbox.
	e := &model.Entity{ID: "site", Route: "sites", Fields: []*model.Field{{ID: "at", APIName: "at", Type: model.TypeCRS84Point}}}
	if _, err := Parse(e, Allowed{Readable: []string{"at"}}, RawOptions{OptBBox: {"0,0,1,1"}}); err == nil {
		t.Error("bbox on an entity without geojson")
	}
	e.GeoJSON = &model.GeoJSON{GeometryField: "at"}
	if _, err := Parse(e, Allowed{}, RawOptions{OptBBox: {"0,0,1,1"}}); err == nil {
		t.Error("bbox without the point readable")
	}
	q, err := Parse(e, Allowed{Readable: []string{"at"}}, RawOptions{OptBBox: {"-0,0,1.0,1"}})
	if err != nil || q.BBox == nil || q.Canonical().BBox != "0,0,1,1" {
		t.Fatalf("bbox: %+v %v", q, err)
	}
	plain, _ := Parse(e, Allowed{Readable: []string{"at"}}, RawOptions{})
	if plain.Digest() == q.Digest() {
		t.Error("the bbox is not part of the query digest a cursor binds")
	}
}
