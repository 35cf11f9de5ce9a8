package project

import (
	"strings"
	"testing"
)

// TestCompileWarnsAboutAnUngrantedField: a field no grant lists as readable
// or writable compiles, with a warning at its declaration naming the entity
// and the field; a field only one of the lists names is not warned about.
func TestCompileWarnsAboutAnUngrantedField(t *testing.T) {
	doc := strings.Replace(minimal(t), "      - {id: surveyed, type: boolean}\n",
		"      - {id: surveyed, type: boolean}\n      - {id: notes, type: string, maxLength: 200}\n      - {id: owner-name, type: string, maxLength: 200}\n", 1)
	doc = strings.Replace(doc, "readableFields: [parcel-code, area, surveyed]", "readableFields: [parcel-code, area, surveyed, owner-name]", 1)
	res, fs := compileText(t, doc, opts(false))
	if fs != nil {
		t.Fatalf("an ungranted field must not refuse the project: %v", fs)
	}
	var got []Finding
	for _, w := range res.Warnings {
		if w.Rule == RuleUngranted {
			got = append(got, w)
		}
	}
	if len(got) != 1 {
		t.Fatalf("ungranted warnings = %v, want one about notes", got)
	}
	w := got[0]
	if w.Severity != SeverityWarning || w.Path != "entities[0].fields[3]" || w.Line != 15 ||
		!strings.Contains(w.Message, `field "notes" of entity "parcel"`) || !strings.Contains(w.String(), "warning: ") {
		t.Errorf("warning = %s (%+v)", w, w)
	}
	// Granted, the warning goes.
	doc = strings.Replace(doc, "writableFields: [parcel-code, area, surveyed]", "writableFields: [parcel-code, area, surveyed, notes]", 1)
	if res, _ = compileText(t, doc, opts(false)); len(res.Warnings) != 0 {
		t.Errorf("warnings once granted: %v", res.Warnings)
	}
}
