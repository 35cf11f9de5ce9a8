package contract

import (
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/strictjson"

	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// MaxDepth bounds the nesting of arrays and objects ParseValue accepts.
const MaxDepth = strictjson.MaxDepth

// ParseValue decodes one JSON document into plain Go values without
// reflection: objects become map[string]any, arrays []any, strings string,
// numbers json.Number (exact), true/false bool and null nil. Nesting deeper
// than MaxDepth, trailing data and invalid JSON are errors.
func ParseValue(b []byte) (any, error) {
	return strictjson.Decode(b)
}

// ParseCheckedValue is ParseValue for a document the host has already
// checked with ParseValue: inside a WebAssembly guest it skips the per-byte
// validation of strings (control characters, UTF-8), which costs a sandbox
// check on every loop iteration, and strings without escapes share b's
// memory instead of being copied, so b must never change afterwards. On
// other input it may accept what ParseValue refuses; it never reads out of
// bounds.
func ParseCheckedValue(b []byte) (any, error) {
	return strictjson.DecodeChecked(b)
}

// AppendValue appends the JSON encoding of v to buf without reflection. It
// accepts the values ParseValue produces plus the other Go numbers,
// json.RawMessage, []string and map[string]string. Object members are
// written in sorted key order, so the output is deterministic.
func AppendValue(buf []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...), nil
	case bool:
		return strconv.AppendBool(buf, x), nil
	case string:
		return AppendString(buf, x), nil
	case json.Number:
		if _, err := ParseValue([]byte(x)); err != nil || x == "" {
			return nil, fmt.Errorf("json: invalid number %q", string(x))
		}
		return append(buf, x...), nil
	case json.RawMessage:
		if !json.Valid(x) {
			return nil, errors.New("json: invalid raw message")
		}
		return append(buf, x...), nil
	case int:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(buf, x, 10), nil
	case int32:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case uint:
		return strconv.AppendUint(buf, uint64(x), 10), nil
	case uint64:
		return strconv.AppendUint(buf, x, 10), nil
	case uint32:
		return strconv.AppendUint(buf, uint64(x), 10), nil
	case float64:
		return canonjson.AppendNumber(buf, x)
	case float32:
		return canonjson.AppendNumber(buf, float64(x))
	case []any:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = AppendValue(buf, e); err != nil {
				return nil, err
			}
		}
		return append(buf, ']'), nil
	case []string:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = AppendString(buf, e)
		}
		return append(buf, ']'), nil
	case map[string]any:
		return canonjson.AppendObject(buf, x, AppendValue)
	case map[string]string:
		return canonjson.AppendObject(buf, x, appendStringValue)
	default:
		return nil, fmt.Errorf("json: cannot encode a value of type %T", v)
	}
}

// appendStringValue is AppendString for canonjson.AppendObject.
func appendStringValue(buf []byte, s string) ([]byte, error) { return AppendString(buf, s), nil }

// AppendString appends s as a JSON string, as canonjson.AppendString
// writes it (RFC 8785). Invalid UTF-8 becomes U+FFFD.
func AppendString(buf []byte, s string) []byte { return canonjson.AppendString(buf, s) }

// AppendJSON appends the JSON encoding of r to buf, map members in sorted
// key order.
func (r PlanResult) AppendJSON(buf []byte) []byte {
	if r.Refusal != nil {
		buf = append(buf, `{"refusal":`...)
		return append(r.Refusal.appendJSON(buf), '}')
	}
	buf = append(buf, `{"effects":[`...)
	for i, e := range r.Effects {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = e.appendJSON(buf)
	}
	return append(buf, "]}"...)
}

func (e Effect) appendJSON(buf []byte) []byte {
	buf = appendEffectHead(buf, e.ID, e.Operation, e.Target)
	if len(e.Set) > 0 {
		buf = append(buf, `,"set":{`...)
		for i, k := range canonjson.SortedNames(e.Set, (&canonjson.NameBuf{})[:0]) {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(AppendString(buf, k), ':')
			buf = e.Set[k].appendJSON(buf)
		}
		buf = append(buf, '}')
	}
	return append(appendClear(buf, e.Clear), '}')
}

