package chunking

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/strictjson"
)

// reference is the contract read literally (reference-engine notes §4):
// for each start try end = start+1 …, the body JCS({"items": items}) by
// the general canonical writer, stop at the first end over the bounds.
func reference(t *testing.T, input string, b Bounds) []Chunk {
	t.Helper()
	lines := strings.SplitAfter(input, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var items []any
	var offsets []int
	off := 0
	for _, l := range lines {
		off += len(l)
		offsets = append(offsets, off)
		v, err := strictjson.Decode([]byte(strings.TrimSuffix(strings.TrimSuffix(l, "\n"), "\r")))
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, v)
	}
	body := func(its []any) []byte {
		out, err := canonjson.Marshal(map[string]any{"items": its})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var out []Chunk
	for start := 0; start < len(items); {
		end := start
		for e := start + 1; e <= len(items) && e-start <= b.MaximumItems; e++ {
			if int64(len(body(items[start:e]))) > b.MaximumBytes {
				break
			}
			end = e
		}
		if end == start {
			t.Fatalf("item %d too large", start)
		}
		first := 0
		if start > 0 {
			first = offsets[start-1]
		}
		bb := body(items[start:end])
		out = append(out, Chunk{Index: len(out), FirstItem: start, Items: end - start, Offset: int64(first), Length: int64(offsets[end-1] - first),
			BodyLength: int64(len(bb)), Digest: Digest(bb), PrefixDigest: Digest([]byte(input[:offsets[end-1]]))})
		start = end
	}
	return out
}

// randomLine draws a create item with members in random order and spacing,
// strings rich in escapes and non-ASCII, numbers in varied notations.
func randomLine(r *rand.Rand) string {
	pieces := []string{"a", "Z", "é", "\\\"", "\\\\", "\\n", "\\u0001", "\\u00e9", "😀", "\\ud83d\\ude00", "<&>", "plain text "}
	str := func() string {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		return `"` + b.String() + `"`
	}
	nums := []string{"1", "-0", "1.50", "1e3", "1E-7", "123456789012", "0.1", "-2.5e+2"}
	var members []string
	for i := range r.IntN(4) + 1 {
		var v string
		switch r.IntN(4) {
		case 0:
			v = str()
		case 1:
			v = nums[r.IntN(len(nums))]
		case 2:
			v = "[" + str() + ", " + nums[r.IntN(len(nums))] + "]"
		default:
			v = `{"z": true, "a": null}`
		}
		members = append(members, fmt.Sprintf(`"f%d%s" : %s`, i, []string{"", "é", "\\u00e9x"}[r.IntN(3)], v))
	}
	data := "{" + strings.Join(members, ", ") + "}"
	if r.IntN(2) == 0 {
		return `{ "data": ` + data + `, "operation": "create" }`
	}
	return `{"operation":"create","data":` + data + `}`
}

func TestPlannerMatchesTheContractReadLiterally(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for round := range 300 {
		var b strings.Builder
		for range r.IntN(40) + 1 {
			b.WriteString(randomLine(r))
			if r.IntN(5) == 0 {
				b.WriteByte('\r')
			}
			b.WriteByte('\n')
		}
		input := b.String()
		if r.IntN(4) == 0 {
			input = strings.TrimSuffix(input, "\n") // a last line without its newline
		}
		bounds := Bounds{MaximumItems: r.IntN(10) + 1, MaximumBytes: int64(r.IntN(2000) + 400)}
		plan, err := Read(strings.NewReader(input), Create, bounds)
		var le *LineError
		if errors.As(err, &le) && errors.Is(err, ErrItemTooLarge) {
			continue
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		want := reference(t, input, bounds)
		if fmt.Sprint(plan.Chunks) != fmt.Sprint(want) {
			t.Fatalf("round %d, bounds %+v:\nplanned   %+v\nreference %+v", round, bounds, plan.Chunks, want)
		}
		if plan.InputDigest != Digest([]byte(input)) || plan.InputLength != int64(len(input)) || plan.Chunks[len(plan.Chunks)-1].PrefixDigest != plan.InputDigest {
			t.Fatalf("round %d: input digest or length wrong", round)
		}
		// Rebuilding each chunk from the source gives the body the host
		// computes from the decoded items.
		for _, c := range plan.Chunks {
			body, err := Rebuild(c, []byte(input[c.Offset:c.Offset+c.Length]), Create)
			if err != nil {
				t.Fatal(err)
			}
			var env struct{ Items []json.RawMessage }
			json.Unmarshal(body, &env)
			var decoded []any
			for _, it := range env.Items {
				v, _ := strictjson.Decode(it)
				decoded = append(decoded, v)
			}
			host, err := Body(decoded)
			if err != nil || !bytes.Equal(host, body) || int64(len(body)) != c.BodyLength {
				t.Fatalf("chunk %d: host body %s (%v), planned %s", c.Index, host, err, body)
			}
		}
	}
}

func TestPlannerRefusals(t *testing.T) {
	b := Bounds{MaximumItems: 10, MaximumBytes: 200}
	for _, c := range []struct{ input, op, want string }{
		{"{\"operation\":\"create\",\"data\":{}}\n\n", Create, "line 2: an empty line"},
		{"{\"operation\":\"create\",\"data\":{}}\n\r\n", Create, "line 2: an empty line"},
		{"{\"operation\":\"create\",\"data\":{},\"data\":{}}\n", Create, "line 1: "},
		{"{\"operation\":\"create\",\"data\":{},\"id\":\"x\"}\n", Create, `unknown member "id"`},
		{"{\"operation\":\"patch\",\"id\":\"x\",\"ifMatch\":\"y\",\"patch\":[]}\n", Create, `operation must be "create"`},
		{"{\"operation\":\"patch\",\"recordId\":\"x\",\"ifMatch\":\"y\",\"patch\":[]}\n", Patch, "id must be a string"},
		{"[1]\n", Create, "an item is a JSON object"},
		{"{\"operation\":\"create\",\"data\":{\"x\":\"" + strings.Repeat("a", 200) + "\"}}\n", Create, "over the batch's maximumBytes"},
		{"", Create, "no items"},
	} {
		_, err := Read(strings.NewReader(c.input), c.op, b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.input, err, c.want)
		}
	}
	if _, err := Read(strings.NewReader("{\"operation\":\"patch\",\"id\":\"x\",\"ifMatch\":\"y\",\"patch\":[]}\n"), Patch, b); err != nil {
		t.Errorf("a patch item: %v", err)
	}
	// A body of exactly maximumBytes fits; one byte more does not.
	line := `{"operation":"create","data":{"x":"ab"}}` + "\n"
	exact := BodyLength(2, 2*int64(len(line)-1))
	for _, c := range []struct {
		max    int64
		chunks int
	}{{exact, 1}, {exact - 1, 2}} {
		p, err := Read(strings.NewReader(line+line), Create, Bounds{MaximumItems: 5, MaximumBytes: c.max})
		if err != nil || len(p.Chunks) != c.chunks {
			t.Fatalf("maximumBytes %d: %v chunks, %v", c.max, p, err)
		}
	}
}

func TestRebuildNoticesAChangedSource(t *testing.T) {
	input := `{"operation":"create","data":{"x":1}}` + "\n"
	p, err := Read(strings.NewReader(input), Create, Bounds{MaximumItems: 5, MaximumBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Rebuild(p.Chunks[0], []byte(strings.Replace(input, "1", "2", 1)), Create); err == nil || !strings.Contains(err.Error(), "source changed") {
		t.Fatalf("changed source: %v", err)
	}
}
