package strictyaml

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/bombtest"
)

type listener struct {
	Address *string `yaml:"address"`
	Port    *uint16 `yaml:"port"`
}

type config struct {
	Version  int               `yaml:"version"`
	Listener *listener         `yaml:"listener"`
	Clients  []client          `yaml:"clients"`
	Ratio    float64           `yaml:"ratio"`
	Labels   map[string]string `yaml:"labels"`
}

type client struct {
	ID    string   `yaml:"id"`
	Scope []string `yaml:"scope"`
	Keys  []struct {
		Kid string `yaml:"kid"`
		Use int    `yaml:"use"`
	} `yaml:"keys"`
}

const valid = `version: 1
listener:
  address: 127.0.0.1
  port: 8080
clients:
  - id: a
    scope: [read]
  - id: b
    keys:
      - kid: k1
        use: 2
ratio: 1
labels: {x: y}
`

func TestDecode(t *testing.T) {
	d, err := Parse("c.yaml", []byte(valid), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var c config
	if err := d.Decode(&c); err != nil {
		t.Fatal(err)
	}
	if c.Version != 1 || *c.Listener.Port != 8080 || c.Clients[1].Keys[0].Use != 2 || c.Ratio != 1 || c.Labels["x"] != "y" {
		t.Fatalf("decoded %+v", c)
	}
}

func TestDecodeRefusalsNameFileLineAndKeyPath(t *testing.T) {
	cases := []struct {
		name, old, new string
		path, message  string
		line           int
	}{
		{"unknown top-level key", "ratio: 1\n", "ratio: 1\nextra: 1\n", "extra", `unknown field "extra"`, 13},
		{"unknown nested key", "  port: 8080\n", "  port: 8080\n  tls: true\n", "listener.tls", `unknown field "tls"`, 5},
		{"unknown key in a list item", "        use: 2\n", "        use: 2\n        kyd: x\n", "clients[1].keys[0].kyd", `unknown field "kyd"`, 12},
		{"unknown first key of an item", "  - id: a\n", "  - idd: a\n", "clients[0].idd", `unknown field "idd"`, 6},
		{"string for an integer", "port: 8080", `port: "8080"`, "listener.port", "must be an integer, not a string", 4},
		{"fraction for an integer", "use: 2", "use: 2.5", "clients[1].keys[0].use", "must be an integer", 11},
		{"word for an integer", "port: 8080", "port: http", "listener.port", "must be an integer, not a string", 4},
		{"string for a float", "ratio: 1", "ratio: '1'", "ratio", "must be a number, not a string", 12},
		{"overflow", "port: 8080", "port: 80800", "listener.port", "must be at most 65535", 4},
		{"negative for an unsigned integer", "port: 8080", "port: -1", "listener.port", "must not be negative", 4},
		{"mapping for a list", "scope: [read]", "scope: {a: b}", "clients[0].scope", "must be a list of strings, not a mapping", 7},
		{"list for an integer", "port: 8080", "port: [1, 2]", "listener.port", "must be an integer, not a list", 4},
		{"list for a mapping", "listener:\n  address: 127.0.0.1\n  port: 8080\n", "listener: [1, 2]\n", "listener", "must be a mapping, not a list", 2},
		{"string for a mapping", "labels: {x: y}", "labels: x", "labels", "must be a mapping, not a string", 13},
		{"mapping for a string", "id: a", "id: {x: y}", "clients[0].id", "must be a string, not a mapping", 6},
		{"list for a string in a list", "scope: [read]", "scope: [[read]]", "clients[0].scope[0]", "must be a string, not a list", 7},
		{"scalar for a list of mappings", "    keys:\n      - kid: k1\n        use: 2\n", "    keys: k1\n", "clients[1].keys", "must be a list of mappings, not a string", 9},
		{"boolean for an integer", "version: 1", "version: true", "version", "must be an integer, not true or false", 1},
		{"list for a number", "ratio: 1", "ratio: [1]", "ratio", "must be a number, not a list", 12},
		{"aliased list for an integer", "version: 1\n", "version: *l\n", "version", "must be an integer, not a list", 1},
		{"duplicate key", "ratio: 1\n", "ratio: 1\nratio: 2\n", "", `mapping key "ratio" already defined`, 13},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := strings.Replace(valid, c.old, c.new, 1)
			if doc == valid {
				t.Fatal("edit not applied")
			}
			if strings.Contains(c.new, "*l") {
				doc = strings.Replace(doc, "scope: [read]", "scope: &l [read]", 1)
			}
			d, err := Parse("c.yaml", []byte(doc), Limits{})
			if err == nil {
				var v config
				err = d.Decode(&v)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if e.File != "c.yaml" || e.Path != c.path || e.Pos.Line != c.line || !strings.Contains(e.Message, c.message) {
				t.Fatalf("got %q (path %q, line %d), want path %q, line %d, message with %q", err, e.Path, e.Pos.Line, c.path, c.line, c.message)
			}
			want := fmt.Sprintf("c.yaml:%d: ", c.line)
			if c.path != "" {
				want += c.path + ": "
			}
			if !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("text %q does not start with %q", err, want)
			}
			if goTerms.MatchString(err.Error()) {
				t.Fatalf("text %q speaks of Go types", err)
			}
		})
	}
}

