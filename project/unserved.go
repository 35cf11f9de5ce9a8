package project

import (
	"fmt"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/project/generate"
)

// RuleUnserved is the rule of the warning about a declared capability the
// record host does not serve yet.
const RuleUnserved = "capability.unserved"

// unservedKeys are the project keys that declare each capability, where a
// warning points; a capability declared by grants points at the entity.
var unservedKeys = map[string]string{
	model.CapTemporalReads:  "temporal",
	model.CapIngestionRuns:  "batch",
	model.CapChangeRequests: "changeRequest",
	model.CapAttachments:    "attachments",
	model.CapGIS:            "geojson",
}

// unserved returns one warning per declared use of a capability the record
// host does not serve (generate.Unserved, from the one capability table),
// located at the key that declares it.
func (c *compiler) unserved(pkg *model.Package) (Findings, error) {
	uses, err := generate.Unserved(pkg)
	if err != nil {
		return nil, fmt.Errorf("project: %w", err)
	}
	var out Findings
	for _, u := range uses {
		path := ""
		switch {
		case u.Entity != "":
			for i, e := range c.proj.Entities {
				if e.ID == u.Entity {
					path = fmt.Sprintf("entities[%d]", i)
					if k, ok := unservedKeys[u.Capability.ID]; ok {
						path += "." + k
					}
				}
			}
		case u.Action != "":
			for i, a := range c.proj.Actions {
				if a.ID == u.Action {
					path = fmt.Sprintf("actions[%d]", i)
				}
			}
		}
		pos := c.doc.Locate(path)
		out = append(out, Finding{File: c.file, Line: pos.Line, Column: pos.Column, Path: path,
			Rule: RuleUnserved, Message: u.Message(), Severity: SeverityWarning})
	}
	return out.sorted(), nil
}
