package records

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
)

// Types without the MarshalJSON methods: json.Marshal of these is what the
// hand-written encoders must reproduce byte for byte.
type (
	plainEnvelope   Envelope
	plainCollection Collection
)

var awkwardStrings = []string{
	"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\rcr\b\f", "\x00\x01\x1f\x7f",
	"é ü 中文 🙂", "line\u2028para\u2029", "bad \xff\xfe utf-8", "trailing \xe2\x82",
}

func awkwardValue(r *rand.Rand) any {
	switch r.IntN(8) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return int64(r.Int64N(1<<62)) - 1<<61
	case 3:
		return json.RawMessage(`{"a":[1,2.5,"x"],"b":null}`)
	case 4:
		return json.RawMessage(`{"html":"<&>","sp":"a b","u":"é\u2028"}`)
	case 5:
		return 3.25
	default:
		return awkwardStrings[r.IntN(len(awkwardStrings))]
	}
}

func awkwardData(r *rand.Rand) map[string]any {
	if r.IntN(10) == 0 {
		return nil
	}
	dd := map[string]any{}
	for range r.IntN(40) {
		dd[awkwardStrings[r.IntN(len(awkwardStrings))]+string(rune('a'+r.IntN(26)))] = awkwardValue(r)
	}
	return dd
}

func TestRenderingMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pick := func() string { return awkwardStrings[r.IntN(len(awkwardStrings))] }
	for i := range 2000 {
		env := Envelope{
			Data: EnvelopeData{RecordIdentifier: pick(), RevisionIdentifier: "7", DomainData: awkwardData(r)},
			Meta: Meta{RegistryIdentifier: pick(), DatasetIdentifier: pick(), EntityTypeIdentifier: pick()},
		}
		if i%2 == 0 {
			env.Context, env.Data.Snapshot, env.Data.Tombstoned = pick(), pick(), true
		}
		got, err := env.AppendJSON(nil)
		want := sameAsMarshal(t, "envelope", got, err, plainEnvelope(env))
		if viaMarshal, _ := json.Marshal(env); !bytes.Equal(viaMarshal, want) {
			t.Fatalf("json.Marshal(Envelope):\n got %s\nwant %s", viaMarshal, want)
		}

		c := Collection{Meta: env.Meta}
		if i%3 != 0 {
			c.Items = []CollectionItem{}
			for range r.IntN(5) {
				c.Items = append(c.Items, CollectionItem{RecordIdentifier: pick(), RevisionIdentifier: "1", DomainData: awkwardData(r)})
			}
		}
		if i%2 == 1 {
			next, n := pick(), int64(i)
			c.Context, c.PageInfo.NextCursor, c.Count = pick(), &next, &n
		}
		got, err = c.AppendJSON(nil)
		sameAsMarshal(t, "collection", got, err, plainCollection(c))
	}
}

// sameAsMarshal fails the test unless got, written without error, is what
// json.Marshal writes for v, and returns that.
func sameAsMarshal(t *testing.T, what string, got []byte, err error, v any) []byte {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	want, _ := json.Marshal(v)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s:\n got %s\nwant %s", what, got, want)
	}
	return want
}

// TestPageMembersRenderAsDomainDataMaps holds the items of a page that give
// their domainData as values of the page's members to what json.Marshal
// writes for the same domainData as maps.
func TestPageMembersRenderAsDomainDataMaps(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		seen := map[string]bool{}
		var names []string
		for range r.IntN(12) {
			k := awkwardStrings[r.IntN(len(awkwardStrings))] + string(rune('a'+r.IntN(26)))
			if !seen[k] {
				seen[k] = true
				names = append(names, k)
			}
		}
		slices.Sort(names)
		byValues := Collection{Items: []CollectionItem{}, Members: names}
		byMaps := Collection{Items: []CollectionItem{}}
		for range r.IntN(5) {
			vals, dd := make([]any, len(names)), map[string]any{}
			for i, k := range names {
				vals[i] = awkwardValue(r)
				dd[k] = vals[i]
			}
			byValues.Items = append(byValues.Items, CollectionItem{RecordIdentifier: "r", RevisionIdentifier: "1", Values: vals})
			byMaps.Items = append(byMaps.Items, CollectionItem{RecordIdentifier: "r", RevisionIdentifier: "1", DomainData: dd})
		}
		got, err := byValues.AppendJSON(nil)
		sameAsMarshal(t, "page by members", got, err, plainCollection(byMaps))
	}
	short := Collection{Items: []CollectionItem{{Values: []any{"x"}}}, Members: []string{"a", "b"}}
	if _, err := short.AppendJSON(nil); err == nil {
		t.Fatal("an item with fewer values than the page has members was rendered")
	}
}

func TestRenderingRefusesUnencodableValues(t *testing.T) {
	env := Envelope{Data: EnvelopeData{DomainData: map[string]any{"f": make(chan int)}}}
	if _, err := env.AppendJSON(nil); err == nil {
		t.Fatal("a channel value was rendered")
	}
}

func BenchmarkRenderPage(b *testing.B) {
	c := Collection{Items: make([]CollectionItem, 50), Meta: Meta{RegistryIdentifier: "reg", DatasetIdentifier: "ds", EntityTypeIdentifier: "item"}}
	for i := range c.Items {
		c.Items[i] = CollectionItem{RecordIdentifier: "3f2b8c1e-4d5a-4b6c-8d7e-9f0a1b2c3d4e", RevisionIdentifier: "1",
			DomainData: map[string]any{"code": "bulk-12345", "category": "c", "amount": int64(991234), "note": nil}}
	}
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			c.AppendJSON(nil)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			json.Marshal(plainCollection(c))
		}
	})
	// A page as ListNarrowed builds it from its records' values: a map of
	// domainData per record (as it did before the eighth session), or the
	// page's sorted members and each record's values in their order.
	names := []string{"amount", "category", "code", "note"}
	rows := make([][]any, len(c.Items))
	for i := range rows {
		rows[i] = []any{int64(991234 + i), "c", "bulk-12345", nil}
	}
	b.Run("from-records/maps", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p := Collection{Items: make([]CollectionItem, 0, len(rows)), Meta: c.Meta}
			for _, row := range rows {
				dd := make(map[string]any, len(names))
				for j, k := range names {
					dd[k] = row[j]
				}
				p.Items = append(p.Items, CollectionItem{RecordIdentifier: c.Items[0].RecordIdentifier, RevisionIdentifier: "1", DomainData: dd})
			}
			p.AppendJSON(make([]byte, 0, 256+256*len(p.Items)))
		}
	})
	b.Run("from-records/members", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p := Collection{Items: make([]CollectionItem, 0, len(rows)), Meta: c.Meta, Members: names}
			vals := make([]any, len(rows)*len(names))
			for i, row := range rows {
				v := vals[i*len(names) : (i+1)*len(names)]
				copy(v, row)
				p.Items = append(p.Items, CollectionItem{RecordIdentifier: c.Items[0].RecordIdentifier, RevisionIdentifier: "1", Values: v})
			}
			p.AppendJSON(make([]byte, 0, 256+256*len(p.Items)))
		}
	})
}
