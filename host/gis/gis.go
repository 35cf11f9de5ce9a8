// Package gis is the record host's spatial adapter, /v1/gis: the records
// of entities with a geojson geometry field as GeoJSON feature collections,
// read under the access profiles, grants and row boundaries of the record
// list (host/records). It knows nothing of HTTP; refusals are problem.Error
// values.
package gis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/cursor"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/model/values"
)

// The spatial adapter serves the records of entities with a geojson
// geometry field as GeoJSON feature collections under /v1/gis, with the
// profile, grant and row-boundary rules of the record list: the list
// operation, its readable fields and its boundaries. A profile that cannot
// read an entity's geometry field does not see its collection. The adapter
// declares its own profile and no OGC API Features conformance, and has no
// query engine beyond bbox.
const (
	// ConformanceProfile is the one profile /v1/gis/conformance declares.
	ConformanceProfile = "engine-gis-bounded-crs84-point-bbox-v1"
	// DefaultLimit is the page size of an items read without limit.
	DefaultLimit = 100
	// MaxLimit is the largest limit.
	MaxLimit = 10000
	// MediaType is the content type of a feature collection.
	MediaType = "application/geo+json"

	gisRead     = "gis"
	gisLimit    = "limit"
	gisCursor   = "cursor"
	gisBase     = "/v1/gis"
	gisPrefix   = gisBase + "/collections/"
	openAPIType = "application/vnd.oai.openapi+json"
)

// Options configure the spatial adapter.
type Options struct {
	// Records is the record kernel whose grants, scopes and cursors the
	// adapter reads with. Required.
	Records *records.Service
}

// Service serves the spatial adapter of one package.
type Service struct {
	records *records.Service
	pkg     *model.Package
}

// New returns the spatial adapter over o.Records.
func New(o Options) (*Service, error) {
	if o.Records == nil {
		return nil, errors.New("gis: Options.Records is required")
	}
	return &Service{records: o.Records, pkg: o.Records.Package()}, nil
}

// gisLink is one link of a spatial adapter document.
type gisLink struct {
	Rel   string `json:"rel"`
	Href  string `json:"href"`
	Type  string `json:"type,omitempty"`
	Title string `json:"title,omitempty"`
}

// Landing is GET /v1/gis: the adapter's links. It is public, like the
// OpenAPI document it points at.
func (s *Service) Landing() ([]byte, error) {
	return marshalDocument(struct {
		Title       string    `json:"title"`
		Description string    `json:"description"`
		Links       []gisLink `json:"links"`
	}{
		Title:       "Spatial adapter of registry " + s.pkg.Registry.ID,
		Description: "GeoJSON feature collections of the registry's point entities, read under the access profiles of /v1/records; declares " + ConformanceProfile + " only.",
		Links: []gisLink{
			{Rel: "self", Href: gisBase, Type: "application/json"},
			{Rel: "service-desc", Href: gisBase + "/api", Type: openAPIType},
			{Rel: "conformance", Href: gisBase + "/conformance", Type: "application/json"},
			{Rel: "data", Href: gisBase + "/collections", Type: "application/json"},
		},
	})
}

// Conformance is GET /v1/gis/conformance: the declared profile only.
func Conformance() []byte {
	return []byte(`{"conformsTo":["` + ConformanceProfile + `"]}`)
}

// gisCollection is the description of one spatial collection: no extent,
// no CRS list (CRS84 is the only one), no queryables.
type gisCollection struct {
	ID          string    `json:"id"`
	Title       string    `json:"title"`
	Description string    `json:"description"`
	ItemType    string    `json:"itemType"`
	Links       []gisLink `json:"links"`
}

func (s *Service) gisCollection(e *model.Entity, profile string) gisCollection {
	items := gisPrefix + e.Route + "/items" + profileQuery(profile, "?")
	return gisCollection{
		ID: e.Route, Title: e.ID, ItemType: "feature",
		Description: "Records of " + e.ID + " as GeoJSON points of field " + e.Field(e.GeoJSON.GeometryField).APIName + ".",
		Links: []gisLink{
			{Rel: "self", Href: gisPrefix + e.Route + profileQuery(profile, "?"), Type: "application/json"},
			{Rel: "items", Href: items, Type: MediaType},
		},
	}
}

// profileQuery returns the accessProfile parameter to carry in links, "" when
// the caller used the route's default.
func profileQuery(profile, sep string) string {
	if profile == "" {
		return ""
	}
	return sep + "accessProfile=" + url.QueryEscape(profile)
}