// goTerms matches words of Go's type system, which a refusal of a document
// must never use.
var goTerms = regexp.MustCompile(`interface \{\}|struct|uint|int\d|float\d|\bGo\b|unmarshal|\[\]|map\[`)

// TestPlainMessageRewordsTheDecodersTypeRefusals: what the decoder still
// refuses in Go's terms is worded in the document's.
func TestPlainMessageRewordsTheDecodersTypeRefusals(t *testing.T) {
	for msg, want := range map[string]string{
		"cannot unmarshal []interface {} into Go struct field fileConfig.Listener of type uint16": "must be an integer, not a list",
		"cannot unmarshal map[string]interface {} into Go struct field C.S of type string":        "must be a string, not a mapping",
		"cannot unmarshal string into Go value of type bool":                                      "must be true or false, not a string",
		"cannot unmarshal uint64 into Go struct field x.Y of type []string":                       "must be a list, not an integer",
		"cannot unmarshal []interface {} into Go struct field x.Y of type config.Listener":        "holds a value of the wrong kind",
		"sequence was used where mapping is expected":                                             "must be a mapping, not a list",
		"string was used where sequence is expected":                                              "must be a list, not a string",
		`unknown field "x"`: `unknown field "x"`,
	} {
		if got := plainMessage(msg); got != want {
			t.Errorf("plainMessage(%q) = %q, want %q", msg, got, want)
		}
	}
}

func TestParseRefusals(t *testing.T) {
	for name, doc := range map[string]string{
		"duplicate key":   "a: 1\na: 2\n",
		"two documents":   "a: 1\n---\nb: 2\n",
		"empty":           "",
		"only a comment":  "# nothing\n",
		"unclosed flow":   "a: [1, 2\n",
		"unknown alias":   "a: *nowhere\n",
		"non-string keys": "? [1, 2]\n: x\n",
	} {
		d, err := Parse("", []byte(doc), Limits{})
		if err == nil {
			_, err = d.Value()
		}
		var e *Error
		if !errors.As(err, &e) || e.Pos.Line < 1 {
			t.Errorf("%s: err = %v, want a located *Error", name, err)
		}
	}
}

