package project

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// semanticDespite runs the semantic rules on a document that breaks the
// format schema: the document is decoded leniently (when a value has the
// wrong JSON type, the faulty values are replaced by null, which decodes to
// nothing) and resolved, and the findings of the rules are added unless they
// lie inside a value the schema refused. When the document cannot be decoded
// even so, the schema findings stand alone.
func (c *compiler) semanticDespite(docJSON []byte, issues []structuralIssue) {
	var refused []string
	for _, is := range issues {
		if !is.unknownKey {
			refused = append(refused, is.path)
		}
	}
	proj, err := decodeProject(docJSON, false)
	if err != nil {
		// A value of the wrong JSON type: leave the faulty values out.
		dec := json.NewDecoder(bytes.NewReader(docJSON))
		dec.UseNumber()
		var root any
		if err := dec.Decode(&root); err != nil {
			return
		}
		for _, is := range issues {
			if !is.unknownKey && !is.missing && len(is.at) > 0 {
				root = nullAt(root, is.at)
			}
		}
		pruned, err := json.Marshal(root)
		if err != nil {
			return
		}
		if proj, err = decodeProject(pruned, false); err != nil {
			return
		}
	}
	schema := c.findings
	defer func() {
		if recover() != nil {
			// A rule met a shape it cannot read: keep the schema's findings.
			c.findings = schema
		}
	}()
	c.findings = nil
	c.proj = proj
	c.resolve()
	semantic := c.findings
	c.findings = schema
	for _, f := range semantic {
		if !inside(f.Path, refused) {
			c.findings = append(c.findings, f)
		}
	}
}

// nullAt replaces the value at the location by null.
func nullAt(v any, at []string) any {
	if len(at) == 0 {
		return nil
	}
	switch t := v.(type) {
	case map[string]any:
		if child, ok := t[at[0]]; ok {
			t[at[0]] = nullAt(child, at[1:])
		}
	case []any:
		if i, err := strconv.Atoi(at[0]); err == nil && i >= 0 && i < len(t) {
			t[i] = nullAt(t[i], at[1:])
		}
	}
	return v
}

// inside reports whether a key path is one of paths or below one of them.
func inside(path string, paths []string) bool {
	for _, p := range paths {
		if p == "" || path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[") {
			return true
		}
	}
	return false
}
