package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/chunking"
)

// randomNote draws a note item: text rich in escapes, non-ASCII and
// length (so the byte bound, not only the item bound, cuts chunks),
// members in random order and spacing.
func randomNote(r *rand.Rand, i int) string {
	pieces := []string{"a", "é", "\\\"", "\\\\", "\\n", "\\u00e9", "😀", "\\ud83d\\ude00", "<&>", "plain text ", "\\t"}
	var b strings.Builder
	fmt.Fprintf(&b, "%d ", i)
	for range r.IntN(20) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	text := `"text" : "` + b.String() + `"`
	rank := fmt.Sprintf(`"rank":%d`, r.IntN(1000)-500)
	data := "{" + text + "," + rank + "}"
	if r.IntN(2) == 0 {
		data = "{ " + rank + ",  " + text + " }"
	}
	if r.IntN(2) == 0 {
		return `{"data":` + data + `, "operation":"create"}`
	}
	return `{"operation": "create", "data":` + data + `}`
}

// TestIngestionAcceptsEveryPlannedChunk is the property that ties the
// client's planner to the host's checker: random sources planned by
// internal/chunking (what sdk/ingest submits) are accepted chunk by chunk
// by the host over HTTP, and end complete with every item written once.
func TestIngestionAcceptsEveryPlannedChunk(t *testing.T) {
	env := startIngestion(t)
	// The registry document tells the client the bounds it plans with.
	_, reg := env.owner.do(t, "GET", "/v1/registry", "", "")
	if !strings.Contains(string(reg), `"route":"notes"`) || !strings.Contains(string(reg), `"batch":{"maximumItems":5,"maximumBytes":400}`) {
		t.Fatalf("registry document without the notes' batch bounds: %s", reg)
	}
	r := rand.New(rand.NewPCG(11, 12))
	total := 0
	for round := range 6 {
		var src strings.Builder
		n := r.IntN(25) + 1
		for i := range n {
			src.WriteString(randomNote(r, total+i))
			if r.IntN(6) == 0 {
				src.WriteByte('\r')
			}
			src.WriteByte('\n')
		}
		input := src.String()
		if round%3 == 2 {
			input = strings.TrimSuffix(input, "\n")
		}
		plan, err := chunking.Read(strings.NewReader(input), chunking.Create, chunking.Bounds{MaximumItems: 5, MaximumBytes: 400})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		body, _ := json.Marshal(map[string]any{
			"operation": "create", "profileId": "clerk", "packageRevision": env.pkg.Revision, "schemaFingerprint": env.pkg.SchemaFingerprint,
			"inputDigest": plan.InputDigest, "inputLength": plan.InputLength, "itemCount": plan.ItemCount, "chunkCount": len(plan.Chunks),
			"chunkAlgorithmVersion": chunking.Version,
		})
		run := runOf(t, 201, "open run")(env.owner.do(t, "POST", "/v1/records/notes/ingestion-runs", "application/json", string(body)))
		for _, c := range plan.Chunks {
			canonical, err := chunking.Rebuild(c, []byte(input[c.Offset:c.Offset+c.Length]), chunking.Create)
			if err != nil {
				t.Fatal(err)
			}
			sub := chunking.AppendSubmission(nil, c, canonical)
			resp, b := env.owner.do(t, "POST", "/v1/records/notes/ingestion-runs/"+run.RunID+"/chunks", "application/json", string(sub))
			if resp.StatusCode != 200 {
				t.Fatalf("round %d chunk %d of %d (%d items, %d bytes): %d %s", round, c.Index, len(plan.Chunks), c.Items, c.BodyLength, resp.StatusCode, b)
			}
		}
		done := runOf(t, 200, "read run")(env.owner.do(t, "GET", "/v1/records/notes/ingestion-runs/"+run.RunID, "", ""))
		if !done.Complete || done.CommittedItems != plan.ItemCount || done.CommittedPrefixDigest != plan.InputDigest {
			t.Fatalf("round %d: run after its chunks %+v", round, done)
		}
		total += n
	}
	var notes int
	env.pool.QueryRow(context.Background(), "select count(*) from registrum_data.e_note").Scan(&notes)
	if notes != total {
		t.Fatalf("%d notes written, %d planned", notes, total)
	}
}

// TestIngestionChunkNamesTheItemThatViolatesAConstraint: a uniqueness
// violation found only at commit (deferred constraints) is refused naming
// the item that causes it, and nothing is written.
func TestIngestionChunkNamesTheItemThatViolatesAConstraint(t *testing.T) {
	env := startIngestion(t)
	first := jsonl("U", 2)
	chunks := plan(t, first, 2, 4096)
	run := env.open(t, env.owner, first, len(chunks))
	if resp, b := env.owner.do(t, "POST", "/v1/records/items/ingestion-runs/"+run.RunID+"/chunks", "application/json", chunks[0].body(0)); resp.StatusCode != 200 {
		t.Fatalf("first run: %d %s", resp.StatusCode, b)
	}
	before := env.written(t)
	// A new item, then one whose code the first run wrote.
	second := `{"operation":"create","data":{"code":"V-0","qty":1}}` + "\n" + `{"operation":"create","data":{"code":"U-1","qty":1}}` + "\n"
	chunks = plan(t, second, 2, 4096)
	run = env.open(t, env.owner, second, len(chunks))
	resp, b := env.owner.do(t, "POST", "/v1/records/items/ingestion-runs/"+run.RunID+"/chunks", "application/json", chunks[0].body(0))
	if resp.StatusCode != 400 || !strings.Contains(string(b), `"fieldPath":"/items/1/data/code"`) || !strings.Contains(string(b), "unique constraint code-unique") {
		t.Fatalf("duplicate in a chunk: %d %s", resp.StatusCode, b)
	}
	if after := env.written(t); after != before {
		t.Fatalf("the refused chunk wrote: %s, before %s", after, before)
	}
	if got := env.read(t, env.owner, run.RunID); got.NextChunkIndex != 0 || got.LastAttempt == nil || got.LastAttempt.Outcome != "refused" {
		t.Fatalf("run after the refusal %+v", got)
	}
}
