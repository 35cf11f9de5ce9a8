// The architecture test: each folder's imports point one way, as the layout
// table in docs/architecture.md says. It reads the import graph with
// `go list` and fails on any import a folder may not make, and on any
// forbidden dependency anywhere in a package's build (test builds included,
// except through the test helpers a rule names).
package registrum_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/registrum/registrum"

// Third-party and standard packages the rules name.
const (
	netHTTP = "net/http"
	pgx     = "github.com/jackc/pgx/v5"
	river   = "github.com/riverqueue/river"
	wazero  = "github.com/tetratelabs/wazero"
	tengo   = "github.com/d5/tengo/v2"
)

// A rule governs the packages in a folder (and below it, unless a more
// specific rule names a subfolder). Folders are module-relative.
type rule struct {
	folder string
	// may lists the folders of ours that a package here may import, besides
	// its own folder; "*" means any (but cmd/).
	may []string
	// testMay lists further folders that its tests may import directly.
	testMay []string
	// helpers are test helper packages (…test) through which its tests may
	// run another service; what a helper brings in is not held against the
	// test.
	helpers []string
	// never lists import paths (and their subpackages) that must not be in
	// the package's build, nor in its tests' builds.
	never []string
	// neverBuilt lists import paths that must not be in the package's own
	// build; its tests may use them (net/http for httptest or a validator).
	neverBuilt []string
}

// rules is the layout. Keep it in step with docs/architecture.md.
var rules = []rule{
	{folder: "cmd/registrum", may: []string{"*"}, testMay: []string{"*"}},
	{folder: "model", may: []string{"internal"},
		never: []string{netHTTP, pgx, river, wazero, tengo}},
	{folder: "project", may: []string{"model", "internal", "plugins"},
		never: []string{pgx, river}, neverBuilt: []string{netHTTP}},
	{folder: "issuer", may: []string{"internal"}},
	{folder: "issuer/issuertest", may: []string{"issuer", "internal", "sdk/tokensource"}},
	{folder: "host", may: []string{"model", "store", "planners", "hooks", "plugins", "internal", "sdk/tokensource"},
		testMay: []string{"project", "sdk/webhook"}, helpers: []string{"issuer/issuertest", "store/storetest"}},
	// The record kernel imports none of the capability rooms built over it
	// (host/gis, host/history, host/actions, host/ingest, host/requests),
	// and not planners/: only the change-request room and the assembly
	// run planners.
	{folder: "host/records", may: []string{"host/access", "host/cursor", "host/problem", "model", "store", "internal"},
		helpers: []string{"store/storetest"}},
	// The change-request room: the workflow, the review authorities' client
	// and jobs (its own issuer credentials, as any client), and the
	// attachment verification jobs (the verifier runtime).
	{folder: "host/requests", may: []string{"host/records", "host/access", "host/problem", "host/config", "model", "store", "planners", "plugins/verifier", "sdk/tokensource", "internal"},
		helpers: []string{"store/storetest"}},
	// The capability rooms read and write through the kernel; none imports
	// another room, planners/ or the edge.
	{folder: "host/gis", may: []string{"host/records", "host/access", "host/cursor", "host/problem", "model", "internal"},
		helpers: []string{"store/storetest"}},
	{folder: "host/history", may: []string{"host/records", "host/access", "host/cursor", "host/problem", "model", "store", "internal"},
		helpers: []string{"store/storetest"}},
	{folder: "host/ingest", may: []string{"host/records", "host/access", "host/problem", "model", "store", "internal"},
		helpers: []string{"store/storetest"}},
	{folder: "host/actions", may: []string{"host/records", "host/access", "host/problem", "model", "store", "plugins/contract", "internal"},
		helpers: []string{"store/storetest"}},
	{folder: "host/httpapi", may: []string{"host", "model", "plugins", "internal"},
		testMay: []string{"project"}, helpers: []string{"store/storetest"}},
	// Test support for tests that run a whole record host (host tests and
	// the performance reports in bench/): it compiles projects and starts
	// an issuer.
	{folder: "host/hosttest", may: []string{"host", "project", "store", "issuer/issuertest", "model", "internal"}},
	{folder: "host/auth/authtest", may: []string{"host", "issuer/issuertest", "internal"}},
	{folder: "store", may: []string{"model", "internal"},
		never: []string{netHTTP, wazero, tengo}},
	{folder: "planners", may: []string{"model", "plugins", "internal"},
		never: []string{pgx, river}, neverBuilt: []string{netHTTP}},
	{folder: "hooks", may: []string{"model", "store", "plugins", "internal"}},
	{folder: "plugins", may: []string{"model", "internal"},
		testMay: []string{"sdk", "examples"}, never: []string{pgx, river}},
	{folder: "plugins/contract", may: []string{"internal"},
		never: []string{pgx, river, wazero, tengo}, neverBuilt: []string{netHTTP}},
	{folder: "plugins/verifier/proto", may: []string{"internal"},
		never: []string{pgx, river, wazero, tengo}},
	{folder: "sdk", may: []string{"plugins/contract", "plugins/verifier/proto", "internal"},
		helpers: []string{"issuer/issuertest"}, never: []string{pgx, river, wazero, tengo}},
	{folder: "examples", may: []string{"sdk", "plugins/contract"}, testMay: []string{"*"}},
	{folder: "internal", may: nil, never: []string{pgx, river, wazero, tengo}},
	// Test support for the record host (start one, call it), shared by the
	// host's tests and the performance reports in bench/: it starts a host
	// and a real issuer, so it builds on them.

}

