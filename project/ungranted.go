package project

import (
	"fmt"
	"slices"

	"github.com/registrum/registrum/model"
)

// RuleUngranted is the rule of the warning about a field no profile can
// read or write: the API never shows it, so a field added without a grant
// is silently invisible.
const RuleUngranted = "field.ungranted"

// ungranted returns one warning per field of pkg that no profile's grant
// lists as readable or writable, located at the field's declaration.
func (c *compiler) ungranted(pkg *model.Package) Findings {
	granted := map[string]map[string]bool{}
	for _, pr := range pkg.Profiles {
		for _, g := range pr.Grants {
			if granted[g.Entity] == nil {
				granted[g.Entity] = map[string]bool{}
			}
			for _, f := range slices.Concat(g.ReadableFields, g.WritableFields) {
				granted[g.Entity][f] = true
			}
		}
	}
	var out Findings
	for i, es := range c.proj.Entities {
		e := pkg.EntityByID(es.ID)
		if e == nil {
			continue
		}
		for j, fs := range es.Fields {
			if e.Field(fs.ID) == nil || granted[e.ID][fs.ID] {
				continue
			}
			path := fmt.Sprintf("entities[%d].fields[%d]", i, j)
			pos := c.doc.Locate(path)
			out = append(out, Finding{File: c.file, Line: pos.Line, Column: pos.Column, Path: path, Rule: RuleUngranted,
				Message:  fmt.Sprintf("no profile can read or write field %q of entity %q, so no client ever sees it: list it in a grant's readableFields or writableFields", fs.ID, e.ID),
				Severity: SeverityWarning})
		}
	}
	return out
}