// Entity returns the entity whose spatial collection is served at
// route, or the concealed not-found.
func (s *Service) Entity(route string) (*model.Entity, error) {
	e := s.pkg.EntityByRoute(route)
	if e == nil || e.GeoJSON == nil {
		return nil, problem.NotFound()
	}
	return e, nil
}

// gisGrant decides the list operation on e and requires its geometry field
// to be readable; otherwise the collection is concealed.
func (s *Service) gisGrant(ctx context.Context, c records.Call, e *model.Entity) (*access.Grant, error) {
	grant, err := s.records.Decide(ctx, c, model.OpList, e)
	if err != nil {
		return nil, err
	}
	if !grant.Readable.Has(e.GeoJSON.GeometryField) {
		return nil, problem.NotFound()
	}
	return grant, nil
}

// Collections is GET /v1/gis/collections: the spatial collections the
// caller's profile may list (an empty list when none); a presented token
// that is rejected is refused.
func (s *Service) Collections(ctx context.Context, c records.Call) ([]byte, error) {
	out := struct {
		Collections []gisCollection `json:"collections"`
		Links       []gisLink       `json:"links"`
	}{Collections: []gisCollection{}, Links: []gisLink{{Rel: "self", Href: gisBase + "/collections" + profileQuery(c.Profile, "?"), Type: "application/json"}}}
	for _, e := range s.pkg.Entities {
		if e.GeoJSON == nil {
			continue
		}
		if _, err := s.gisGrant(ctx, c, e); err != nil {
			var pe *problem.Error
			if errors.As(err, &pe) && pe.Code == problem.ResourceNotFound {
				continue
			}
			return nil, err
		}
		out.Collections = append(out.Collections, s.gisCollection(e, c.Profile))
	}
	if c.Profile != "" && s.pkg.ProfileByID(c.Profile) == nil {
		// An unknown profile is concealed like on every other route (after
		// the token was checked above, as Decide orders it), not an empty
		// list.
		return nil, problem.NotFound()
	}
	return marshalDocument(out)
}

// CollectionDocument is GET /v1/gis/collections/{collection}.
func (s *Service) CollectionDocument(ctx context.Context, c records.Call, e *model.Entity) ([]byte, error) {
	if _, err := s.gisGrant(ctx, c, e); err != nil {
		return nil, err
	}
	return marshalDocument(s.gisCollection(e, c.Profile))
}

// gisQuery turns the options of an items read (bbox, limit, cursor; the
// edge removes accessProfile) into the raw options of the query layer,
// refusing anything else. A cursor comes alone.
func gisQuery(opts query.RawOptions) (query.Canonical, string, error) {
	names := make([]string, 0, len(opts))
	for n := range opts {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		switch n {
		case query.OptBBox, gisLimit, gisCursor:
		default:
			return query.Canonical{}, "", query.Errorf(query.Invalid, "%q is not a query option of this read: bbox, limit and cursor are.", query.Shorten(n))
		}
		if len(opts[n]) != 1 {
			return query.Canonical{}, "", query.Errorf(query.Invalid, "%s must be given exactly once.", n)
		}
	}
	if tok, ok := opts[gisCursor]; ok {
		if len(opts) > 1 {
			return query.Canonical{}, "", query.Errorf(query.Invalid, "cursor cannot be combined with bbox or limit: a cursor carries the whole query and is sent alone, with only accessProfile.")
		}
		if tok[0] == "" {
			return query.Canonical{}, "", query.Errorf(query.CursorInvalid, "The cursor is empty.")
		}
		return query.Canonical{}, tok[0], nil
	}
	raw := query.Canonical{Top: DefaultLimit}
	if v, ok := opts[gisLimit]; ok {
		n, err := query.ParseTop(gisLimit, v[0], MaxLimit)
		if err != nil {
			return query.Canonical{}, "", err
		}
		raw.Top = n
	}
	if v, ok := opts[query.OptBBox]; ok {
		if v[0] == "" {
			return query.Canonical{}, "", query.Errorf(query.Invalid, "bbox is empty.")
		}
		raw.BBox = v[0]
	}
	return raw, "", nil
}

