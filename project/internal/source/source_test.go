package source

import (
	"errors"
	"testing"
)

func TestPositionsOfKeysAndItems(t *testing.T) {
	doc := "a:\n  - x: 1\n    y: [p, q]\n  - x: 3\nb: {c: true}\n"
	d, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if string(d.JSON) != `{"a":[{"x":1,"y":["p","q"]},{"x":3}],"b":{"c":true}}` {
		t.Fatalf("JSON = %s", d.JSON)
	}
	for path, want := range map[string]Position{
		"a":          {Line: 1, Column: 1},
		"a[0].x":     {Line: 2, Column: 5},
		"a[0].y":     {Line: 3, Column: 5},
		"a[0].y[1]":  {Line: 3, Column: 12},
		"a[1].x":     {Line: 4, Column: 5},
		"b.c":        {Line: 5, Column: 5},
		"a[1].x.z.w": {Line: 4, Column: 5}, // unwritten: nearest written ancestor
		"zz":         {Line: 1, Column: 1},
	} {
		if got := d.Locate(path); got != want {
			t.Errorf("Locate(%s) = %v, want %v", path, got, want)
		}
	}
	if !d.Has("a[0].y") || d.Has("a[0].z") {
		t.Error("Has")
	}
}

func TestParseRefusals(t *testing.T) {
	for name, doc := range map[string]string{
		"duplicate key":   "a: 1\na: 2\n",
		"two documents":   "a: 1\n---\nb: 2\n",
		"empty":           "",
		"unclosed flow":   "a: [1, 2\n",
		"non-string keys": "? [1, 2]\n: x\n",
	} {
		_, err := Parse([]byte(doc))
		var se *SyntaxError
		if !errors.As(err, &se) || se.Pos.Line < 1 {
			t.Errorf("%s: err = %v, want a located SyntaxError", name, err)
		}
	}
}

func TestParent(t *testing.T) {
	for in, want := range map[string]string{"a.b[2].c": "a.b[2]", "a.b[2]": "a.b", "a": "", "": ""} {
		if got := Parent(in); got != want {
			t.Errorf("Parent(%q) = %q, want %q", in, got, want)
		}
	}
}
