package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeRefusals(t *testing.T) {
	cases := []struct {
		in, ptr, msg string
	}{
		{`{"a":1,"a":2}`, "/a", "duplicate"},
		{`{"data":{"x":1,"x":1}}`, "/data/x", "duplicate"},
		{`{"a/b":{"c":1,"c":2}}`, "/a~1b/c", "duplicate"},
		{`{"a":1} {}`, "", "after the JSON value"},
		{`{"a":`, "/a", "end of JSON"},
		{`[1,2`, "", "malformed"},
		{strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), "", "deeper"},
	}
	for _, c := range cases {
		_, err := Decode([]byte(c.in))
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%s: err = %v, want SyntaxError", c.in, err)
			continue
		}
		if !strings.HasPrefix(se.Pointer, c.ptr) || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("%s: got pointer %q msg %q, want %q and %q", c.in, se.Pointer, se.Msg, c.ptr, c.msg)
		}
	}
}

func TestDecodeKeepsNumbersExactly(t *testing.T) {
	v, err := Decode([]byte(`{"n": 9007199254740993, "d": 1.10, "s": "x", "b": true, "z": null, "l": []}`))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	if m["n"] != json.Number("9007199254740993") || m["d"] != json.Number("1.10") {
		t.Fatalf("numbers changed: %v %v", m["n"], m["d"])
	}
	if m["z"] != nil || m["b"] != true || m["s"] != "x" || len(m["l"].([]any)) != 0 {
		t.Fatalf("decoded %v", m)
	}
	depthOK := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if _, err := Decode([]byte(depthOK)); err != nil {
		t.Fatalf("depth %d refused: %v", MaxDepth, err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":null}]}`, `{"a":1,"a":2}`, `"x"`, `[`, `{"data":{"name":"\u0000"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Decode(data)
		if err != nil {
			return
		}
		// What strict decoding accepts, the standard decoder accepts too.
		var std any
		if json.Unmarshal(data, &std) != nil {
			t.Fatalf("strict accepted what encoding/json refuses: %q", data)
		}
		_ = v
	})
}