func TestValueAndPositions(t *testing.T) {
	d, err := Parse("", []byte("a:\n  - x: 1\n    y: [p, q]\n  - x: 3\nb: {c: true, 'd': 1.5}\n"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := d.Value()
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(v); got != "map[a:[map[x:1 y:[p q]] map[x:3]] b:map[c:true d:1.5]]" {
		t.Fatalf("value %s", got)
	}
	for path, want := range map[string]Position{
		"a": {1, 1}, "a[0].x": {2, 5}, "a[0].y[1]": {3, 12}, "b.d": {5, 14}, "a[1].x.z": {4, 5}, "zz": {1, 1},
	} {
		if got := d.Locate(path); got != want {
			t.Errorf("Locate(%s) = %v, want %v", path, got, want)
		}
	}
	if !d.Has("b.d") || d.Has("b.e") {
		t.Error("Has")
	}
	e := d.Fail("a[0].y", "must be short", errors.New("cause"))
	if e.Error() != "3:5: a[0].y: must be short: cause" {
		t.Fatalf("Fail text %q", e)
	}
}

func TestLimits(t *testing.T) {
	laughs := "a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\n"
	cases := []struct {
		name, doc string
		lim       Limits
		message   string
	}{
		{"bytes", "a: 1\n", Limits{MaxBytes: 4}, "larger than 4 bytes"},
		{"nodes", laughs, Limits{MaxNodes: 60}, "expands to more than 60 nodes"},
		{"aliases", laughs, Limits{MaxAliases: 5}, "more than 5 aliases"},
		{"depth", strings.Repeat("[", 20) + strings.Repeat("]", 20), Limits{MaxDepth: 10}, "deeper than 10"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("l.yaml", []byte(c.doc), c.lim)
			if err == nil || !strings.Contains(err.Error(), c.message) || !strings.HasPrefix(err.Error(), "l.yaml") {
				t.Fatalf("err = %v, want %q", err, c.message)
			}
		})
	}
	if _, err := Parse("l.yaml", []byte(laughs), Limits{MaxNodes: 200}); err != nil {
		t.Fatalf("within the budget: %v", err)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	os.WriteFile(p, []byte(valid), 0o600)
	if _, err := ReadFile(p, Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p, Limits{MaxBytes: 10}); err == nil || err.Error() != p+": is larger than 10 bytes" {
		t.Fatalf("large: %v", err)
	}
	if _, err := ReadFile(dir, Limits{}); err == nil || !strings.Contains(err.Error(), "regular file") {
		t.Fatalf("folder: %v", err)
	}
	_, err := ReadFile(filepath.Join(dir, "none.yaml"), Limits{})
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "cannot be read") {
		t.Fatalf("missing: %v", err)
	}
}

// TestAliasBomb parses and decodes a "billion laughs" document in a child
// process held to a memory limit and a timeout: it must be refused by the
// node budget within bombtest.MaxCPU of processor time and 100 MiB.
func TestAliasBomb(t *testing.T) {
	bombtest.Refuses(t, func() error {
		d, err := Parse("bomb.yaml", []byte(bombtest.AliasBomb()), Limits{})
		if err == nil {
			var v any
			err = d.Decode(&v)
		}
		return err
	}, "bomb.yaml:", "expands to more than")
}

// TestWithinTheDefaultBudgetsMemoryStaysBounded: the costliest document the
// default node budget lets through (aliases expanding to just under
// DefaultMaxNodes) is read, as a tree and into a typed value, within
// bombtest.MaxCPU of processor time and 100 MiB, in a memory-limited child process.
func TestWithinTheDefaultBudgetsMemoryStaysBounded(t *testing.T) {
	n := int(math.Sqrt(DefaultMaxNodes)) - 4
	doc := bombtest.SquareBomb(n)
	a := bombtest.Bounded(t, func() error {
		d, err := Parse("wide.yaml", []byte(doc), Limits{})
		if err != nil {
			return err
		}
		if _, err := d.Value(); err != nil {
			return err
		}
		var v struct {
			X []string   `yaml:"x"`
			Y [][]string `yaml:"y"`
		}
		return d.Decode(&v)
	})
	if !a.Child && a.Err != "" {
		t.Fatalf("a document within the budgets was refused: %s", a.Err)
	}
}

// FuzzParse feeds arbitrary documents to the loader: it must refuse with an
// *Error or accept, never panic.
func FuzzParse(f *testing.F) {
	f.Add(valid)
	f.Add("authentication:\n  revokedKeyIds: !00\n")
	f.Add("a: &a [x]\nb: [*a, *a]\n")
	f.Add("? [1, 2]\n: x\n")
	f.Add(bombtest.AliasBomb())
	f.Fuzz(func(t *testing.T, doc string) {
		d, err := Parse("f.yaml", []byte(doc), Limits{MaxNodes: 10000})
		if err == nil {
			var c config
			err = d.Decode(&c)
			if err == nil {
				_, err = d.Value()
			}
		}
		var e *Error
		if err != nil && !errors.As(err, &e) {
			t.Fatalf("refusal %v is not an *Error", err)
		}
	})
}
