// Package invocation names the registrum binary the way the user invoked
// it, so that every command the tools print can be pasted as printed: `go
// run ./cmd/registrum` under go run, the bare name when that name is found
// on PATH, else the path the binary was started by.
package invocation

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// GoRun is how the commands are printed when the binary runs under `go run`
// from the module's root.
const GoRun = "go run ./cmd/registrum"

// Command returns the command that runs this binary again from the current
// folder, shell-quoted: [GoRun] when the binary lives in the go build cache
// (go run), the name it was invoked by when that name resolves to this
// binary through PATH, else the path it was started by (absolute when it
// cannot be found again from here).
func Command() string {
	return command(os.Args[0], os.Executable, exec.LookPath)
}

// command is Command over its inputs: the program's argv[0], how to find
// the running executable, and how to look a name up on PATH.
func command(arg0 string, executable func() (string, error), lookPath func(string) (string, error)) string {
	if goBuild(arg0) {
		return GoRun
	}
	if arg0 != "" && !strings.ContainsRune(arg0, filepath.Separator) {
		if found, err := lookPath(arg0); err == nil && sameFile(found, executable) {
			return ShellQuote(arg0)
		}
	} else if arg0 != "" {
		if _, err := os.Stat(arg0); err == nil {
			return ShellQuote(arg0)
		}
	}
	if exe, err := executable(); err == nil {
		return ShellQuote(exe)
	}
	return ShellQuote(arg0)
}

// goBuild reports whether path is a binary `go run` built into a go-build
// folder (GOTMPDIR or the temporary folder: go-build<digits>/b001/exe/).
func goBuild(path string) bool {
	return strings.Contains(path, string(filepath.Separator)+"go-build") && strings.Contains(path, string(filepath.Separator)+"exe"+string(filepath.Separator))
}

// sameFile reports whether path is the running executable.
func sameFile(path string, executable func() (string, error)) bool {
	exe, err := executable()
	if err != nil {
		return false
	}
	a, errA := os.Stat(path)
	b, errB := os.Stat(exe)
	return errA == nil && errB == nil && os.SameFile(a, b)
}

// ShellQuote quotes s as one word for a POSIX shell and an interactive
// bash: s as it is when every byte is plainly safe; else in single quotes;
// a word holding a single quote goes in double quotes (with \, $, ` and "
// escaped) unless it holds a ! (bash's history expansion), which closes
// and reopens single quotes around an escaped quote.
func ShellQuote(s string) string {
	safe := s != ""
	for i := 0; safe && i < len(s); i++ {
		c := s[i]
		safe = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("@%_+=:,./-", c) >= 0
	}
	switch {
	case safe:
		return s
	case !strings.Contains(s, "'"):
		return "'" + s + "'"
	case !strings.Contains(s, "!"):
		r := strings.NewReplacer(`\`, `\\`, `$`, `\$`, "`", "\\`", `"`, `\"`)
		return `"` + r.Replace(s) + `"`
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