// appendClear appends an effect's clear member, if it has one.
func appendClear(buf []byte, clear []string) []byte {
	if len(clear) == 0 {
		return buf
	}
	buf = append(buf, `,"clear":[`...)
	for i, f := range clear {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = AppendString(buf, f)
	}
	return append(buf, ']')
}

// appendEffectHead appends an effect's opening brace, id, operation and
// target; its set, clear and closing brace follow.
func appendEffectHead(buf []byte, id string, op Operation, t Target) []byte {
	buf = append(buf, `{"id":`...)
	buf = AppendString(buf, id)
	buf = append(buf, `,"operation":`...)
	buf = AppendString(buf, string(op))
	buf = append(buf, `,"target":{"entity":`...)
	buf = AppendString(buf, t.Entity)
	if t.FromField != "" {
		buf = append(buf, `,"fromField":`...)
		buf = AppendString(buf, t.FromField)
	}
	if t.FromEffect != "" {
		buf = append(buf, `,"fromEffect":`...)
		buf = AppendString(buf, t.FromEffect)
	}
	return append(buf, '}')
}

func (s FieldSource) appendJSON(buf []byte) []byte {
	buf = append(buf, '{')
	sep := false
	if s.Value != nil {
		buf = append(append(buf, `"value":`...), s.Value...)
		sep = true
	}
	if s.FromField != "" {
		if sep {
			buf = append(buf, ',')
		}
		buf = AppendString(append(buf, `"fromField":`...), s.FromField)
		sep = true
	}
	if s.FromEffect != "" {
		if sep {
			buf = append(buf, ',')
		}
		buf = AppendString(append(buf, `"fromEffect":`...), s.FromEffect)
	}
	return append(buf, '}')
}

func (r Refusal) appendJSON(buf []byte) []byte {
	buf = append(buf, '{')
	sep := false
	for _, m := range [...]struct{ k, v string }{{"code", r.Code}, {"field", r.Field}, {"kind", r.Kind}} {
		if m.v == "" {
			continue
		}
		if sep {
			buf = append(buf, ',')
		}
		buf = AppendString(append(AppendString(buf, m.k), ':'), m.v)
		sep = true
	}
	return append(buf, '}')
}

// AppendJSON appends the JSON encoding of r to buf.
func (r HookResult) AppendJSON(buf []byte) []byte {
	buf = append(buf, `{"outcome":`...)
	buf = AppendString(buf, string(r.Outcome))
	if r.Kind != "" {
		buf = AppendString(append(buf, `,"kind":`...), r.Kind)
	}
	return append(buf, '}')
}

// AppendJSON appends the JSON encoding of r to buf, map members in sorted
// key order.
func (r ActionResult) AppendJSON(buf []byte) []byte {
	if r.Refusal != nil {
		buf = append(buf, `{"refusal":`...)
		return append(r.Refusal.appendJSON(buf), '}')
	}
	buf = append(buf, `{"writes":[`...)
	for i, w := range r.Writes {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = AppendString(append(buf, `{"id":`...), w.ID)
		buf = append(buf, `,"set":{`...)
		for j, k := range canonjson.SortedNames(w.Set, (&canonjson.NameBuf{})[:0]) {
			if j > 0 {
				buf = append(buf, ',')
			}
			buf = append(append(AppendString(buf, k), ':'), w.Set[k]...)
		}
		buf = append(buf, "}}"...)
	}
	return append(buf, "]}"...)
}

// ParseObjectMember parses a JSON document that must be an object holding
// exactly one member, name, whose value is an object; it returns that inner
// object. It reads PlannerInput ("request") and ActionInput ("inputs").
//
// It parses with ParseCheckedValue: its callers are guests reading input the
// host has checked. The outer object is read without building a map for it:
// a new map costs several microseconds inside a WebAssembly guest.
func ParseObjectMember(b []byte, name string) (map[string]any, error) {
	p := strictjson.NewParser(b, true)
	var obj map[string]any
	err := p.OnlyMember(name, func() (bool, error) {
		v, err := p.Value(1)
		m, ok := v.(map[string]any)
		if ok {
			obj = m
		}
		return ok, err
	})
	if err != nil {
		return nil, err
	}
	return obj, nil
}
