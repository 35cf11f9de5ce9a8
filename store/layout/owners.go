package layout

import (
	"strconv"

	"github.com/registrum/registrum/model"
)

// Owner says which authored rule a database constraint enforces, so that a
// violation reported by PostgreSQL can be explained in the author's terms.
type Owner struct {
	EntityID string
	// Kind is a model constraint kind (unique, reference,
	// temporal-non-overlap, check) or "field-bounds" for a type bound.
	Kind string
	// ConstraintID is the authored constraint id, when there is one.
	ConstraintID string
	// FieldID is the field at fault, when one field is.
	FieldID string
}

// KindFieldBounds marks constraints derived from a field's type bounds.
const KindFieldBounds = "field-bounds"

// Owners maps every named constraint of p's layout to its owner.
func Owners(p *model.Package) map[string]Owner {
	out := map[string]Owner{}
	for _, e := range p.Entities {
		tname := TableName(e)
		i := 0
		for _, f := range e.Fields {
			for range fieldChecks(f, "") {
				out[name("c_", tname, "v"+strconv.Itoa(i))] = Owner{EntityID: e.ID, Kind: KindFieldBounds, FieldID: f.ID}
				i++
			}
			if f.Type == model.TypeReference {
				out[name("r_", tname, f.ID)] = Owner{EntityID: e.ID, Kind: model.ConstraintReference, FieldID: f.ID}
			}
		}
		for _, c := range e.Constraints {
			o := Owner{EntityID: e.ID, Kind: c.Kind, ConstraintID: c.ID, FieldID: c.Field}
			if len(c.Fields) == 1 {
				o.FieldID = c.Fields[0]
			}
			out[name("k_", tname, c.ID)] = o
		}
	}
	return out
}
