package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// GISProfile is the one profile the spatial adapter declares.
const GISProfile = "engine-gis-bounded-crs84-point-bbox-v1"

// Point is a GeoJSON point in CRS84: longitude, then latitude.
type Point struct {
	Type        string     `json:"type"`
	Coordinates [2]float64 `json:"coordinates"`
}

// NewPoint returns the GeoJSON point at lon, lat, the wire value of a
// crs84-point field.
func NewPoint(lon, lat float64) Point { return Point{Type: "Point", Coordinates: [2]float64{lon, lat}} }

// Feature is one record on the spatial adapter.
type Feature struct {
	Type string `json:"type"`
	// ID is the record id.
	ID string `json:"id"`
	// Geometry is nil for a record without a point.
	Geometry *Point `json:"geometry"`
	// Properties are the other readable fields under their apiName.
	Properties json.RawMessage `json:"properties"`
}

// Link is a link of a spatial adapter document.
type Link struct {
	Rel  string `json:"rel"`
	Href string `json:"href"`
	Type string `json:"type,omitempty"`
}

// FeatureCollection is one page of features.
type FeatureCollection struct {
	Type           string    `json:"type"`
	Features       []Feature `json:"features"`
	NumberReturned int       `json:"numberReturned"`
	Links          []Link    `json:"links"`
}

// Next is the href of the next page, "" on the last.
func (fc *FeatureCollection) Next() string {
	for _, l := range fc.Links {
		if l.Rel == "next" {
			return l.Href
		}
	}
	return ""
}

// Collection describes one spatial collection.
type Collection struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description"`
	ItemType    string `json:"itemType"`
	Links       []Link `json:"links"`
}

// Conformance reads GET /v1/gis/conformance: the profiles the adapter declares.
func (c *Client) Conformance(ctx context.Context) ([]string, error) {
	resp, err := c.do(ctx, &request{method: http.MethodGet, path: "/v1/gis/conformance"}, "")
	if err != nil {
		return nil, err
	}
	var out struct {
		ConformsTo []string `json:"conformsTo"`
	}
	return out.ConformsTo, decode(resp, &out)
}

// Collections reads the spatial collections the caller's profile may list.
func (c *Client) Collections(ctx context.Context, opts ...CallOption) ([]Collection, error) {
	o := options(opts)
	resp, err := c.do(ctx, &request{method: http.MethodGet, path: "/v1/gis/collections"}, o.profile)
	if err != nil {
		return nil, err
	}
	var out struct {
		Collections []Collection `json:"collections"`
	}
	return out.Collections, decode(resp, &out)
}

// FeatureQuery is the options of a features read.
type FeatureQuery struct {
	// BBox keeps the features inside the box.
	BBox *BBox
	// Limit is the page size, 1 to 10000 (0: the host's default).
	Limit int
}

// FeaturePage reads the first page of a collection's features.
func (c *Client) FeaturePage(ctx context.Context, collection string, q FeatureQuery, opts ...CallOption) (*FeatureCollection, error) {
	v := url.Values{}
	if q.BBox != nil {
		v.Set("bbox", q.BBox.String())
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return c.features(ctx, "/v1/gis/collections/"+url.PathEscape(collection)+"/items", v, options(opts))
}

// FeaturePageAt reads the page at an href a page linked to (its next link).
func (c *Client) FeaturePageAt(ctx context.Context, href string, opts ...CallOption) (*FeatureCollection, error) {
	return c.features(ctx, href, nil, options(opts))
}

func (c *Client) features(ctx context.Context, path string, q url.Values, o call) (*FeatureCollection, error) {
	resp, err := c.do(ctx, &request{method: http.MethodGet, path: path, query: q}, o.profile)
	if err != nil {
		return nil, err
	}
	var fc FeatureCollection
	return &fc, decode(resp, &fc)
}

// Features iterates over every feature of a collection matching q,
// following the next links the host gives.
func (c *Client) Features(ctx context.Context, collection string, q FeatureQuery, opts ...CallOption) iter.Seq2[Feature, error] {
	return func(yield func(Feature, error) bool) {
		fc, err := c.FeaturePage(ctx, collection, q, opts...)
		for {
			if err != nil {
				yield(Feature{}, err)
				return
			}
			for _, f := range fc.Features {
				if !yield(f, nil) {
					return
				}
			}
			next := fc.Next()
			if next == "" {
				return
			}
			fc, err = c.FeaturePageAt(ctx, next, opts...)
		}
	}
}
