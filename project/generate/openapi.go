package generate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/registrum/registrum/model"
)

// OpenAPIVersion is the OpenAPI version of the generated document.
const OpenAPIVersion = "3.1.0"

// Route is one operation the package enables: an HTTP method on a path of
// the record host. Paths are literal for the package (entity routes, slot
// ids, action ids and collections are spelled out); parameters in braces are
// record, revision, run and chunk identifiers.
type Route struct {
	// Method is the HTTP method in upper case.
	Method string
	// Path is the path as the OpenAPI document lists it.
	Path string
	// OperationID is the operation's id in the OpenAPI document.
	OperationID string
	// Capability is the id of the capability the route belongs to (see
	// Capabilities).
	Capability string
	// Served is true when the record host serves the route.
	Served bool
}

// Routes returns every route the package enables that the record host
// serves, and no other, sorted by path then method. It is the path
// inventory of the OpenAPI document.
func Routes(p *model.Package) ([]Route, error) {
	ops, err := operations(p)
	if err != nil {
		return nil, err
	}
	return routesOf(ops), nil
}

// DeclaredRoutes returns every route the package declares, served or not
// (Route.Served tells), sorted by path then method.
func DeclaredRoutes(p *model.Package) ([]Route, error) {
	ops, err := allOperations(p)
	if err != nil {
		return nil, err
	}
	return routesOf(ops), nil
}

func routesOf(ops []operation) []Route {
	out := make([]Route, len(ops))
	for i, o := range ops {
		out[i] = Route{Method: strings.ToUpper(o.method), Path: o.path, OperationID: o.id, Capability: o.capability, Served: served(o.capability)}
	}
	return out
}

// OpenAPI returns the OpenAPI 3.1 document of the package: every route the
// package enables and the record host serves, with its parameters, request
// and response schemas and problem responses, and no other route. Routes of
// capabilities the host does not serve yet are left out (see Unserved).
func OpenAPI(p *model.Package) ([]byte, error) {
	ops, err := operations(p)
	if err != nil {
		return nil, err
	}
	return openAPI(p, ops)
}

// openAPI returns the document of the given operations.
func openAPI(p *model.Package, ops []operation) ([]byte, error) {
	comps, err := components(p)
	if err != nil {
		return nil, err
	}
	paths := obj{}
	for _, o := range ops {
		item, _ := paths[o.path].(obj)
		if item == nil {
			item = obj{}
			paths[o.path] = item
		}
		if _, dup := item[o.method]; dup {
			return nil, fmt.Errorf("generate: openapi: two operations for %s %s", strings.ToUpper(o.method), o.path)
		}
		item[o.method] = o.document()
	}
	security := []any{obj{"bearer": []any{}}}
	if hasAnonymousProfile(p) {
		security = append(security, obj{})
	}
	pruneComponents(paths, comps)
	tags := []any{
		obj{"name": "metadata", "description": "Registry metadata and published schemas."},
	}
	used := map[string]bool{}
	for _, o := range ops {
		used[o.tag] = true
	}
	if used["actions"] {
		tags = append(tags, obj{"name": "actions", "description": "Immediate actions."})
	}
	if used["gis"] {
		tags = append(tags, obj{"name": "gis", "description": "Spatial (GeoJSON) adapter."})
	}
	for _, e := range p.Entities {
		if used[e.ID] {
			tags = append(tags, obj{"name": e.ID, "description": "Records of entity " + e.ID + " at /v1/records/" + e.Route + "."})
		}
	}
	doc := obj{
		"servers":           []any{obj{"url": "/", "description": "The record host serving this package."}},
		"tags":              tags,
		"openapi":           OpenAPIVersion,
		"jsonSchemaDialect": JSONSchemaDialect,
		"info": obj{
			"title":       "Registry " + p.Registry.ID,
			"version":     p.Registry.Version,
			"description": "Record service of registry " + p.Registry.ID + ", exact for its compiled package.",
		},
		"security":   security,
		"paths":      paths,
		"components": comps,
	}
	b, err := encode(doc)
	if err != nil {
		return nil, fmt.Errorf("generate: openapi: %w", err)
	}
	return b, nil
}

// pruneComponents removes the components no operation reaches, directly or
// through other components, so the document holds only what the package uses.
func pruneComponents(paths, comps obj) {
	used := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case obj:
			for k, c := range t {
				if ref, ok := c.(string); ok && k == "$ref" && !used[ref] {
					used[ref] = true
					if target := componentAt(comps, ref); target != nil {
						walk(target)
					}
				}
				walk(c)
			}
		case []any:
			for _, c := range t {
				walk(c)
			}
		}
	}
	walk(paths)
	for kind, group := range comps {
		members, ok := group.(obj)
		if !ok || kind == "securitySchemes" {
			continue
		}
		for name := range members {
			if !used["#/components/"+kind+"/"+name] {
				delete(members, name)
			}
		}
	}
}

// componentAt returns the component a local reference names, or nil.
func componentAt(comps obj, ref string) any {
	rest, ok := strings.CutPrefix(ref, "#/components/")
	if !ok {
		return nil
	}
	kind, name, ok := strings.Cut(rest, "/")
	if !ok {
		return nil
	}
	group, _ := comps[kind].(obj)
	return group[name]
}

func hasAnonymousProfile(p *model.Package) bool {
	for _, pr := range p.Profiles {
		if pr.Anonymous {
			return true
		}
	}
	return false
}

// operation is one entry of the route inventory with its OpenAPI description.
type operation struct {
	method    string // lower case, as an OpenAPI path item key
	path      string
	id        string
	tag       string
	summary   string
	params    []any
	body      obj // requestBody, or nil
	responses obj
	noAuth    bool
	// capability is the id of the capability the route belongs to.
	capability string
	// entity and action name the declaration the route comes from.
	entity, action string
}

