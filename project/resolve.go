package project

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/registrum/registrum/model"
)

// ReservedNames are the envelope member names no field apiName or
// attachment slot id may take: domainData never holds them.
var ReservedNames = []string{
	"data", "meta", "items", "pageInfo", "nextCursor", "@context", "@id", "@type",
	"recordIdentifier", "revisionIdentifier", "domainData", "snapshot", "request",
	"requestPresence", "registryIdentifier", "datasetIdentifier", "entityTypeIdentifier",
}

// RoleVerifier is the file role of a go-plugin verifier binary in the
// package; such files are written executable.
const RoleVerifier = "verifier"

// Defaults and bounds the specification leaves to the engine.
const (
	DefaultMaximumBodyBytes = 1 << 20
	DefaultCursorMaxAge     = 3600
	MaxStringLength         = 1000000
	DefaultTextLength       = 1000000
	MaxTextLength           = 10000000
	MaxCodeLength           = 256
)

// decodeProject decodes a document that has the format's shape; strict
// refuses unknown members (already reported when strict is false).
func decodeProject(doc []byte, strict bool) (*Project, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if strict {
		dec.DisallowUnknownFields()
	}
	dec.UseNumber()
	var p Project
	if err := dec.Decode(&p); err != nil {
		return nil, err
	}
	return &p, nil
}

// resolve turns the decoded project into the package model, recording a
// finding for every rule it breaks.
func (c *compiler) resolve() *model.Package {
	p := c.proj
	pkg := &model.Package{Format: model.Format, Production: c.opts.Production}
	c.pkg = pkg
	pkg.Registry = c.registry(p.Registry)

	vocabIDs := newIDs(c, "vocabulary")
	for i, v := range p.Vocabularies {
		path := fmt.Sprintf("vocabularies[%d]", i)
		vocabIDs.claim(v.ID, path+".id")
		c.codes(v.Values, path+".values")
		pkg.Vocabularies = append(pkg.Vocabularies, &model.Vocabulary{ID: v.ID, Values: v.Values})
	}
	verifierIDs := newIDs(c, "verifier")
	for i, v := range p.Verifiers {
		path := fmt.Sprintf("verifiers[%d]", i)
		verifierIDs.claim(v.ID, path+".id")
		pkg.Verifiers = append(pkg.Verifiers, c.verifier(v, path))
	}

	// Entities first (ids and fields), so every cross reference can resolve.
	entityIDs := newIDs(c, "entity")
	routes := newIDs(c, "route")
	for i, es := range p.Entities {
		path := fmt.Sprintf("entities[%d]", i)
		entityIDs.claim(es.ID, path+".id")
		routes.claim(es.Route, path+".route")
		pkg.Entities = append(pkg.Entities, c.entityShape(es, path))
	}
	for i, es := range p.Entities {
		c.entityRules(pkg.Entities[i], es, fmt.Sprintf("entities[%d]", i))
	}
	actionIDs := newIDs(c, "action")
	for i, a := range p.Actions {
		path := fmt.Sprintf("actions[%d]", i)
		actionIDs.claim(a.ID, path+".id")
		pkg.Actions = append(pkg.Actions, c.action(a, path))
	}
	// Requests and hooks after actions: hooks ids are registry-wide.
	hookIDs := newIDs(c, "hook")
	for i, es := range p.Entities {
		e := pkg.Entities[i]
		path := fmt.Sprintf("entities[%d]", i)
		if es.ChangeRequest != nil {
			e.ChangeRequest = c.changeRequest(e, es.ChangeRequest, path+".changeRequest")
		}
		c.attachments(e, es, path)
		for j, h := range es.Hooks {
			hp := fmt.Sprintf("%s.hooks[%d]", path, j)
			hookIDs.claim(h.ID, hp+".id")
			if hk := c.hook(e, h, hp); hk != nil {
				e.Hooks = append(e.Hooks, hk)
			}
		}
	}
	profileIDs := newIDs(c, "profile")
	for i, pr := range p.Profiles {
		path := fmt.Sprintf("profiles[%d]", i)
		profileIDs.claim(pr.ID, path+".id")
		pkg.Profiles = append(pkg.Profiles, c.profile(pr, path))
	}
	c.defaultProfiles()
	formIDs := newIDs(c, "form")
	for i, f := range p.Forms {
		path := fmt.Sprintf("forms[%d]", i)
		formIDs.claim(f.ID, path+".id")
		pkg.Forms = append(pkg.Forms, c.form(f, path))
	}
	sort.Slice(pkg.Modules, func(i, j int) bool { return pkg.Modules[i].ID < pkg.Modules[j].ID })
	return pkg
}

