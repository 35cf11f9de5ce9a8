package records

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/registrum/registrum/internal/canonjson"
)

// The envelope and collection bodies are written by hand rather than by
// encoding/json's reflection, which was the largest cost of a page of
// records. The bytes are exactly those json.Marshal writes for the same
// structs (members in declaration order, domainData members sorted, HTML
// characters escaped) once JSON values are in canonical form;
// render_test.go holds them to that.
//
// JSON values (points, structured values) are written in their RFC 8785
// canonical form whatever their source: a live read's values.Encode, or a
// revision as recorded, whose members PostgreSQL's jsonb keeps in its own
// order and number form. Every read, live or over history, thus writes a
// value with the same bytes.

// MarshalJSON writes the envelope; see AppendJSON.
func (e Envelope) MarshalJSON() ([]byte, error) { return e.AppendJSON(nil) }

// AppendJSON appends the envelope's JSON to b.
func (e *Envelope) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	if e.Context != "" {
		b = append(b, `"@context":`...)
		b = AppendJSONString(b, e.Context)
		b = append(b, ',')
	}
	b = append(b, `"data":{"recordIdentifier":`...)
	b = AppendJSONString(b, e.Data.RecordIdentifier)
	b = append(b, `,"revisionIdentifier":`...)
	b = AppendJSONString(b, e.Data.RevisionIdentifier)
	b = append(b, `,"domainData":`...)
	b, err := AppendDomainData(b, e.Data.DomainData)
	if err != nil {
		return nil, err
	}
	if e.Data.Snapshot != "" {
		b = append(b, `,"snapshot":`...)
		b = AppendJSONString(b, e.Data.Snapshot)
	}
	if e.Data.Tombstoned {
		b = append(b, `,"tombstoned":true`...)
	}
	if len(e.Data.Request) > 0 {
		b = append(b, `,"request":`...)
		b = append(b, e.Data.Request...)
	}
	if len(e.Data.ChangeContext) > 0 {
		b = append(b, `,"changeContext":`...)
		b = append(b, e.Data.ChangeContext...)
	}
	if len(e.Data.RequestPresence) > 0 {
		b = append(b, `,"requestPresence":`...)
		b = append(b, e.Data.RequestPresence...)
	}
	b = append(b, `},"meta":`...)
	b = e.Meta.appendJSON(b)
	return append(b, '}'), nil
}

// MarshalJSON writes the collection; see AppendJSON.
func (c Collection) MarshalJSON() ([]byte, error) { return c.AppendJSON(nil) }

// AppendJSON appends the collection's JSON to b.
func (c *Collection) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	if c.Context != "" {
		b = append(b, `"@context":`...)
		b = AppendJSONString(b, c.Context)
		b = append(b, ',')
	}
	b = append(b, `"items":`...)
	if c.Items == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range c.Items {
			if i > 0 {
				b = append(b, ',')
			}
			it := &c.Items[i]
			b = append(b, `{"recordIdentifier":`...)
			b = AppendJSONString(b, it.RecordIdentifier)
			b = append(b, `,"revisionIdentifier":`...)
			b = AppendJSONString(b, it.RevisionIdentifier)
			b = append(b, `,"domainData":`...)
			var err error
			if it.DomainData == nil && it.Values != nil {
				b, err = appendMembers(b, c.Members, it.Values)
			} else {
				b, err = AppendDomainData(b, it.DomainData)
			}
			if err != nil {
				return nil, err
			}
			if it.Tombstoned {
				b = append(b, `,"tombstoned":true`...)
			}
			if len(it.ChangeContext) > 0 {
				b = append(b, `,"changeContext":`...)
				b = append(b, it.ChangeContext...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"pageInfo":{"nextCursor":`...)
	if c.PageInfo.NextCursor == nil {
		b = append(b, "null"...)
	} else {
		b = AppendJSONString(b, *c.PageInfo.NextCursor)
	}
	b = append(b, `},"meta":`...)
	b = c.Meta.appendJSON(b)
	if c.Count != nil {
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, *c.Count, 10)
	}
	if c.Snapshot != "" {
		b = append(b, `,"snapshot":`...)
		b = AppendJSONString(b, c.Snapshot)
	}
	return append(b, '}'), nil
}

func (m *Meta) appendJSON(b []byte) []byte {
	b = append(b, `{"registryIdentifier":`...)
	b = AppendJSONString(b, m.RegistryIdentifier)
	b = append(b, `,"datasetIdentifier":`...)
	b = AppendJSONString(b, m.DatasetIdentifier)
	b = append(b, `,"entityTypeIdentifier":`...)
	b = AppendJSONString(b, m.EntityTypeIdentifier)
	return append(b, '}')
}

// AppendDomainData appends a domainData object, members sorted by name.
func AppendDomainData(b []byte, dd map[string]any) ([]byte, error) {
	if dd == nil {
		return append(b, "null"...), nil
	}
	var names [32]string
	keys := names[:0]
	for k := range dd {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return appendObject(b, keys, func(i int) any { return dd[keys[i]] })
}

// appendMembers appends a domainData object of the given member names (in
// their order) and wire values.
func appendMembers(b []byte, names []string, vals []any) ([]byte, error) {
	if len(names) != len(vals) {
		return nil, fmt.Errorf("domainData: %d values for %d members", len(vals), len(names))
	}
	return appendObject(b, names, func(i int) any { return vals[i] })
}

// appendObject appends a domainData object of the given member names, in
// their order, the i-th valued value(i).
func appendObject(b []byte, names []string, value func(i int) any) ([]byte, error) {
	b = append(b, '{')
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, k)
		b = append(b, ':')
		var err error
		if b, err = AppendValue(b, value(i)); err != nil {
			return nil, fmt.Errorf("domainData member %q: %w", k, err)
		}
	}
	return append(b, '}'), nil
}

// AppendValue appends a wire value (see values.Encode) as a member of
// domainData is written.
func AppendValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return AppendJSONString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	}
	// Structured values (json.RawMessage) in canonical form, and the rest:
	// json.Marshal escapes HTML characters in a raw message.
	if raw, ok := v.(json.RawMessage); ok {
		c, err := canonjson.Transform(raw)
		if err != nil {
			return nil, fmt.Errorf("a JSON value: %w", err)
		}
		v = json.RawMessage(c)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, out...), nil
}

// AppendJSONString appends s as a JSON string exactly as json.Marshal writes it.
func AppendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			// Rare in identifiers and most values: leave escaping,
			// invalid UTF-8 and U+2028/U+2029 to encoding/json.
			out, _ := json.Marshal(s)
			return append(b, out...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
