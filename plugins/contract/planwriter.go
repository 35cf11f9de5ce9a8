package contract

import "fmt"

// PlanWriter writes a plan's JSON as it is built, with no PlanResult, map or
// `any` value in between. Its output is byte for byte what
// PlanResult.AppendJSON writes for the same plan: effects in the order they
// were begun, each effect's set members sorted by field (the last of a
// repeated field kept), its clear list in the order given, and a refusal
// replacing the whole plan.
//
// Effects are written one after another: Effect (or Create, Patch) begins
// one, the Set and Clear calls that follow belong to it, and the next Effect
// or Finish closes it. Set or Clear with no effect begun panics (a bug in
// the module: the host sees a trap); so does a value that is not JSON.
//
// The zero PlanWriter is ready for Reset. It reuses its memory from plan to
// plan and is not safe for concurrent use.
type PlanWriter struct {
	buf     []byte
	base    int  // len(buf) before the plan
	effects int  // effects begun
	open    bool // an effect is open
	refused bool
	refusal string
	vals    []byte     // the open effect's encoded set sources
	set     []setEntry // the open effect's set members
	clear   []string   // the open effect's clear list
}

// setEntry is one set member of the open effect: its field and the span of
// its encoded source in PlanWriter.vals.
type setEntry struct {
	field      string
	start, end int
}

// Reset begins a new plan appended to buf, forgetting any plan in progress.
func (w *PlanWriter) Reset(buf []byte) {
	w.base = len(buf)
	w.buf = append(buf, `{"effects":[`...)
	w.effects, w.open, w.refused, w.refusal = 0, false, false, ""
	w.vals, w.set, w.clear = w.vals[:0], w.set[:0], w.clear[:0]
}

// Finish closes the plan and returns buf (as given to Reset) with the plan
// appended.
func (w *PlanWriter) Finish() []byte {
	if w.refused {
		w.buf = append(w.buf[:w.base], `{"refusal":`...)
		w.buf = append(Refusal{Kind: w.refusal}.appendJSON(w.buf), '}')
		return w.buf
	}
	w.closeEffect()
	w.buf = append(w.buf, "]}"...)
	return w.buf
}

// Refuse replaces the plan with a refusal of the given short kind. The
// writer ignores every later call until Reset, so a planner usually returns
// right after it.
func (w *PlanWriter) Refuse(kind string) {
	if !w.refused {
		w.refused, w.refusal = true, kind
	}
}

// Refused reports whether Refuse was called.
func (w *PlanWriter) Refused() bool { return w.refused }

// Effect begins the next effect of the plan: its id, operation and target.
func (w *PlanWriter) Effect(id string, op Operation, target Target) {
	if w.refused {
		return
	}
	w.closeEffect()
	if w.effects > 0 {
		w.buf = append(w.buf, ',')
	}
	w.buf = appendEffectHead(w.buf, id, op, target)
	w.effects++
	w.open = true
}

// Create begins an effect creating a record of entity.
func (w *PlanWriter) Create(id, entity string) {
	w.Effect(id, OperationCreate, Target{Entity: entity})
}

// Patch begins an effect patching the record target selects.
func (w *PlanWriter) Patch(id string, target Target) { w.Effect(id, OperationPatch, target) }

// SetString sets field of the open effect to the literal string s.
func (w *PlanWriter) SetString(field, s string) {
	if w.begin() {
		w.vals = append(AppendString(append(w.vals, `{"value":`...), s), '}')
		w.end(field)
	}
}

// SetRaw sets field of the open effect to the literal JSON value raw, written
// as Value writes the value parsed from it (Fields.Raw gives such values, so
// a request value is copied through unchanged). It panics if raw is not one
// JSON value.
func (w *PlanWriter) SetRaw(field string, raw []byte) {
	if w.begin() {
		vals, err := AppendRawValue(append(w.vals, `{"value":`...), raw)
		if err != nil {
			panic(fmt.Sprintf("PlanWriter.SetRaw(%q): %v", field, err))
		}
		w.vals = append(vals, '}')
		w.end(field)
	}
}

// SetValue sets field of the open effect to the literal v, of any type
// AppendValue takes; it panics on another.
func (w *PlanWriter) SetValue(field string, v any) {
	if w.begin() {
		vals, err := AppendValue(append(w.vals, `{"value":`...), v)
		if err != nil {
			panic(fmt.Sprintf("PlanWriter.SetValue(%q): %v", field, err))
		}
		w.vals = append(vals, '}')
		w.end(field)
	}
}

// SetFromField sets field of the open effect to the value of request field
// name.
func (w *PlanWriter) SetFromField(field, name string) {
	if w.begin() {
		w.vals = FieldSource{FromField: name}.appendJSON(w.vals)
		w.end(field)
	}
}

// SetFromEffect sets field of the open effect to the id of the record the
// create effect id makes.
func (w *PlanWriter) SetFromEffect(field, id string) {
	if w.begin() {
		w.vals = FieldSource{FromEffect: id}.appendJSON(w.vals)
		w.end(field)
	}
}

// Clear adds field to the open effect's clear list (set to null).
func (w *PlanWriter) Clear(field string) {
	if w.ready() {
		w.clear = append(w.clear, field)
	}
}

// ready reports whether a set or clear call should be written, and panics
// when no effect is open.
func (w *PlanWriter) ready() bool {
	if w.refused {
		return false
	}
	if !w.open {
		panic("PlanWriter: Set or Clear before Effect")
	}
	return true
}

// begin is ready for a set member, which it starts.
func (w *PlanWriter) begin() bool {
	if !w.ready() {
		return false
	}
	w.set = append(w.set, setEntry{start: len(w.vals)})
	return true
}

// end completes the set member begin added.
func (w *PlanWriter) end(field string) {
	e := &w.set[len(w.set)-1]
	e.field, e.end = field, len(w.vals)
}

// closeEffect writes the open effect's set and clear lists and closes it.
func (w *PlanWriter) closeEffect() {
	if !w.open {
		return
	}
	set := w.set
	// Insertion sort: stable, so among repeated fields the last stays last,
	// and no allocation for the handful of members a plan has.
	for i := 1; i < len(set); i++ {
		for j := i; j > 0 && set[j].field < set[j-1].field; j-- {
			set[j], set[j-1] = set[j-1], set[j]
		}
	}
	buf := w.buf
	if len(set) > 0 {
		buf = append(buf, `,"set":{`...)
		first := true
		for i, e := range set {
			if i+1 < len(set) && set[i+1].field == e.field {
				continue // a later value for the same field wins
			}
			if !first {
				buf = append(buf, ',')
			}
			first = false
			buf = append(AppendString(buf, e.field), ':')
			buf = append(buf, w.vals[e.start:e.end]...)
		}
		buf = append(buf, '}')
	}
	w.buf = append(appendClear(buf, w.clear), '}')
	w.vals, w.set, w.clear = w.vals[:0], w.set[:0], w.clear[:0]
	w.open = false
}
