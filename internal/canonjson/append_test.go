package canonjson

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/strictjson"
)

// randomString draws strings rich in what escaping and ordering get wrong:
// controls, quotes, backslashes, non-ASCII (BMP above U+E000 and beyond
// it) and invalid UTF-8.
func randomString(r *rand.Rand) string {
	pieces := []string{"a", "Z", "0", " ", "\"", "\\", "\b", "\f", "\n", "\r", "\t", "\x00", "\x1f", "\x7f",
		"é", "\u2028", "\ue000", "\uffff", "😀", "\U00010000", "\xff", "\xc3", "<&>", "plain text of some length"}
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func TestAppendersMatchMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		s := randomString(r)
		want, err := marshalReflect(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, Marshal %s", s, got, want)
		}

		f := math.Float64frombits(r.Uint64())
		switch r.IntN(4) {
		case 0:
			f = float64(r.Int64N(1<<53)) * math.Pow10(r.IntN(30)-15)
		case 1:
			f = -float64(r.IntN(1000)) / 8
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			if _, err := AppendNumber(nil, f); err == nil {
				t.Fatalf("AppendNumber(%v) accepted", f)
			}
			continue
		}
		want, err = marshalReflect(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendNumber(nil, f)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("AppendNumber(%v) = %s (%v), Marshal %s", f, got, err, want)
		}

		m := map[string]string{}
		for range r.IntN(12) {
			m[randomString(r)] = randomString(r)
		}
		if invalidNames(m) {
			continue
		}
		want, err = marshalReflect(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err = AppendObject(nil, m, func(b []byte, v string) ([]byte, error) { return AppendString(b, v), nil })
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendObject(%q) = %s, Marshal %s", m, got, want)
		}
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1e-7, 1e-6, 1e21, 1e20, 1e15, 0.1, -5e-324, math.MaxFloat64} {
		want, _ := marshalReflect(f)
		if got, _ := AppendNumber(nil, f); !bytes.Equal(got, want) {
			t.Errorf("AppendNumber(%v) = %s, Marshal %s", f, got, want)
		}
	}
}

// invalidNames reports whether a name of m is invalid UTF-8 (two such names
// can become the same once replaced, which Marshal refuses).
func invalidNames(m map[string]string) bool {
	for k := range m {
		if strings.ToValidUTF8(k, "\ufffd") != k {
			return true
		}
	}
	return false
}

// randomValue draws a decoded JSON document of bounded depth.
func randomValue(r *rand.Rand, depth int) any {
	switch k := r.IntN(8); {
	case depth > 3 || k == 0:
		return randomString(r)
	case k == 1:
		return json.Number(strconv.FormatFloat(float64(r.Int64N(1<<40))*math.Pow10(r.IntN(20)-10), 'g', -1, 64))
	case k == 2:
		return r.IntN(2) == 0
	case k == 3:
		return nil
	case k < 6:
		m := map[string]any{}
		for range r.IntN(5) {
			m[randomString(r)] = randomValue(r, depth+1)
		}
		return m
	default:
		a := []any{}
		for range r.IntN(5) {
			a = append(a, randomValue(r, depth+1))
		}
		return a
	}
}

func TestAppendValueMatchesMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		v := randomValue(r, 0)
		want, err := marshalReflect(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendValue(nil, v)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("AppendValue = %s (%v), Marshal %s", got, err, want)
		}
	}
	// CanonicalNumbers gives what decoding the canonical form gives.
	for range 2000 {
		// As strictjson decodes it: valid UTF-8, numbers as json.Number.
		raw, _ := json.Marshal(randomValue(r, 0))
		v, err := strictjson.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		canon, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := strictjson.Decode(canon)
		if err != nil {
			t.Fatal(err)
		}
		got, err := CanonicalNumbers(v)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("CanonicalNumbers = %#v (%v), decoded canonical form %#v", got, err, want)
		}
	}
	if _, err := AppendValue(nil, json.Number("1e400")); err == nil {
		t.Fatal("a number beyond binary64 has no canonical form")
	}
	if _, err := AppendValue(nil, struct{}{}); err == nil {
		t.Fatal("a struct is not a decoded JSON value")
	}
}
