package query

import (
	"slices"

	"github.com/registrum/registrum/model"
)

// OptRequestHistoryAfter continues the retained history of a change
// request on a single-record read of a request entity.
const OptRequestHistoryAfter = "requestHistoryAfterProposalVersion"

// ParseRecord parses the query options of a single-record read: $select
// (read exactly as a collection read reads it), accessProfile and, on a
// request entity, requestHistoryAfterProposalVersion (returned as given,
// for the change-request service). It returns the fields of domainData:
// the selection, or every readable field in entity order. Any other option,
// and an option given twice, is refused with an *Error of kind Invalid, as
// Parse refuses them.
func ParseRecord(e *model.Entity, a Allowed, opts RawOptions) ([]*model.Field, error) {
	names := make([]string, 0, len(opts))
	for name := range opts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		switch {
		case name == OptAccessProfile, name == OptSelect:
		case name == OptRequestHistoryAfter && e.IsRequestEntity():
		default:
			return nil, invalid("%s is not a query option of this read.", echo(name))
		}
		if len(opts[name]) != 1 {
			return nil, invalid("%s must be given exactly once.", name)
		}
	}
	sel := ""
	if v, ok := opts[OptSelect]; ok {
		if sel = v[0]; sel == "" {
			return nil, invalid("%s is empty.", OptSelect)
		}
	}
	fields, _, err := parseSelect(e, a, sel)
	return fields, err
}
