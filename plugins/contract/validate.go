package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// MaxNameBytes bounds ids, entity and field names, and refusal tokens.
const MaxNameBytes = 128

// validName reports whether s is a plain name: 1 to MaxNameBytes bytes of
// ASCII letters, digits, '_', '-' or '.', starting with a letter.
func validName(s string) bool {
	if s == "" || len(s) > MaxNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// Validate checks a plan against the contract: exactly one of effects or
// refusal; unique effect ids; create targets name only an entity; patch
// targets name exactly one of fromField or fromEffect; fromEffect refers to
// an earlier create; every set source has exactly one member; a field is not
// both set and cleared; and, when writes is not nil, every effect fits a
// declared write. The error names the offending member by its path.
func (r PlanResult) Validate(writes []Write) error {
	switch {
	case r.Refusal != nil && len(r.Effects) > 0:
		return errors.New("output has both effects and refusal")
	case r.Refusal != nil:
		if r.Refusal.Code != "" || r.Refusal.Field != "" {
			return errors.New("refusal: only kind is allowed in a planner refusal")
		}
		if !validName(r.Refusal.Kind) {
			return errors.New("refusal.kind: must be a name of 1 to 128 letters, digits, '_', '-', '.'")
		}
		return nil
	case len(r.Effects) == 0:
		return errors.New("output has neither effects nor refusal")
	}
	created := map[string]bool{}
	seen := map[string]bool{}
	for i, e := range r.Effects {
		at := fmt.Sprintf("effects[%d]", i)
		if !validName(e.ID) {
			return fmt.Errorf("%s.id: must be a name", at)
		}
		if seen[e.ID] {
			return fmt.Errorf("%s.id: duplicate effect id %q", at, e.ID)
		}
		seen[e.ID] = true
		if !validName(e.Target.Entity) {
			return fmt.Errorf("%s.target.entity: must be a name", at)
		}
		switch e.Operation {
		case OperationCreate:
			if e.Target.FromField != "" || e.Target.FromEffect != "" {
				return fmt.Errorf("%s.target: a create names only its entity", at)
			}
		case OperationPatch:
			if (e.Target.FromField == "") == (e.Target.FromEffect == "") {
				return fmt.Errorf("%s.target: a patch names exactly one of fromField or fromEffect", at)
			}
			if e.Target.FromField != "" && !validName(e.Target.FromField) {
				return fmt.Errorf("%s.target.fromField: must be a name", at)
			}
			if e.Target.FromEffect != "" && !created[e.Target.FromEffect] {
				return fmt.Errorf("%s.target.fromEffect: %q is not an earlier create effect", at, e.Target.FromEffect)
			}
		default:
			return fmt.Errorf("%s.operation: must be create or patch", at)
		}
		if len(e.Set) == 0 && len(e.Clear) == 0 {
			return fmt.Errorf("%s: sets and clears nothing", at)
		}
		for field, src := range e.Set {
			fat := fmt.Sprintf("%s.set.%s", at, field)
			if !validName(field) {
				return fmt.Errorf("%s: field name must be a name", at)
			}
			n := 0
			if src.Value != nil {
				n++
				if !json.Valid(src.Value) {
					return fmt.Errorf("%s.value: not JSON", fat)
				}
			}
			if src.FromField != "" {
				n++
				if !validName(src.FromField) {
					return fmt.Errorf("%s.fromField: must be a name", fat)
				}
			}
			if src.FromEffect != "" {
				n++
				if !created[src.FromEffect] {
					return fmt.Errorf("%s.fromEffect: %q is not an earlier create effect", fat, src.FromEffect)
				}
			}
			if n != 1 {
				return fmt.Errorf("%s: needs exactly one of value, fromField or fromEffect", fat)
			}
		}
		for j, field := range e.Clear {
			if !validName(field) {
				return fmt.Errorf("%s.clear[%d]: must be a name", at, j)
			}
			if _, ok := e.Set[field]; ok {
				return fmt.Errorf("%s.clear[%d]: field %q is also set", at, j, field)
			}
			if slices.Contains(e.Clear[:j], field) {
				return fmt.Errorf("%s.clear[%d]: field %q cleared twice", at, j, field)
			}
		}
		if writes != nil && !fitsWrites(e, writes) {
			return fmt.Errorf("%s: %s of %q touching these fields is outside the planner's declared writes", at, e.Operation, e.Target.Entity)
		}
		if e.Operation == OperationCreate {
			created[e.ID] = true
		}
	}
	return nil
}

// fitsWrites reports whether some declared write covers e.
func fitsWrites(e Effect, writes []Write) bool {
	for _, w := range writes {
		if w.Entity != e.Target.Entity || w.Operation != e.Operation {
			continue
		}
		ok := true
		for field := range e.Set {
			if !slices.Contains(w.Fields, field) {
				ok = false
				break
			}
		}
		for _, field := range e.Clear {
			if !ok || !slices.Contains(w.Fields, field) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// Validate checks a hook handler's result: outcome acknowledged (with no
// kind) or retry (with a kind that is a name).
func (r HookResult) Validate() error {
	switch r.Outcome {
	case HookAcknowledged:
		if r.Kind != "" {
			return errors.New("kind: only a retry names a kind")
		}
	case HookRetry:
		if !validName(r.Kind) {
			return errors.New("kind: a retry needs a kind that is a name")
		}
	default:
		return errors.New("outcome: must be acknowledged or retry")
	}
	return nil
}

// Validate checks an action handler's result: exactly one of writes or
// refusal; a refusal's code is one of refusals (when refusals is not nil);
// every write names a declared write once and sets only its declared fields
// (when declared is not nil).
func (r ActionResult) Validate(declared []DeclaredActionWrite, refusals []string) error {
	switch {
	case r.Refusal != nil && len(r.Writes) > 0:
		return errors.New("output has both writes and refusal")
	case r.Refusal != nil:
		if r.Refusal.Kind != "" {
			return errors.New("refusal: an action refusal has a code, not a kind")
		}
		if !validName(r.Refusal.Code) {
			return errors.New("refusal.code: must be a name")
		}
		if refusals != nil && !slices.Contains(refusals, r.Refusal.Code) {
			return fmt.Errorf("refusal.code: %q is not a declared refusal", r.Refusal.Code)
		}
		if r.Refusal.Field != "" && !validName(r.Refusal.Field) {
			return errors.New("refusal.field: must be a name")
		}
		return nil
	case len(r.Writes) == 0:
		return errors.New("output has neither writes nor refusal")
	}
	seen := map[string]bool{}
	for i, w := range r.Writes {
		at := fmt.Sprintf("writes[%d]", i)
		if !validName(w.ID) {
			return fmt.Errorf("%s.id: must be a name", at)
		}
		if seen[w.ID] {
			return fmt.Errorf("%s.id: write %q given twice", at, w.ID)
		}
		seen[w.ID] = true
		var fields []string
		if declared != nil {
			i := slices.IndexFunc(declared, func(d DeclaredActionWrite) bool { return d.ID == w.ID })
			if i < 0 {
				return fmt.Errorf("%s.id: %q is not a declared write", at, w.ID)
			}
			fields = declared[i].Fields
		}
		if len(w.Set) == 0 {
			return fmt.Errorf("%s.set: sets nothing", at)
		}
		for field, v := range w.Set {
			if !validName(field) {
				return fmt.Errorf("%s.set: field name must be a name", at)
			}
			if declared != nil && !slices.Contains(fields, field) {
				return fmt.Errorf("%s.set.%s: not a declared field of write %q", at, field, w.ID)
			}
			if v == nil || !json.Valid(v) {
				return fmt.Errorf("%s.set.%s: not JSON", at, field)
			}
		}
	}
	return nil
}