// ids detects duplicate identifiers in one namespace.
type ids struct {
	c    *compiler
	what string
	seen map[string]string
}

func newIDs(c *compiler, what string) *ids { return &ids{c: c, what: what, seen: map[string]string{}} }

// claim records id at path and reports whether it was new.
func (s *ids) claim(id, path string) bool {
	if id == "" {
		return true
	}
	if first, dup := s.seen[id]; dup {
		s.c.add(path, "identifier.duplicate", "%s %q is already declared at %s", s.what, id, s.c.where(first))
		return false
	}
	s.seen[id] = path
	return true
}

// where renders the position of a key path for cross references in messages.
func (c *compiler) where(path string) string {
	pos := c.doc.Locate(path)
	return fmt.Sprintf("%s (line %d)", path, pos.Line)
}

func (c *compiler) registry(r RegistrySpec) model.Registry {
	base := strings.TrimSuffix(r.CanonicalBaseIRI, "/")
	c.absoluteURL(r.CanonicalBaseIRI, "registry.canonicalBaseIri")
	pick := func(v, key, def string) string {
		if v == "" {
			return base + def
		}
		c.absoluteURL(v, "registry.urls."+key)
		return strings.TrimSuffix(v, "/")
	}
	return model.Registry{
		ID: r.ID, Version: r.Version, Language: r.Language, CanonicalBaseIRI: base,
		URLs: model.URLs{
			Profile:         pick(r.URLs.Profile, "profile", "/profiles/record/v1"),
			Context:         pick(r.URLs.Context, "context", "/contexts/record/v1.jsonld"),
			ProblemTypeBase: pick(r.URLs.ProblemTypeBase, "problemTypeBase", "/problems"),
			MetadataBase:    pick(r.URLs.MetadataBase, "metadataBase", "/metadata"),
			ConceptBase:     pick(r.URLs.ConceptBase, "conceptBase", "/concepts"),
		},
	}
}

func (c *compiler) absoluteURL(v, path string) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		c.add(path, "registry.url", "%q is not an absolute http(s) URL without query, fragment or credentials", v)
	}
}

func (c *compiler) codes(values []string, path string) {
	seen := map[string]bool{}
	for i, v := range values {
		if v == "" || len([]rune(v)) > MaxCodeLength {
			c.add(fmt.Sprintf("%s[%d]", path, i), "vocabulary.code", "code %q must be 1 to %d characters", v, MaxCodeLength)
		}
		if seen[v] {
			c.add(fmt.Sprintf("%s[%d]", path, i), "vocabulary.code", "code %q is listed twice", v)
		}
		seen[v] = true
	}
}