// ruleFor returns the most specific rule for a module-relative package path.
func ruleFor(rel string) (rule, bool) {
	best, found := rule{}, false
	for _, r := range rules {
		if under(rel, r.folder) && (!found || len(r.folder) > len(best.folder)) {
			best, found = r, true
		}
	}
	return best, found
}

// under reports whether path is folder or inside it.
func under(path, folder string) bool {
	return path == folder || strings.HasPrefix(path, folder+"/")
}

// allowed reports whether a package of rule r may import the module-relative
// package dep.
func (r rule) allowed(dep string, folders []string) bool {
	if under(dep, r.folder) {
		return true
	}
	for _, f := range folders {
		if f == "*" || under(dep, f) {
			return true
		}
	}
	return false
}

type listed struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// goList runs go list with -json and decodes the stream of packages.
func goList(t *testing.T, args ...string) []listed {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// graph is the import graph of our packages and everything they and their
// tests build on.
type graph struct {
	ours    []listed
	imports map[string][]string
}

func loadGraph(t *testing.T) *graph {
	ours := goList(t, "./...")
	seen := map[string]bool{}
	args := []string{"-deps", "./..."}
	for _, p := range ours {
		for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
			if !seen[imp] && !strings.HasPrefix(imp, module) {
				seen[imp] = true
				args = append(args, imp)
			}
		}
	}
	g := &graph{ours: ours, imports: map[string][]string{}}
	for _, p := range goList(t, args...) {
		g.imports[p.ImportPath] = p.Imports
	}
	return g
}

