package contract

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// referenceCheck is what the host checked before CheckObjectMember: the
// document parsed into values, then its shape.
func referenceCheck(b []byte, name string) bool {
	v, err := ParseValue(b)
	if err != nil {
		return false
	}
	obj, ok := v.(map[string]any)
	if !ok || len(obj) != 1 {
		return false
	}
	_, ok = obj[name].(map[string]any)
	return ok
}

var checkSeeds = []string{
	`{"request":{}}`,
	` {"request" : {"a":1,"b":[true,false,null,{"c":"d"}],"e":-1.5e3,"f":"\u00e9\n\"x\""}} `,
	`{"request":{"note":"` + strings.Repeat("long text é ", 40) + `"}}`,
	`{"request":1,"request":{"a":2}}`,
	`{"request":{"a":2},"request":1}`,
	`{"request":{},"other":{}}`,
	`{}`, `[]`, `{"request":[]}`, `{"request":{}} x`, `{"request":{"a":"` + "\x01" + `"}}`,
	`{"request":{"a":"` + "\xff" + `"}}`, `{"request":{"` + "\xc3" + `":1}}`, `{"request":{"a":"\x"}}`,
	`{"request":{"a":"\ud800"}}`, `{"request":{"a":01}}`, `{"request":{"a":1.}}`, `{"request":{"a":tru}}`,
	`{"request":{"a":1,}}`, `{"request":{"a" 1}}`, `{"request":` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70) + `}`,
	`{"request":` + strings.Repeat(`[`, 62) + strings.Repeat(`]`, 62) + `}`,
	`{"request":` + strings.Repeat(`[`, 63) + strings.Repeat(`]`, 63) + `}`,
	`{"request":` + strings.Repeat(`[`, 64) + strings.Repeat(`]`, 64) + `}`,
}

func TestCheckObjectMemberAgreesWithParsing(t *testing.T) {
	check := func(doc []byte) {
		t.Helper()
		want := referenceCheck(doc, "request")
		got := CheckObjectMember(doc, "request") == nil
		if got != want {
			t.Fatalf("CheckObjectMember(%q) accepts=%v, parsing accepts=%v", doc, got, want)
		}
	}
	for _, s := range checkSeeds {
		check([]byte(s))
	}
	// Every seed with one byte changed, dropped or duplicated.
	r := rand.New(rand.NewPCG(7, 8))
	alphabet := []byte("{}[]\":,\\ u0123456789abcdefnrtl.-+eE\x00\x1f\x7f\x80\xc3\xa9\xff\xed")
	for range 60000 {
		b := []byte(checkSeeds[r.IntN(len(checkSeeds))])
		if len(b) == 0 {
			continue
		}
		i := r.IntN(len(b))
		switch r.IntN(3) {
		case 0:
			b[i] = alphabet[r.IntN(len(alphabet))]
		case 1:
			b = append(b[:i:i], b[i+1:]...)
		default:
			b = append(b[:i+1:i+1], b[i:]...)
		}
		check(b)
	}
}

func FuzzCheckObjectMember(f *testing.F) {
	for _, s := range checkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if got, want := CheckObjectMember(doc, "request") == nil, referenceCheck(doc, "request"); got != want {
			t.Fatalf("CheckObjectMember(%q) accepts=%v, parsing accepts=%v", doc, got, want)
		}
	})
}

// TestStringScanFindsEverySpecialByte puts each byte that ends or breaks a
// plain string at every offset of strings long enough for the word scan,
// and compares ParseValue's verdict and value with encoding/json's.
func TestStringScanFindsEverySpecialByte(t *testing.T) {
	for _, special := range []string{`"`, `\n`, `\u00e9`, "\x00", "\x1f", "\x7f", "é", "\xff", `\`} {
		for n := 0; n < 40; n++ {
			for at := 0; at <= n; at++ {
				s := strings.Repeat("a", at) + special + strings.Repeat("b", n-at)
				doc := []byte(`["` + s + `"]`)
				v, err := ParseValue(doc)
				var want []string
				werr := json.Unmarshal(doc, &want)
				if (err == nil) != (werr == nil && utf8.Valid(doc)) {
					t.Fatalf("%q: ParseValue error %v, encoding/json error %v", doc, err, werr)
				}
				if err == nil && v.([]any)[0].(string) != want[0] {
					t.Fatalf("%q: ParseValue read %q, encoding/json %q", doc, v, want[0])
				}
			}
		}
	}
}