func (c *compiler) verifier(v *Verifier, path string) model.Verifier {
	out := model.Verifier{ID: v.ID, Kind: model.VerifierKind(v.Kind), TimeoutMilliseconds: v.TimeoutMilliseconds, MaximumBytes: v.MaximumBytes}
	switch model.VerifierKind(v.Kind) {
	case model.VerifierGoPlugin:
		if v.Endpoint != "" || v.AuthorizationRef != "" {
			c.add(path, "verifier.kind", "a go-plugin verifier is a shipped binary: give path (and sha256), not endpoint or authorizationRef")
		}
		if v.Path == "" {
			c.add(path, "verifier.kind", "a go-plugin verifier needs path, the binary relative to the project folder")
			return out
		}
		out.Path, out.SHA256 = c.packagedFile(v.Path, v.SHA256, path+".path", path+".sha256", RoleVerifier)
	case model.VerifierHTTP:
		if v.Path != "" || v.SHA256 != "" {
			c.add(path, "verifier.kind", "an http verifier is a service: give endpoint and authorizationRef, not path or sha256")
		}
		if v.Endpoint == "" || v.AuthorizationRef == "" {
			c.add(path, "verifier.kind", "an http verifier needs endpoint and authorizationRef (secret:file/<name>)")
		}
		if v.Endpoint != "" {
			if err := checkEndpoint(v.Endpoint); err != nil {
				c.add(path+".endpoint", "verifier.endpoint", "endpoint %s", err)
			}
		}
		out.Endpoint, out.AuthorizationRef = v.Endpoint, v.AuthorizationRef
	}
	return out
}

// checkEndpoint accepts https URLs, and plain http only to a loopback
// address; never credentials or a fragment in the URL.
func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Hostname() == "":
		return fmt.Errorf("%q is not an absolute URL with a host", raw)
	case u.User != nil:
		return fmt.Errorf("must not carry user information; the credential comes from authorizationRef")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("must not carry a fragment")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("plain http is allowed only to a loopback address, not %q", u.Hostname())
	}
	return fmt.Errorf("scheme %q is not https", u.Scheme)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// entityShape resolves an entity's identity and fields.
func (c *compiler) entityShape(es *EntitySpec, path string) *model.Entity {
	e := &model.Entity{
		ID: es.ID, Route: es.Route, Dataset: es.Dataset,
		Classification:   or(es.Classification, "internal"),
		MutationMode:     model.MutationMode(or(es.MutationMode, string(model.Mutable))),
		Tombstone:        es.Tombstone,
		MaximumBodyBytes: es.MaximumBodyBytes,
		Cursor:           model.Cursor{MaxAgeSeconds: DefaultCursorMaxAge},
	}
	if e.MaximumBodyBytes == 0 {
		e.MaximumBodyBytes = DefaultMaximumBodyBytes
	}
	if es.Cursor != nil {
		e.Cursor.MaxAgeSeconds = es.Cursor.MaxAgeSeconds
	}
	if es.Batch != nil {
		e.Batch = &model.Batch{MaximumItems: es.Batch.MaximumItems, MaximumBytes: es.Batch.MaximumBytes}
		if es.Batch.MaximumBytes < e.MaximumBodyBytes && es.Batch.MaximumBytes > 0 {
			// A batch must be able to carry at least one maximal item.
			c.add(path+".batch.maximumBytes", "batch.bounds", "batch.maximumBytes %d is smaller than the entity's maximumBodyBytes %d: a batch could not carry one maximal record", es.Batch.MaximumBytes, e.MaximumBodyBytes)
		}
	}
	if e.MutationMode == model.CreateOnly && es.Tombstone {
		c.add(path+".tombstone", "entity.create-only", "a create-only entity accepts no write after create, so it cannot set tombstone: true")
	}
	fieldIDs := newIDs(c, "field")
	apiNames := map[string]string{}
	for j, fs := range es.Fields {
		fp := fmt.Sprintf("%s.fields[%d]", path, j)
		fresh := fieldIDs.claim(fs.ID, fp+".id")
		f := c.field(fs, fp, e.Classification, "field")
		if f == nil {
			continue
		}
		if fresh {
			c.apiName(f, fp, apiNames)
		}
		e.Fields = append(e.Fields, f)
	}
	return e
}

// apiName checks a field's wire name against the envelope and its siblings.
func (c *compiler) apiName(f *model.Field, fp string, seen map[string]string) {
	c.wireName(f, fp, seen, true)
}

