package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
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
		{"{\"data\":{\"name\":\"A\xff\"}}", "/data/name", "invalid UTF-8"},
		{"{\"data\":{\"name\":\"\\n\xc3\"}}", "/data/name", "invalid UTF-8"},
		{"[\"ok\",\"\xed\xa0\x80\"]", "", "invalid UTF-8"},
		{`{"data":{"name":"\ud800"}}`, "/data/name", "unpaired UTF-16 surrogate"},
		{`{"data":{"name":"\udc00\u0041"}}`, "/data/name", "unpaired UTF-16 surrogate"},
		{`{"data":{"name":"\ud800\u0041"}}`, "/data/name", "unpaired UTF-16 surrogate"},
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

// TestDecodeNeverReplacesCharacters: valid escapes, surrogate pairs and a
// literal U+FFFD decode to exactly what they name.
func TestDecodeNeverReplacesCharacters(t *testing.T) {
	v, err := Decode([]byte(`["\ud83d\ude00", "\ufffd", "é", "\u00e9"]`))
	if err != nil {
		t.Fatal(err)
	}
	if got := v.([]any); got[0] != "😀" || got[1] != "\ufffd" || got[2] != "é" || got[3] != "é" {
		t.Fatalf("decoded %q", got)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":null}]}`, `{"a":1,"a":2}`, `"x"`, `[`, `{"data":{"name":"\u0000"}}`, "{\"a\":\"\xff\"}", `["\ud800"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Decode(data)
		if err != nil {
			return
		}
		// What strict decoding accepts, the standard decoder (keeping
		// numbers as text) accepts too, as the same value: the standard
		// decoder replaces invalid UTF-8 and unpaired surrogates by U+FFFD,
		// so a difference means a replacement was accepted.
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var std any
		if dec.Decode(&std) != nil || dec.Decode(new(any)) != io.EOF {
			t.Fatalf("strict accepted what encoding/json refuses: %q", data)
		}
		if !sameJSON(v, std) {
			t.Fatalf("strict decoded %q differently from encoding/json: %v vs %v", data, v, std)
		}
	})
}

// sameJSON compares a strict decoding with encoding/json's.
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		m, ok := b.(map[string]any)
		if !ok || len(m) != len(a) {
			return false
		}
		for k, v := range a {
			if !sameJSON(v, m[k]) {
				return false
			}
		}
		return true
	case []any:
		l, ok := b.([]any)
		if !ok || len(l) != len(a) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], l[i]) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}

// TestIsPlainReadsEveryByte holds IsPlain, which reads whole words, to its
// byte-by-byte definition, for every length up to three words and a
// special byte at every position.
func TestIsPlainReadsEveryByte(t *testing.T) {
	want := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
				return false
			}
		}
		return true
	}
	probes := []byte{0x00, 0x1f, 0x20, '"', '\\', '<', '&', '=', 0x7f, 0x80, 0xff, 'a', '~'}
	for n := 0; n <= 24; n++ {
		base := []byte(strings.Repeat("plain-Text_09 ", 2)[:n])
		for at := 0; at < max(n, 1); at++ {
			for _, c := range probes {
				b := append([]byte(nil), base...)
				if n > 0 {
					b[at] = c
				}
				if s := string(b); IsPlain(s) != want(s) {
					t.Fatalf("IsPlain(%q) = %v", s, IsPlain(s))
				}
			}
		}
	}
}

// TestIsNumberIsTheDocumentGrammar holds IsNumber to the numbers a
// document's parse accepts, whole strings only.
func TestIsNumberIsTheDocumentGrammar(t *testing.T) {
	for _, s := range []string{"0", "-0", "7", "10", "1.5", "-1.25e+3", "2E-2", "1e400"} {
		if !IsNumber(s) {
			t.Errorf("IsNumber(%q) = false", s)
		}
		if _, err := Decode([]byte(`{"n":` + s + `}`)); err != nil {
			t.Errorf("a document's parse refuses %q: %v", s, err)
		}
	}
	for _, s := range []string{"", "-", "+1", ".5", "1.", "01", "1e", "1e+", "0x10", "Inf", "NaN", " 1", "1 ", "1_0", "1.5.2"} {
		if IsNumber(s) {
			t.Errorf("IsNumber(%q) = true", s)
		}
		if _, err := Decode([]byte(`{"n":` + s + `}`)); err == nil && s != " 1" && s != "1 " {
			t.Errorf("a document's parse accepts %q", s)
		}
	}
}
