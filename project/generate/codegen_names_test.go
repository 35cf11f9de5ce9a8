package generate

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/registrum/registrum/model"
)

// goTypeName is the type name Go code generators (oapi-codegen) derive from a
// schema name or an operation id: each part between separators starts upper
// case, the separators go.
func goTypeName(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if strings.ContainsRune("-#@!$&=.+:;_~ (){}[]/", r) {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// mediaTypeName is the part generators put between an operation's name and
// "Body" for a request body of that media type.
func mediaTypeName(ct string) string {
	if ct == "application/json" {
		return "JSON"
	}
	return goTypeName(strings.ReplaceAll(strings.ReplaceAll(ct, "+", " Plus "), "json", "JSON"))
}

// codegenNameProblems lists the names a Go generator would declare twice:
// two schemas, or a schema and a name derived from an operation id
// (<Op>Response, <Op>Params, <Op>JSONBody, <Op>JSONRequestBody, …).
func codegenNameProblems(t *testing.T, doc []byte) []string {
	t.Helper()
	var d struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{}
	var problems []string
	claim := func(name, by string) {
		if prev, ok := owner[name]; ok && prev != by {
			problems = append(problems, name+": "+prev+" and "+by)
			return
		}
		owner[name] = by
	}
	for name := range d.Components.Schemas {
		claim(goTypeName(name), "schema "+name)
	}
	for _, item := range d.Paths {
		for method, raw := range item {
			var op struct {
				OperationID string `json:"operationId"`
				RequestBody struct {
					Content map[string]json.RawMessage `json:"content"`
				} `json:"requestBody"`
			}
			if json.Unmarshal(raw, &op) != nil || op.OperationID == "" {
				continue
			}
			by := "operation " + op.OperationID + " (" + method + ")"
			base := goTypeName(op.OperationID)
			claim(base+"Response", by)
			claim(base+"Params", by)
			for ct := range op.RequestBody.Content {
				claim(base+mediaTypeName(ct)+"Body", by)
				claim(base+mediaTypeName(ct)+"RequestBody", by)
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// TestOpenAPINamesDoNotCollideInGenerators: oapi-codegen turned the
// component schema case.BatchResponse and the operation case.batch both into
// CaseBatchResponse, and its client did not compile (#20). No schema name
// may meet a name generators derive from an operation id.
func TestOpenAPINamesDoNotCollideInGenerators(t *testing.T) {
	p := testPackage()
	p.Forms = []*model.Form{applicationForm()}
	doc := openAPIOf(t, p)
	if problems := codegenNameProblems(t, doc); len(problems) > 0 {
		t.Fatalf("generated names declared twice:\n%s", strings.Join(problems, "\n"))
	}
	// The checker sees the collision the old schema name made.
	old := strings.ReplaceAll(string(doc), ".BatchResult\"", ".BatchResponse\"")
	if old == string(doc) || len(codegenNameProblems(t, []byte(old))) == 0 {
		t.Fatal("the checker misses a schema named like an operation's response")
	}
}