// wireName checks a wire name for duplicates and, for record fields (which
// appear in domainData), against the envelope members.
func (c *compiler) wireName(f *model.Field, fp string, seen map[string]string, inEnvelope bool) {
	key := fp + ".apiName"
	if !c.doc.Has(key) {
		key = fp + ".id"
	}
	for _, r := range ReservedNames {
		if !inEnvelope {
			break
		}
		if f.APIName == r {
			c.add(key, "apiname.reserved", "apiName %q collides with the record envelope member %q; set a different apiName", f.APIName, r)
			return
		}
	}
	if first, dup := seen[f.APIName]; dup {
		c.add(key, "apiname.duplicate", "apiName %q is already used by the field at %s", f.APIName, c.where(first))
		return
	}
	seen[f.APIName] = fp
}

// DeriveAPIName returns the default apiName of a field id: its words in
// camelCase (case-id → caseId, valid_from → validFrom).
func DeriveAPIName(id string) string {
	var b strings.Builder
	upper := false
	for _, r := range id {
		if r == '-' || r == '_' {
			upper = true
			continue
		}
		if upper && b.Len() > 0 {
			r = unicode.ToUpper(r)
		}
		upper = false
		b.WriteRune(r)
	}
	return b.String()
}

// field resolves one field or action input. what names it in messages.
func (c *compiler) field(fs *FieldSpec, fp, defClass, what string) *model.Field {
	f := &model.Field{
		ID: fs.ID, APIName: or(fs.APIName, DeriveAPIName(fs.ID)), Type: model.FieldType(fs.Type),
		Required: fs.Required, Classification: or(fs.Classification, defClass), Description: fs.Description,
		MinLength: fs.MinLength, MaxLength: fs.MaxLength, Pattern: fs.Pattern,
		Minimum: fs.Minimum, Maximum: fs.Maximum, Precision: fs.Precision, Scale: fs.Scale,
		Vocabulary: fs.Vocabulary, Target: fs.Target,
	}
	// Members that belong to other types are refused, not ignored.
	allowed := map[string][]model.FieldType{
		"minLength":  {model.TypeString, model.TypeText},
		"maxLength":  {model.TypeString, model.TypeText},
		"pattern":    {model.TypeString},
		"minimum":    {model.TypeInteger},
		"maximum":    {model.TypeInteger},
		"precision":  {model.TypeDecimal},
		"scale":      {model.TypeDecimal},
		"vocabulary": {model.TypeCode}, "values": {model.TypeCode},
		"target": {model.TypeReference},
		"schema": {model.TypeStructured},
	}
	set := map[string]bool{
		"minLength": fs.MinLength != nil, "maxLength": fs.MaxLength != nil, "pattern": fs.Pattern != "",
		"minimum": fs.Minimum != nil, "maximum": fs.Maximum != nil, "precision": fs.Precision != nil,
		"scale": fs.Scale != nil, "vocabulary": fs.Vocabulary != "", "values": fs.Values != nil,
		"target": fs.Target != "", "schema": fs.Schema != nil,
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if set[k] && !typeIn(f.Type, allowed[k]) {
			c.add(fp+"."+k, "field.member", "%s is not a member of %s %s; it applies to %s", k, an(f.Type), what, typeList(allowed[k]))
		}
	}
	switch f.Type {
	case model.TypeString:
		if f.MaxLength == nil {
			c.add(fp, "field.bounds", "a string %s needs maxLength (1 to %d); use type text for long free text", what, MaxStringLength)
		} else if *f.MaxLength > MaxStringLength {
			c.add(fp+".maxLength", "field.bounds", "maxLength %d is above the string limit %d; use type text", *f.MaxLength, MaxStringLength)
		}
		if f.Pattern != "" {
			if _, err := regexp.Compile(f.Pattern); err != nil {
				c.add(fp+".pattern", "field.pattern", "pattern does not compile: %v", err)
			}
		}
	case model.TypeText:
		if f.MaxLength == nil {
			n := DefaultTextLength
			f.MaxLength = &n
		}
	case model.TypeInteger:
		if f.Minimum != nil && f.Maximum != nil && *f.Minimum > *f.Maximum {
			c.add(fp+".minimum", "field.bounds", "minimum %d is above maximum %d", *f.Minimum, *f.Maximum)
		}
	case model.TypeDecimal:
		if f.Precision == nil || f.Scale == nil {
			c.add(fp, "field.bounds", "a decimal %s needs precision (1 to 38) and scale (0 to precision)", what)
		} else if *f.Scale > *f.Precision {
			c.add(fp+".scale", "field.bounds", "scale %d is above precision %d", *f.Scale, *f.Precision)
		}
	case model.TypeCode:
		switch {
		case fs.Vocabulary != "" && fs.Values != nil:
			c.add(fp, "field.vocabulary", "a code %s takes its codes from vocabulary or from values, not both", what)
		case fs.Vocabulary != "":
			var v *Vocabulary
			for _, cand := range c.proj.Vocabularies {
				if cand.ID == fs.Vocabulary {
					v = cand
				}
			}
			if v == nil {
				c.add(fp+".vocabulary", "field.vocabulary", "vocabulary %q is not declared in vocabularies", fs.Vocabulary)
			} else {
				f.Values = append([]string(nil), v.Values...)
			}
		case len(fs.Values) > 0:
			c.codes(fs.Values, fp+".values")
			f.Values = append([]string(nil), fs.Values...)
		default:
			c.add(fp, "field.vocabulary", "a code %s needs vocabulary (a vocabularies[].id) or nonempty values", what)
		}
	case model.TypeReference:
		if fs.Target == "" {
			c.add(fp, "field.reference", "a reference %s needs target, the id of the entity it points at", what)
		} else if !c.entityDeclared(fs.Target) {
			c.add(fp+".target", "field.reference", "target %q is not a declared entity", fs.Target)
		}
	case model.TypeStructured:
		if fs.Schema == nil {
			c.add(fp, "field.schema", "a structured %s needs schema, an inline JSON Schema of its value", what)
		} else {
			raw, err := json.Marshal(fs.Schema)
			if err == nil {
				err = checkInlineSchema(raw)
			}
			if err != nil {
				c.add(fp+".schema", "field.schema", "schema is not a valid JSON Schema 2020-12: %s", schemaErrorText(err))
			}
			f.Schema = raw
		}
	}
	return f
}

