package project

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/registrum/registrum/model"
)

// form resolves a form definition: member names unique per object, items
// only on arrays, concept addresses resolved against {concept_base}.
func (c *compiler) form(f *Form, fp string) *model.Form {
	out := &model.Form{ID: f.ID, Title: f.Title, Description: f.Description, Entity: f.Entity}
	if f.Entity != "" {
		if e := c.pkg.EntityByID(f.Entity); e == nil || !e.IsRequestEntity() {
			c.add(fp+".entity", "form.entity", "entity %q is not a declared change request entity", f.Entity)
		}
	}
	out.Fields = c.formFields(f.Fields, fp+".fields")
	return out
}

func (c *compiler) formFields(fields []*FormField, lp string) []*model.FormField {
	var out []*model.FormField
	seen := map[string]bool{}
	for i, ff := range fields {
		p := fmt.Sprintf("%s[%d]", lp, i)
		if seen[ff.Name] {
			c.add(p+".name", "identifier.duplicate", "form member %q is declared twice in the same object", ff.Name)
		}
		seen[ff.Name] = true
		mf := &model.FormField{Name: ff.Name, Type: ff.Type, Title: ff.Title, Required: ff.Required,
			SupportsRequirement: ff.SupportsRequirement, MinItems: ff.MinItems, MaxItems: ff.MaxItems}
		if ff.MinItems != nil && ff.MaxItems != nil && *ff.MinItems > *ff.MaxItems {
			c.add(p+".minItems", "form.bounds", "minItems %d is above maxItems %d", *ff.MinItems, *ff.MaxItems)
		}
		if ff.Concept != "" {
			mf.ConceptURI = c.conceptURI(ff.Concept, p+".concept")
		}
		switch {
		case ff.Type == model.FormArray && ff.Items == nil:
			c.add(p, "form.items", "an array member needs items, the object each item is")
		case ff.Type != model.FormArray && ff.Items != nil:
			c.add(p+".items", "form.items", "items belongs to array members; %q is a %s", ff.Name, ff.Type)
		case ff.Items != nil:
			mf.Items = &model.FormItems{MinProperties: ff.Items.MinProperties, Fields: c.formFields(ff.Items.Fields, p+".items.fields")}
			if ff.Items.MinProperties != nil && *ff.Items.MinProperties > len(ff.Items.Fields) {
				c.add(p+".items.minProperties", "form.bounds", "minProperties %d is above the %d members an item may have", *ff.Items.MinProperties, len(ff.Items.Fields))
			}
		}
		out = append(out, mf)
	}
	return out
}

// conceptURI resolves a concept address: absolute URLs stay, anything else
// is a path under {concept_base}.
func (c *compiler) conceptURI(concept, p string) string {
	if u, err := url.Parse(concept); err == nil && u.Scheme != "" {
		if u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			c.add(p, "form.concept", "concept %q is neither an http(s) URL nor a path under the concept base", concept)
		}
		return concept
	}
	rel := strings.TrimPrefix(concept, "/")
	if rel == "" || strings.Contains(rel, "..") || strings.ContainsAny(rel, " ?#") {
		c.add(p, "form.concept", "concept %q is not a plain path under the concept base", concept)
	}
	return c.pkg.Registry.URLs.ConceptBase + "/" + rel
}
