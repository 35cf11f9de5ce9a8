package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goSlice is Go's formatting of a slice of words, "[a b c]".
var goSlice = regexp.MustCompile(`\[[a-z.]+( [a-z.]+)+\]`)

// A command line refused before the command runs names the command, its
// usage and its --help, exits 2, and shows no Go syntax or package names.
func TestUsageErrorsNameTheCommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"compile", "--nope"}, []string{"registrum: compile: unknown flag: --nope\n", "usage: " + binary + " compile PROJECT_DIR", "see " + binary + " compile --help"}},
		{[]string{"compile", "a", "b"}, []string{"registrum: compile: accepts 1 arg(s), received 2\n", "see " + binary + " compile --help"}},
		{[]string{"token"}, []string{"registrum: token: required flag(s)", "see " + binary + " token --help"}},
		{[]string{"plugins", "run", "--engine"}, []string{"registrum: plugins run: flag needs an argument: --engine", "see " + binary + " plugins run --help"}},
		{[]string{"plugins", "nope"}, []string{`registrum: plugins: unknown command "nope"`, "see " + binary + " plugins --help"}},
		{[]string{"--nope"}, []string{"registrum: unknown flag: --nope\n", "see " + binary + " --help"}},
	} {
		_, stderr, code := exitOf(t, c.args...)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2", strings.Join(c.args, " "), code)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", strings.Join(c.args, " "), w, stderr)
			}
		}
	}
}

// No CLI message shows Go slice syntax or an internal package's name.
func TestMessagesShowNoGoInternals(t *testing.T) {
	empty := t.TempDir()
	anon := filepath.Join(t.TempDir(), "anon")
	copyProject(t, "../../project/testdata/broken/profile.anonymous", anon)
	for _, args := range [][]string{
		{"compile", empty, "--check"},
		{"compile", anon, "--check"},
		{"token", "--token-url", "http://127.0.0.1:1/token", "--client-id", "c", "--key", filepath.Join(empty, "missing.jwk")},
	} {
		_, stderr, code := exitOf(t, args...)
		if code == 0 || stderr == "" {
			t.Fatalf("%s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
		}
		if m := goSlice.FindString(stderr); m != "" {
			t.Errorf("%s: Go slice syntax %s in:\n%s", strings.Join(args, " "), m, stderr)
		}
		for _, pkg := range []string{"tokensource:", "project:", "secrets:", "store:"} {
			if strings.Contains(stderr, pkg) {
				t.Errorf("%s: internal package name %s in:\n%s", strings.Join(args, " "), pkg, stderr)
			}
		}
	}
	if got := userMessage("token: tokensource: key file: stat x: no such file"); got != "token: key file: stat x: no such file" {
		t.Errorf("userMessage = %q", got)
	}
}

func copyProject(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}

// compile accepts the project document as well as its folder, and asks
// for the folder when given another file.
func TestCompileTakesTheProjectDocument(t *testing.T) {
	proj := filepath.Join(t.TempDir(), "p")
	copyProject(t, "../../examples/childsupport", proj)
	out, stderr, code := exitOf(t, "compile", filepath.Join(proj, "registry.yaml"), "--check")
	if code != 0 || !strings.HasPrefix(out, proj+": no findings") {
		t.Fatalf("registry.yaml: exit %d\n%s%s", code, out, stderr)
	}
	other := filepath.Join(proj, "README.txt")
	os.WriteFile(other, []byte("x"), 0o600)
	_, stderr, code = exitOf(t, "compile", other, "--check")
	if code != 2 || !strings.Contains(stderr, "give the project folder") {
		t.Fatalf("another file: exit %d: %s", code, stderr)
	}
}

// compile warns, without refusing, about a field no profile can read or
// write, naming the entity and the field.
func TestCompileWarnsAboutAnUngrantedField(t *testing.T) {
	proj := filepath.Join(t.TempDir(), "p")
	copyProject(t, "../../examples/childsupport", proj)
	doc := filepath.Join(proj, "registry.yaml")
	b, _ := os.ReadFile(doc)
	old := "      - {id: opening-hours, type: text, maxLength: 2000}\n"
	if !strings.Contains(string(b), old) {
		t.Fatal("the example lost opening-hours")
	}
	os.WriteFile(doc, []byte(strings.Replace(string(b), old, old+"      - {id: desk-phone, type: string, maxLength: 40}\n", 1)), 0o644)
	out, stderr, code := exitOf(t, "compile", proj, "--check")
	if code != 0 || !strings.Contains(out, "no findings") {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	if !strings.Contains(stderr, `warning: no profile can read or write field "desk-phone" of entity "service-office"`) || !strings.Contains(stderr, "[field.ungranted]") ||
		!strings.HasPrefix(stderr, doc+":") {
		t.Fatalf("no warning about desk-phone:\n%s", stderr)
	}
}

// plugins run --package accepts the module path plugins verify prints (the
// path inside the package), from any working folder.
func TestPluginsRunTakesTheVerifiedPath(t *testing.T) {
	pkg := filepath.Join(t.TempDir(), "pkg")
	if _, stderr, code := exitOf(t, "compile", "../../project/testdata/full", "--out", pkg); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	out, stderr, code := runPluginsCmd(t, "", "plugins", "verify", "--package", filepath.Join(pkg, "package.json"), "--cache-dir=off")
	var printed string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[1] == "hook.site-created" {
			printed = f[4]
		}
	}
	if code != 0 || printed == "" {
		t.Fatalf("verify: exit %d %q %s", code, out, stderr)
	}
	out, stderr, code = runPluginsCmd(t, capturedBody, "plugins", "run", "--package", pkg, "--module", printed, "--cache-dir=off")
	if code != 0 || out != `{"outcome":"acknowledged"}`+"\n" {
		t.Fatalf("run --module %s: exit %d %q %s", printed, code, out, stderr)
	}
}