// refusalNote ends every operation's description.
const refusalNote = "Refusals are problem documents; whatever the caller may not see, and any route or method the package does not enable, answers the same 404 resource.not_found."

func (o operation) document() obj {
	d := obj{
		"operationId": o.id,
		"summary":     o.summary,
		"description": o.summary + " " + refusalNote,
		"tags":        []any{o.tag},
		"responses":   o.responses,
	}
	if len(o.params) > 0 {
		d["parameters"] = o.params
	}
	if o.body != nil {
		d["requestBody"] = o.body
	}
	if o.noAuth {
		d["security"] = []any{}
	}
	return d
}

// ref returns a JSON reference to a component.
func ref(kind, name string) obj { return obj{"$ref": "#/components/" + kind + "/" + name} }

// schemaRef returns a reference to a component schema.
func schemaRef(name string) obj { return ref("schemas", name) }

// paramRef returns a reference to a component parameter.
func paramRef(name string) obj { return ref("parameters", name) }

// problems returns the problem responses of the given statuses.
func problems(statuses ...int) obj {
	out := obj{}
	for _, s := range statuses {
		out[fmt.Sprint(s)] = ref("responses", problemResponses[s].name)
	}
	return out
}

// withProblems adds problem responses to a responses object, and the 429
// every /v1 route answers when the operator turns rate limits on.
func withProblems(r obj, statuses ...int) obj {
	for k, v := range problems(append(statuses, 429)...) {
		r[k] = v
	}
	return r
}

// jsonContent is a JSON media type map with one schema; records answer
// application/ld+json too when asked.
func jsonContent(schema obj, ld bool) obj {
	c := obj{"application/json": obj{"schema": schema}}
	if ld {
		c["application/ld+json"] = obj{"schema": schema}
	}
	return c
}

// response is a response with a JSON body (and JSON-LD when ld is set).
func response(description string, schema obj, ld bool, headers obj) obj {
	r := obj{"description": description, "content": jsonContent(schema, ld)}
	if headers != nil {
		r["headers"] = headers
	}
	return r
}

// jsonBody is a required JSON request body.
func jsonBody(schema obj) obj {
	return obj{"required": true, "content": obj{"application/json": obj{"schema": schema}}}
}

// recordHeaders are the headers of a response carrying one record.
func recordHeaders(created bool) obj {
	h := obj{"ETag": ref("headers", "ETag"), "Link": ref("headers", "Link")}
	if created {
		h["Location"] = ref("headers", "Location")
	}
	return h
}

// accessProfileParam returns the accessProfile query parameter, with the ids
// of the profiles that grant on the entity (or on the action) as its enum.
func accessProfileParam(ids []string) obj {
	s := obj{"type": "string"}
	if len(ids) > 0 {
		values := make([]any, len(ids))
		for i, id := range ids {
			values[i] = id
		}
		s["enum"] = values
	}
	return obj{
		"name":        "accessProfile",
		"in":          "query",
		"required":    false,
		"description": "Selects an access profile other than the route's default.",
		"schema":      s,
	}
}

// entityProfiles returns the ids of the profiles that grant on the entity.
func entityProfiles(p *model.Package, entityID string) []string {
	return profilesWhere(p, func(pr *model.Profile) bool { return pr.Grant(entityID) != nil })
}

// actionProfiles returns the ids of the profiles that grant on the action.
func actionProfiles(p *model.Package, actionID string) []string {
	return profilesWhere(p, func(pr *model.Profile) bool { return pr.ActionGrant(actionID) != nil })
}

// profilesWhere returns the sorted ids of the profiles that satisfy keep.
func profilesWhere(p *model.Package, keep func(*model.Profile) bool) []string {
	var ids []string
	for _, pr := range p.Profiles {
		if keep(pr) {
			ids = append(ids, pr.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// grantsOperation reports whether some profile grants op on the entity.
func grantsOperation(p *model.Package, entityID, op string) bool {
	for _, pr := range p.Profiles {
		if g := pr.Grant(entityID); g != nil && g.Allows(op) {
			return true
		}
	}
	return false
}

// hasRequestPresence reports whether some grant on the entity declares requestPresence.
func hasRequestPresence(p *model.Package, entityID string) bool {
	for _, pr := range p.Profiles {
		if g := pr.Grant(entityID); g != nil && len(g.RequestPresence) > 0 {
			return true
		}
	}
	return false
}

// operations returns the route inventory of the package, sorted by path
// then method.
func operations(p *model.Package) ([]operation, error) {
	all, err := allOperations(p)
	if err != nil {
		return nil, err
	}
	ops := all[:0:0]
	for _, o := range all {
		if served(o.capability) {
			ops = append(ops, o)
		}
	}
	return ops, nil
}

// allOperations returns every operation the package declares, served or
// not, sorted by path then method.
func allOperations(p *model.Package) ([]operation, error) {
	var ops []operation
	for _, e := range p.Entities {
		ops = append(ops, entityOperations(p, e)...)
	}
	for _, a := range p.Actions {
		ops = append(ops, actionOperations(p, a)...)
	}
	ops = append(ops, gisOperations(p)...)
	ops = append(ops, metadataOperations(p)...)
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].path != ops[j].path {
			return ops[i].path < ops[j].path
		}
		return ops[i].method < ops[j].method
	})
	seen := map[string]bool{}
	for _, o := range ops {
		if seen[o.id] {
			return nil, fmt.Errorf("generate: openapi: operation id %q is used twice", o.id)
		}
		seen[o.id] = true
	}
	return ops, nil
}