// Items is GET /v1/gis/collections/{collection}/items: one page of the
// records of e the caller may list, as a GeoJSON feature collection in
// record id order, with a next link carrying a sealed cursor bound to this
// read, the caller, the profile and the package revision. Features carry
// the record id, the point (null when the record has none; never with a
// bbox) and the other readable fields as properties.
func (s *Service) Items(ctx context.Context, c records.Call, e *model.Entity, opts query.RawOptions) ([]byte, error) {
	grant, err := s.gisGrant(ctx, c, e)
	if err != nil {
		return nil, err
	}
	allowed := query.Allowed{Readable: grant.Readable.IDs(), MaxTop: MaxLimit}
	caller := cursor.Caller{Principal: grant.PrincipalReference, Profile: grant.Profile, PackageRevision: s.pkg.Revision, Read: gisRead}
	now := time.Now()
	raw, tok, err := gisQuery(opts)
	if err != nil {
		return nil, records.QueryProblem(err)
	}
	var q *query.Query
	if tok != "" {
		q, err = s.records.Sealer().Open(tok, e, allowed, caller, now)
	} else {
		q, err = query.Build(e, allowed, raw)
	}
	if err != nil {
		return nil, records.QueryProblem(err)
	}
	recs, next, err := s.records.Page(ctx, e, grant, q, caller, now, nil)
	if err != nil {
		return nil, err
	}
	geom := e.Field(e.GeoJSON.GeometryField)
	// A feature's properties are the selected fields but its geometry,
	// written in the order of their names as domainData's members are.
	props := make([]*model.Field, 0, len(q.Select))
	for _, f := range q.Select {
		if f != geom {
			props = append(props, f)
		}
	}
	slices.SortFunc(props, func(x, y *model.Field) int { return strings.Compare(x.APIName, y.APIName) })
	b := make([]byte, 0, 256+200*len(recs))
	b = append(b, `{"type":"FeatureCollection","features":[`...)
	for i, rec := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"Feature","id":`...)
		b = records.AppendJSONString(b, rec.ID)
		b = append(b, `,"geometry":`...)
		raw, _ := rec.Value(geom).(json.RawMessage)
		if raw == nil {
			b = append(b, "null"...)
		} else {
			b = appendCompact(b, raw)
		}
		b = append(b, `,"properties":{`...)
		for j, f := range props {
			if j > 0 {
				b = append(b, ',')
			}
			b = records.AppendJSONString(b, f.APIName)
			b = append(b, ':')
			if b, err = records.AppendValue(b, values.Encode(f, rec.Value(f))); err != nil {
				return nil, fmt.Errorf("gis: render feature property %q: %w", f.APIName, err)
			}
		}
		b = append(b, "}}"...)
	}
	b = append(b, `],"numberReturned":`...)
	b = fmt.Appendf(b, "%d", len(recs))
	b = append(b, `,"links":[`...)
	items := gisPrefix + e.Route + "/items"
	self := items
	if enc := encodeGISOptions(opts); enc != "" {
		self += "?" + enc
	}
	if self == items {
		self += profileQuery(c.Profile, "?")
	} else {
		self += profileQuery(c.Profile, "&")
	}
	b = appendLink(b, "self", self)
	if next != nil {
		b = append(b, ',')
		b = appendLink(b, "next", items+"?cursor="+url.QueryEscape(*next)+profileQuery(c.Profile, "&"))
	}
	b = append(b, "]}"...)
	return b, nil
}

// appendCompact appends src, a JSON text the database wrote (a jsonb
// value's text form), without the white space between its tokens: what
// json.Compact writes for it, without json.Compact's validation (the
// database's JSON is valid), which took a seventh of a page of 1,000
// features.
func appendCompact(dst, src []byte) []byte {
	// The text between two white-space bytes outside strings is copied in
	// one append.
	dst = slices.Grow(dst, len(src))
	from, inString := 0, false
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			dst = append(dst, src[from:i]...)
			from = i + 1
		}
	}
	return append(dst, src[from:]...)
}

// encodeGISOptions re-encodes the options of a read for its self link.
func encodeGISOptions(opts query.RawOptions) string { return url.Values(opts).Encode() }

func appendLink(b []byte, rel, href string) []byte {
	b = append(b, `{"rel":`...)
	b = records.AppendJSONString(b, rel)
	b = append(b, `,"href":`...)
	b = canonjson.AppendString(b, href) // a URL's '&' stays as it is, never \u0026
	b = append(b, `,"type":"`+MediaType+`"}`...)
	return b
}

// marshalDocument writes one of the adapter's JSON documents. Links keep
// their '&', '<' and '>' as they are: the documents are served as
// application/json, never embedded in HTML, and clients compare hrefs.
func marshalDocument(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("gis: render document: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
