package project

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/registrum/registrum/project/internal/schemagen"
)

// FormatSchemaID is the $id of the JSON Schema of the authoring format.
const FormatSchemaID = "https://registrum.dev/schemas/project/v1.schema.json"

// FormatSchema returns the JSON Schema (2020-12) of the authoring format,
// generated from the Go types of this package, as indented JSON. It is
// shipped as docs/schemas/project.schema.json for editors.
func FormatSchema() []byte {
	s := schemagen.Generate(Project{}, FormatSchemaID, "Registrum registry project")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		panic(fmt.Sprintf("project: format schema: %v", err)) // maps of plain values always encode
	}
	return buf.Bytes()
}

var (
	formatSchemaOnce sync.Once
	formatSchema     *jsonschema.Schema
	formatSchemaErr  error
)

func compiledFormatSchema() (*jsonschema.Schema, error) {
	formatSchemaOnce.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(FormatSchema()))
		if err != nil {
			formatSchemaErr = err
			return
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource(FormatSchemaID, doc); err != nil {
			formatSchemaErr = err
			return
		}
		formatSchema, formatSchemaErr = c.Compile(FormatSchemaID)
	})
	return formatSchema, formatSchemaErr
}

var printer = message.NewPrinter(language.English)

// structuralIssue is one place where a document departs from the format schema.
type structuralIssue struct {
	path    string
	message string
	// unknownKey marks an unknown key: the rest of the document can still
	// be checked, since decoding ignores it.
	unknownKey bool
	// at is the location of the faulty value (for a missing key, of the
	// object that lacks it).
	at []string
	// missing marks a missing required key.
	missing bool
}

// validateFormat checks the document against the format schema and returns
// every leaf error with its key path.
func validateFormat(docJSON []byte) ([]structuralIssue, error) {
	sch, err := compiledFormatSchema()
	if err != nil {
		return nil, fmt.Errorf("project: format schema: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(docJSON))
	if err != nil {
		return nil, fmt.Errorf("project: read document: %w", err)
	}
	err = sch.Validate(inst)
	if err == nil {
		return nil, nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return nil, fmt.Errorf("project: validate document: %w", err)
	}
	var out []structuralIssue
	collect(ve, &out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].path < out[j].path })
	// One issue per path and message.
	dedup := out[:0]
	seen := map[string]bool{}
	for _, is := range out {
		k := is.path + "\x00" + is.message
		if !seen[k] {
			seen[k] = true
			dedup = append(dedup, is)
		}
	}
	return dedup, nil
}

func collect(ve *jsonschema.ValidationError, out *[]structuralIssue) {
	switch k := ve.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			*out = append(*out, structuralIssue{path: keyPath(append(append([]string{}, ve.InstanceLocation...), p)), message: fmt.Sprintf("unknown key %q", p), unknownKey: true})
		}
		return
	case *kind.Required:
		for _, m := range k.Missing {
			*out = append(*out, structuralIssue{path: keyPath(ve.InstanceLocation), message: fmt.Sprintf("missing required key %q", m), at: ve.InstanceLocation, missing: true})
		}
		return
	case *kind.OneOf, *kind.AnyOf:
		*out = append(*out, structuralIssue{path: keyPath(ve.InstanceLocation), message: "value matches none of the allowed forms: " + oneLine(ve), at: ve.InstanceLocation})
		return
	}
	if len(ve.Causes) == 0 {
		*out = append(*out, structuralIssue{path: keyPath(ve.InstanceLocation), message: kindMessage(ve.ErrorKind), at: ve.InstanceLocation})
		return
	}
	for _, c := range ve.Causes {
		collect(c, out)
	}
}

// kindMessage words the common schema errors plainly.
func kindMessage(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Minimum:
		return fmt.Sprintf("must be at least %s, not %s", k.Want.RatString(), k.Got.RatString())
	case *kind.Maximum:
		return fmt.Sprintf("must be at most %s, not %s", k.Want.RatString(), k.Got.RatString())
	case *kind.MinItems:
		return fmt.Sprintf("needs at least %d item(s), has %d", k.Want, k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("takes at most %d item(s), has %d", k.Want, k.Got)
	case *kind.MinLength:
		return fmt.Sprintf("needs at least %d character(s), has %d", k.Want, k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("takes at most %d character(s), has %d", k.Want, k.Got)
	case *kind.Pattern:
		if k.Want == schemagenIdent {
			return fmt.Sprintf("%q is not an identifier: lowercase letter first, then up to 63 lowercase letters, digits, '-' or '_'", k.Got)
		}
		return fmt.Sprintf("%q does not match %s", k.Got, k.Want)
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = fmt.Sprint(w)
		}
		return fmt.Sprintf("%v is not one of %s", k.Got, strings.Join(want, ", "))
	case *kind.Const:
		return fmt.Sprintf("must be %v", k.Want)
	case *kind.Type:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = writtenKind(w)
		}
		return fmt.Sprintf("must be %s, not %s", strings.Join(want, " or "), writtenKind(k.Got))
	}
	return k.LocalizedString(printer)
}

// writtenKind names a JSON Schema type the way a YAML author writes it:
// "array" is a list, "object" a mapping.
func writtenKind(jsonType string) string {
	switch jsonType {
	case "array":
		return "a list"
	case "object":
		return "a mapping"
	case "string":
		return "a string"
	case "integer":
		return "an integer"
	case "number":
		return "a number"
	case "boolean":
		return "true or false"
	}
	return jsonType // null
}

const schemagenIdent = schemagen.IdentPattern

func oneLine(ve *jsonschema.ValidationError) string {
	var msgs []string
	for _, c := range ve.Causes {
		var leaves []structuralIssue
		collect(c, &leaves)
		for _, l := range leaves {
			msgs = append(msgs, l.message)
		}
	}
	return strings.Join(msgs, "; or ")
}

// keyPath renders a JSON pointer's segments as a.b[0].c.
func keyPath(segs []string) string {
	var b strings.Builder
	for _, s := range segs {
		if s != "" && strings.Trim(s, "0123456789") == "" {
			b.WriteString("[" + s + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}
