package query

import (
	"strconv"
	"strings"

	"github.com/registrum/registrum/model"
)

// OptBBox is the bounding box option of a collection read of an entity
// served on the spatial adapter (one with a geojson geometry field).
const OptBBox = "bbox"

// MaxBBoxBytes bounds the text of a bbox option.
const MaxBBoxBytes = 128

// BBox is a bounding box in CRS84 degrees: west, south, east, north. Edges
// are inclusive. West greater than east is a box that crosses the
// antimeridian: it covers longitudes from west to 180 and from -180 to east.
type BBox struct {
	West, South, East, North float64
}

// CrossesAntimeridian reports whether the box wraps past longitude 180.
func (b BBox) CrossesAntimeridian() bool { return b.West > b.East }

// String returns the canonical text of the box: four shortest decimal
// numbers joined by commas, negative zero written as 0.
func (b BBox) String() string {
	var s [4]string
	for i, v := range [4]float64{b.West, b.South, b.East, b.North} {
		if v == 0 {
			v = 0 // -0 → 0
		}
		s[i] = strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strings.Join(s[:], ",")
}

// ParseBBox parses the text of a bbox option: exactly four decimal numbers
// (an optional minus sign, digits, an optional fraction; no exponent, no
// spaces) separated by commas, in the order west, south, east, north.
// Longitudes lie in -180..180, latitudes in -90..90, south is at most north;
// west greater than east crosses the antimeridian. Every refusal is an
// *Error of kind Invalid naming the option.
func ParseBBox(s string) (BBox, error) {
	if len(s) > MaxBBoxBytes {
		return BBox{}, invalid("%s is longer than %d bytes.", OptBBox, MaxBBoxBytes)
	}
	parts := strings.Split(s, ",")
	if len(parts) != 4 {
		return BBox{}, invalid("%s must be four comma-separated CRS84 degrees: west,south,east,north.", OptBBox)
	}
	var v [4]float64
	for i, p := range parts {
		if !decimalText(p) {
			return BBox{}, invalid("%s: %s is not a decimal number of degrees.", OptBBox, echo(p))
		}
		x, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return BBox{}, invalid("%s: %s is not a decimal number of degrees.", OptBBox, echo(p))
		}
		v[i] = x
	}
	b := BBox{West: v[0], South: v[1], East: v[2], North: v[3]}
	switch {
	case b.West < -180 || b.West > 180 || b.East < -180 || b.East > 180:
		return BBox{}, invalid("%s: longitudes (west, east) must lie from -180 to 180.", OptBBox)
	case b.South < -90 || b.South > 90 || b.North < -90 || b.North > 90:
		return BBox{}, invalid("%s: latitudes (south, north) must lie from -90 to 90.", OptBBox)
	case b.South > b.North:
		return BBox{}, invalid("%s: south must not lie north of north.", OptBBox)
	}
	return b, nil
}

// decimalText reports whether s is -?[0-9]+(\.[0-9]+)? of at most 32 bytes.
func decimalText(s string) bool {
	if len(s) > 32 {
		return false
	}
	s = strings.TrimPrefix(s, "-")
	whole, frac, dot := strings.Cut(s, ".")
	return digits(whole) && (!dot || digits(frac))
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// bboxAllowed reports whether a read of e may carry a bbox: e is served on
// the spatial adapter and the caller may read its geometry field.
func bboxAllowed(e *model.Entity, a Allowed) bool {
	return e.GeoJSON != nil && has(a.Readable, e.GeoJSON.GeometryField)
}

// parseBBoxOption parses the canonical bbox text of a read of e.
func parseBBoxOption(e *model.Entity, a Allowed, s string) (*BBox, string, error) {
	if s == "" {
		return nil, "", nil
	}
	if !bboxAllowed(e, a) {
		return nil, "", invalid("%s is not a query option of this read for this access profile: the entity has no readable geometry field.", OptBBox)
	}
	b, err := ParseBBox(s)
	if err != nil {
		return nil, "", err
	}
	return &b, b.String(), nil
}
