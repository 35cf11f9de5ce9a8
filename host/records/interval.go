package records

import (
	"time"

	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/internal/strictjson"
	"github.com/registrum/registrum/model"
)

// checkInterval refuses a temporal record whose validity interval is empty
// or reversed. Intervals include the start and exclude the end (a null end
// is open), so an end at or before the start leaves no instant in the
// interval; the database would refuse a reversed one with a range error.
// stored holds the storage values by field id: dates as YYYY-MM-DD strings,
// timestamps as time.Time.
func checkInterval(e *model.Entity, stored map[string]any) error {
	if e.Temporal == nil {
		return nil
	}
	start, end := stored[e.Temporal.StartField], stored[e.Temporal.EndField]
	if start == nil || end == nil {
		return nil
	}
	var after bool
	switch s := start.(type) {
	case string:
		en, ok := end.(string)
		after = !ok || en > s
	case time.Time:
		en, ok := end.(time.Time)
		after = !ok || en.After(s)
	default:
		return nil
	}
	if after {
		return nil
	}
	sf, ef := e.Field(e.Temporal.StartField), e.Field(e.Temporal.EndField)
	if sf == nil || ef == nil {
		return nil
	}
	return problem.At(problem.RequestInvalid, strictjson.Pointer("data", ef.APIName),
		"%s must be after %s: a validity interval includes its start and excludes its end, so it cannot end at or before it starts", ef.APIName, sf.APIName)
}