// closure returns every package reachable from roots, not descending into
// the packages of stop.
func (g *graph) closure(roots []string, stop func(string) bool) map[string]bool {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		if seen[p] || stop(p) {
			return
		}
		seen[p] = true
		for _, d := range g.imports[p] {
			walk(d)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return seen
}

func relative(path string) (string, bool) {
	if path == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

func containsPath(set map[string]bool, path string) bool {
	for p := range set {
		if under(p, path) {
			return true
		}
	}
	return false
}

// violations checks every package of ours against the rules.
func (g *graph) violations() []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	for _, p := range g.ours {
		rel, _ := relative(p.ImportPath)
		// Nothing outside the binary imports cmd/.
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if dep, ok := relative(imp); ok && under(dep, "cmd") && !under(rel, "cmd") {
				add("%s imports %s: nothing imports cmd/", rel, dep)
			}
		}
		r, ok := ruleFor(rel)
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			if dep, ok := relative(imp); ok && !r.allowed(dep, r.may) {
				add("%s imports %s: %s/ may import only %s", rel, dep, r.folder, list(r.may))
			}
		}
		for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
			dep, ok := relative(imp)
			if !ok || imp == p.ImportPath || slices.Contains(r.helpers, dep) {
				continue
			}
			if !r.allowed(dep, slices.Concat(r.may, r.testMay)) {
				add("tests of %s import %s: they may import only %s, and reach other services through %s", rel, dep, list(slices.Concat(r.may, r.testMay)), list(r.helpers))
			}
		}
		built := g.closure([]string{p.ImportPath}, func(string) bool { return false })
		for _, n := range slices.Concat(r.never, r.neverBuilt) {
			if containsPath(built, n) {
				add("%s depends on %s, which %s/ must never build on", rel, n, r.folder)
			}
		}
		isHelper := func(path string) bool {
			dep, ok := relative(path)
			return ok && slices.Contains(r.helpers, dep)
		}
		tests := g.closure(slices.Concat([]string{p.ImportPath}, p.TestImports, p.XTestImports), isHelper)
		for _, n := range r.never {
			if containsPath(tests, n) && !containsPath(built, n) {
				add("tests of %s depend on %s, which %s/ must never build on (a test helper named in the rule may)", rel, n, r.folder)
			}
		}
	}
	sort.Strings(out)
	return out
}

func list(folders []string) string {
	if len(folders) == 0 {
		return "nothing of ours"
	}
	return strings.Join(folders, ", ")
}

func TestLayering(t *testing.T) {
	g := loadGraph(t)
	if v := g.violations(); len(v) > 0 {
		t.Errorf("%d imports break the layout (docs/architecture.md):\n  %s", len(v), strings.Join(v, "\n  "))
	}
}

// TestLayeringCatchesABreak holds the checker itself to account: a graph in
// which the store imports the host's problem codes (and so net/http) must be
// refused, and so must a record kernel that imports a capability room, or a
// room that imports planners/.
func TestLayeringCatchesABreak(t *testing.T) {
	rooms := &graph{
		ours: []listed{
			{ImportPath: module + "/host/records", Imports: []string{module + "/host/history"}},
			{ImportPath: module + "/host/gis", Imports: []string{module + "/planners", module + "/host/history"}},
		},
		imports: map[string][]string{},
	}
	wantRooms := []string{
		"host/gis imports host/history: host/gis/ may import only host/records, host/access, host/cursor, host/problem, model, internal",
		"host/gis imports planners: host/gis/ may import only host/records, host/access, host/cursor, host/problem, model, internal",
		"host/records imports host/history: host/records/ may import only host/access, host/cursor, host/problem, model, store, internal",
	}
	if v := rooms.violations(); !slices.Equal(v, wantRooms) {
		t.Fatalf("room violations:\n  %s\nwant:\n  %s", strings.Join(v, "\n  "), strings.Join(wantRooms, "\n  "))
	}
	g := &graph{
		ours: []listed{{ImportPath: module + "/store/query", Imports: []string{module + "/host/problem"}}},
		imports: map[string][]string{
			module + "/store/query":  {module + "/host/problem"},
			module + "/host/problem": {netHTTP},
		},
	}
	v := g.violations()
	want := []string{
		"store/query depends on net/http, which store/ must never build on",
		"store/query imports host/problem: store/ may import only model, internal",
	}
	if !slices.Equal(v, want) {
		t.Fatalf("violations:\n  %s\nwant:\n  %s", strings.Join(v, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestSDKClientBuildsOnNoServer checks that the typed /v1 client is under
// the sdk/ rule and that neither it nor its tests build on the record host,
// the store or the issuer: a registry's clients import it without the server.
func TestSDKClientBuildsOnNoServer(t *testing.T) {
	if r, ok := ruleFor("sdk/client"); !ok || r.folder != "sdk" {
		t.Fatalf("sdk/client is not under the sdk/ rule: %+v", r)
	}
	for _, p := range goList(t, "-deps", "-test", "./sdk/client/...") {
		for _, server := range []string{"/host", "/store", "/issuer"} {
			if p.ImportPath == module+server || strings.HasPrefix(p.ImportPath, module+server+"/") {
				t.Errorf("sdk/client builds on %s", p.ImportPath)
			}
		}
	}
}
