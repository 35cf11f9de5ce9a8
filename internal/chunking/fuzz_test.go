package chunking

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/strictjson"
)

// FuzzPlan plans arbitrary sources: a source is planned or refused, never
// a panic; a plan covers every byte once, each chunk within its bounds,
// and each chunk rebuilt from its bytes is the body the general canonical
// writer makes of its items.
func FuzzPlan(f *testing.F) {
	for _, seed := range []string{
		"{\"operation\":\"create\",\"data\":{\"a\":1}}\n{\"operation\":\"create\",\"data\":{\"b\":\"\\u00e9\"}}\r\n",
		"{\"operation\":\"create\",\"data\":{}}",
		"{\"operation\":\"create\",\"data\":{\"x\":1e400}}\n",
		"{\"operation\":\"create\",\"data\":{},\"data\":{}}\n",
		"\n\n", "", "{", "[]\n",
	} {
		f.Add([]byte(seed), uint8(3), uint16(120))
	}
	f.Fuzz(func(t *testing.T, src []byte, maxItems uint8, maxBytes uint16) {
		b := Bounds{MaximumItems: int(maxItems%16) + 1, MaximumBytes: int64(maxBytes) + 14}
		plan, err := Read(bytes.NewReader(src), Create, b)
		if err != nil {
			return
		}
		var at int64
		items := 0
		for i, c := range plan.Chunks {
			if c.Index != i || c.Offset != at || c.FirstItem != items || c.Items < 1 || c.Items > b.MaximumItems || c.BodyLength > b.MaximumBytes {
				t.Fatalf("chunk %+v after %d bytes, %d items, bounds %+v", c, at, items, b)
			}
			body, err := Rebuild(c, src[c.Offset:c.Offset+c.Length], Create)
			if err != nil {
				t.Fatal(err)
			}
			var env struct{ Items []json.RawMessage }
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatal(err)
			}
			var decoded []any
			for _, it := range env.Items {
				v, err := strictjson.Decode(it)
				if err != nil {
					t.Fatal(err)
				}
				decoded = append(decoded, v)
			}
			general, err := canonjson.Marshal(map[string]any{"items": decoded})
			if err != nil || !bytes.Equal(general, body) || Digest(body) != c.Digest || int64(len(body)) != c.BodyLength {
				t.Fatalf("chunk %d body %q, general writer %q (%v)", i, body, general, err)
			}
			at += c.Length
			items += c.Items
		}
		if at != int64(len(src)) || items != plan.ItemCount || plan.InputDigest != Digest(src) || plan.Chunks[len(plan.Chunks)-1].PrefixDigest != plan.InputDigest {
			t.Fatalf("plan %+v does not cover the source", plan)
		}
	})
}
