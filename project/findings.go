package project

import (
	"fmt"
	"sort"
	"strings"
)

// Finding is one rule a project breaks, with where it breaks it.
type Finding struct {
	// File is the project-relative path of the file.
	File string `json:"file"`
	// Line and Column locate the key (or its nearest written ancestor).
	Line   int `json:"line"`
	Column int `json:"column"`
	// Path is the key path inside the document, such as entities[0].fields[2].apiName.
	Path string `json:"path"`
	// Rule is the stable identifier of the broken rule, such as hook.phase.
	Rule string `json:"rule"`
	// Message says what is wrong and, where it helps, what to write instead.
	Message string `json:"message"`
	// Severity is SeverityError (a broken rule: the project does not
	// compile) or SeverityWarning (it compiles, but something declared will
	// not work as a client may expect).
	Severity Severity `json:"severity,omitempty"`
}

// Severity grades a finding.
type Severity string

// Severities of findings. The zero value is an error.
const (
	SeverityError   Severity = ""
	SeverityWarning Severity = "warning"
)

// String formats the finding as file:line:column: path: message [rule],
// with "warning: " before the message of a warning.
func (f Finding) String() string {
	path := f.Path
	if path == "" {
		path = "(document)"
	}
	msg := f.Message
	if f.Severity == SeverityWarning {
		msg = "warning: " + msg
	}
	return fmt.Sprintf("%s:%d:%d: %s: %s [%s]", f.File, f.Line, f.Column, path, msg, f.Rule)
}

// Findings is the error Compile returns when the project breaks rules. It
// holds every finding, in file and line order.
type Findings []Finding

// Error lists every finding, one per line.
func (fs Findings) Error() string {
	lines := make([]string, len(fs))
	for i, f := range fs {
		lines[i] = f.String()
	}
	return fmt.Sprintf("project has %d finding(s):\n%s", len(fs), strings.Join(lines, "\n"))
}

func (fs Findings) sorted() Findings {
	out := append(Findings(nil), fs...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.Path < b.Path
	})
	return out
}