func checkInlineSchema(raw []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if m, ok := doc.(map[string]any); ok {
		if _, has := m["$ref"]; has {
			return fmt.Errorf("$ref is not allowed in an inline schema")
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const id = "urn:registrum:inline-schema"
	if err := c.AddResource(id, doc); err != nil {
		return err
	}
	_, err = c.Compile(id)
	return err
}

// schemaErrorText renders a schema compilation error on one line.
func schemaErrorText(err error) string {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		var ve *jsonschema.ValidationError
		if errors.As(sve.Err, &ve) {
			var leaves []structuralIssue
			collect(ve, &leaves)
			msgs := make([]string, len(leaves))
			for i, l := range leaves {
				msgs[i] = "at /" + strings.ReplaceAll(l.path, ".", "/") + ": " + l.message
			}
			return strings.Join(msgs, "; ")
		}
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// noLoader refuses to fetch remote schemas: inline schemas are self-contained.
type noLoader struct{}

// Load refuses every URL.
func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("inline schemas may not refer to %s", u)
}

func (c *compiler) entityDeclared(id string) bool {
	for _, e := range c.proj.Entities {
		if e.ID == id {
			return true
		}
	}
	return false
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func typeIn(t model.FieldType, list []model.FieldType) bool {
	for _, x := range list {
		if x == t {
			return true
		}
	}
	return false
}

func typeList(list []model.FieldType) string {
	s := make([]string, len(list))
	for i, t := range list {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// an prefixes a type name with its indefinite article.
func an(t any) string {
	s := fmt.Sprint(t)
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}
