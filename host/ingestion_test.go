package host_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/ingest"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/storetest"
)

type ingestEnv struct {
	owner, colleague, anonymous caller
	pool                        *pgxpool.Pool
	pkg                         *model.Package
}

func startIngestion(t *testing.T) ingestEnv {
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"stock:write"}}, addClient(t, `"stock:write"`))
	is.Setup.Clients = append(is.Setup.Clients, issuertest.DevClient{ID: "colleague", Profile: "standard",
		KeyFile: filepath.Join(filepath.Dir(is.Setup.ConfigPath), "client-keys", "colleague.jwk"), Audience: is.Setup.TokenURL})
	dsn := storetest.NewDatabase(t)
	h, srv := serve(t, deployment(t, "testdata/ingestion", dsn, is.HostAuthentication()))
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return ingestEnv{
		owner:     caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)},
		colleague: caller{srv: srv, token: is.Token(t, "colleague")},
		anonymous: caller{srv: srv},
		pool:      pool,
		pkg:       h.Package(),
	}
}

// planned is one chunk of greedy-canonical-http-batch-v1.
type planned struct {
	items        []json.RawMessage
	digest       string
	prefixDigest string
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// plan chunks JSONL input as the notes specify: greedy, the largest run of
// lines whose canonical batch body fits the bounds.
func plan(t *testing.T, input string, maxItems, maxBytes int) []planned {
	t.Helper()
	lines := strings.SplitAfter(input, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var offsets []int
	var items []json.RawMessage
	off := 0
	for _, l := range lines {
		off += len(l)
		offsets = append(offsets, off)
		items = append(items, json.RawMessage(strings.TrimSuffix(strings.TrimSuffix(l, "\n"), "\r")))
	}
	body := func(its []json.RawMessage) []byte {
		b, err := canonjson.Marshal(map[string]any{"items": its})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var out []planned
	for start := 0; start < len(items); {
		end := start
		for e := start + 1; e <= len(items) && e-start <= maxItems; e++ {
			if len(body(items[start:e])) > maxBytes {
				break
			}
			end = e
		}
		if end == start {
			t.Fatalf("item %d is too large", start)
		}
		out = append(out, planned{items: items[start:end], digest: sha(body(items[start:end])), prefixDigest: sha([]byte(input[:offsets[end-1]]))})
		start = end
	}
	return out
}

func (p planned) body(index int) string {
	b, _ := json.Marshal(map[string]any{"chunkIndex": index, "items": p.items, "digest": p.digest, "prefixDigest": p.prefixDigest})
	return string(b)
}

type runDoc struct {
	RunID                 string `json:"runId"`
	Status                string `json:"status"`
	BlockedReason         string `json:"blockedReason"`
	NextChunkIndex        int    `json:"nextChunkIndex"`
	CommittedItems        int    `json:"committedItems"`
	CommittedPrefixDigest string `json:"committedPrefixDigest"`
	Complete              bool   `json:"complete"`
	MaximumItems          int    `json:"maximumItems"`
	LastAttempt           *struct {
		Outcome    string `json:"outcome"`
		ChunkIndex int    `json:"chunkIndex"`
	} `json:"lastAttempt"`
}

func (env ingestEnv) runBody(input string, chunks int, edit ...string) string {
	m := map[string]any{
		"operation": "create", "profileId": "clerk", "packageRevision": env.pkg.Revision, "schemaFingerprint": env.pkg.SchemaFingerprint,
		"inputDigest": sha([]byte(input)), "inputLength": len(input), "itemCount": strings.Count(input, "\n"), "chunkCount": chunks,
		"chunkAlgorithmVersion": "greedy-canonical-http-batch-v1",
	}
	for i := 0; i+1 < len(edit); i += 2 {
		var v any
		if err := json.Unmarshal([]byte(edit[i+1]), &v); err != nil {
			panic(err)
		}
		m[edit[i]] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func (env ingestEnv) open(t *testing.T, c caller, input string, chunks int) runDoc {
	t.Helper()
	return runOf(t, 201, "open run")(c.do(t, "POST", "/v1/records/items/ingestion-runs", "application/json", env.runBody(input, chunks)))
}

func (env ingestEnv) read(t *testing.T, c caller, runID string) runDoc {
	t.Helper()
	return runOf(t, 200, "read run")(c.do(t, "GET", "/v1/records/items/ingestion-runs/"+runID, "", ""))
}

// runOf decodes a run document answered with the status wanted.
func runOf(t *testing.T, status int, what string) func(*http.Response, []byte) runDoc {
	return func(resp *http.Response, b []byte) runDoc {
		t.Helper()
		if resp.StatusCode != status {
			t.Fatalf("%s: %d %s", what, resp.StatusCode, b)
		}
		var d runDoc
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
}

// written counts every row a chunk writes.
func (env ingestEnv) written(t *testing.T) string {
	t.Helper()
	var records, revisions, audit, chunks int
	ctx := context.Background()
	env.pool.QueryRow(ctx, "select count(*) from registrum_data.e_item").Scan(&records)
	env.pool.QueryRow(ctx, "select count(*) from registrum.revisions").Scan(&revisions)
	env.pool.QueryRow(ctx, "select count(*) from registrum.audit").Scan(&audit)
	env.pool.QueryRow(ctx, "select count(*) from registrum.ingestion_run_chunks").Scan(&chunks)
	return fmt.Sprintf("records %d revisions %d audit %d chunks %d", records, revisions, audit, chunks)
}

func jsonl(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"operation":"create","data":{"code":"%s-%d","qty":%d}}`+"\n", prefix, i, i)
	}
	return b.String()
}

func TestIngestionRunCommitsChunksReplaysAndCompletes(t *testing.T) {
	env := startIngestion(t)
	input := jsonl("A", 3)
	chunks := plan(t, input, 2, 4096)
	if len(chunks) != 2 {
		t.Fatalf("planned %d chunks", len(chunks))
	}
	run := env.open(t, env.owner, input, len(chunks))
	if run.Status != "open" || run.NextChunkIndex != 0 || run.LastAttempt != nil || run.MaximumItems != 2 ||
		run.CommittedPrefixDigest != sha(nil) || run.Complete {
		t.Fatalf("new run %+v", run)
	}
	path := "/v1/records/items/ingestion-runs/" + run.RunID
	resp, first := env.owner.do(t, "POST", path+"/chunks", "application/json", chunks[0].body(0))
	if resp.StatusCode != 200 {
		t.Fatalf("chunk 0: %d %s", resp.StatusCode, first)
	}
	var batch struct {
		Snapshot string `json:"snapshot"`
		Results  []struct {
			Operation string         `json:"operation"`
			ID        string         `json:"id"`
			Data      map[string]any `json:"data"`
		} `json:"results"`
	}
	if err := json.Unmarshal(first, &batch); err != nil || len(batch.Results) != 2 || batch.Results[1].Data["code"] != "A-1" || !strings.HasPrefix(batch.Snapshot, "engine2_") {
		t.Fatalf("chunk 0 answer %s (%v)", first, err)
	}
	if d := env.read(t, env.owner, run.RunID); d.NextChunkIndex != 1 || d.CommittedItems != 2 || d.CommittedPrefixDigest != chunks[0].prefixDigest ||
		d.LastAttempt == nil || d.LastAttempt.Outcome != "committed" || d.LastAttempt.ChunkIndex != 0 {
		t.Fatalf("after chunk 0: %+v", d)
	}
	// Exact replay: the stored receipt byte for byte, nothing written.
	before := env.written(t)
	resp, again := env.owner.do(t, "POST", path+"/chunks", "application/json", chunks[0].body(0))
	if resp.StatusCode != 200 || !bytes.Equal(again, first) {
		t.Fatalf("replay: %d %s\nwant %s", resp.StatusCode, again, first)
	}
	if after := env.written(t); after != before {
		t.Errorf("replay wrote: %s, then %s", before, after)
	}
	if d := env.read(t, env.owner, run.RunID); d.LastAttempt.Outcome != "replayed" || d.NextChunkIndex != 1 {
		t.Errorf("after replay: %+v", d)
	}
	resp, receipt := env.owner.do(t, "GET", path+"/chunks/0/receipt", "", "")
	if resp.StatusCode != 200 || !bytes.Equal(receipt, first) {
		t.Errorf("receipt: %d %s", resp.StatusCode, receipt)
	}
	resp, b := env.owner.do(t, "GET", path+"/chunks/1/receipt", "", "")
	wantProblem(t, "receipt of an uncommitted chunk", 404, b, "resource.not_found")
	// The final chunk completes the run.
	resp, last := env.owner.do(t, "POST", path+"/chunks", "application/json", chunks[1].body(1))
	if resp.StatusCode != 200 {
		t.Fatalf("chunk 1: %d %s", resp.StatusCode, last)
	}
	d := env.read(t, env.owner, run.RunID)
	if d.Status != "complete" || !d.Complete || d.CommittedItems != 3 || d.NextChunkIndex != 2 || d.CommittedPrefixDigest != sha([]byte(input)) {
		t.Fatalf("complete run %+v", d)
	}
	// A replay still answers once complete; a new chunk is refused.
	resp, again = env.owner.do(t, "POST", path+"/chunks", "application/json", chunks[1].body(1))
	if resp.StatusCode != 200 || !bytes.Equal(again, last) {
		t.Errorf("replay after completion: %d %s", resp.StatusCode, again)
	}
	resp, b = env.owner.do(t, "POST", path+"/chunks", "application/json", chunks[1].body(2))
	wantProblem(t, "chunk after completion", 409, b, "mutation.conflict")
	if d := env.read(t, env.owner, run.RunID); d.LastAttempt.Outcome != "runNotOpen" {
		t.Errorf("lastAttempt %+v", d.LastAttempt)
	}
	resp, b = env.owner.do(t, "POST", path+"/cancel", "application/json", "")
	wantProblem(t, "cancel of a complete run", 409, b, "mutation.conflict")
	// The records are there, one revision each.
	if got := env.written(t); !strings.HasPrefix(got, "records 3 revisions 3") || !strings.HasSuffix(got, "chunks 2") {
		t.Errorf("rows: %s", got)
	}
}

func TestIngestionChunkDivergencesAreRefusedWithNothingWritten(t *testing.T) {
	env := startIngestion(t)
	input := jsonl("D", 4)
	chunks := plan(t, input, 2, 4096)
	run := env.open(t, env.owner, input, len(chunks))
	path := "/v1/records/items/ingestion-runs/" + run.RunID
	if resp, b := env.owner.do(t, "POST", path+"/chunks", "application/json", chunks[0].body(0)); resp.StatusCode != 200 {
		t.Fatalf("chunk 0: %d %s", resp.StatusCode, b)
	}
	// A record that makes chunk 1's first item violate uniqueness, written
	// by an ordinary create (so the refusal comes from the final state).
	conflicting := planned{items: []json.RawMessage{json.RawMessage(`{"operation":"create","data":{"code":"D-0"}}`), chunks[1].items[1]}}
	b0, _ := canonjson.Marshal(map[string]any{"items": conflicting.items})
	conflicting.digest, conflicting.prefixDigest = sha(b0), chunks[1].prefixDigest
	wrongOp := planned{items: []json.RawMessage{json.RawMessage(`{"operation":"patch","id":"00000000-0000-4000-8000-000000000000","ifMatch":"x","patch":[]}`), chunks[1].items[1]}}
	b1, _ := canonjson.Marshal(map[string]any{"items": wrongOp.items})
	wrongOp.digest, wrongOp.prefixDigest = sha(b1), chunks[1].prefixDigest
	badValue := planned{items: []json.RawMessage{json.RawMessage(`{"operation":"create","data":{"code":7}}`), chunks[1].items[1]}}
	b2, _ := canonjson.Marshal(map[string]any{"items": badValue.items})
	badValue.digest, badValue.prefixDigest = sha(b2), chunks[1].prefixDigest
	replayOther := chunks[0]
	replayOther.prefixDigest = strings.Repeat("0", 64)
	wrongDigest := chunks[1]
	wrongDigest.digest = strings.Repeat("a", 64)
	wrongPrefix := chunks[1]
	wrongPrefix.prefixDigest = strings.Repeat("b", 64)
	cases := []struct {
		name, body string
		hdr        []string
		status     int
		code       string
		outcome    string
	}{
		{"index ahead", chunks[1].body(2), nil, 409, "mutation.conflict", "chunkMismatch"},
		{"digest not of the items", wrongDigest.body(1), nil, 409, "mutation.conflict", "chunkMismatch"},
		{"final prefix digest not the input digest", wrongPrefix.body(1), nil, 409, "mutation.conflict", "chunkMismatch"},
		{"committed chunk with another prefix digest", replayOther.body(0), nil, 409, "mutation.conflict", "chunkMismatch"},
		{"item of another operation", wrongOp.body(1), nil, 400, "request.invalid", "invalidItem"},
		{"invalid item value", badValue.body(1), nil, 400, "request.invalid", "invalidItem"},
		{"unique violated", conflicting.body(1), nil, 400, "request.invalid", "refused"},
		{"unknown member", `{"chunkIndex":1,"items":[],"digest":"x","prefixDigest":"y","extra":1}`, nil, 400, "request.invalid", "refused"},
		{"idempotency key", chunks[1].body(1), []string{"Idempotency-Key", "k1"}, 400, "request.invalid", ""},
	}
	for _, tc := range cases {
		before := env.written(t)
		resp, b := env.owner.do(t, "POST", path+"/chunks", "application/json", tc.body, tc.hdr...)
		wantProblem(t, tc.name, tc.status, b, tc.code)
		_ = resp
		if after := env.written(t); after != before {
			t.Errorf("%s wrote: %s, then %s", tc.name, before, after)
		}
		d := env.read(t, env.owner, run.RunID)
		if d.NextChunkIndex != 1 || d.CommittedItems != 2 || d.CommittedPrefixDigest != chunks[0].prefixDigest {
			t.Errorf("%s moved the checkpoint: %+v", tc.name, d)
		}
		if tc.outcome != "" && (d.LastAttempt == nil || d.LastAttempt.Outcome != tc.outcome) {
			t.Errorf("%s: lastAttempt %+v, want %s", tc.name, d.LastAttempt, tc.outcome)
		}
	}
	// A binding that no longer matches the active package: blocked, and
	// its chunks refused; a replay of a committed chunk still answers.
	if _, err := env.pool.Exec(context.Background(), "UPDATE registrum.ingestion_runs SET package_revision = $2 WHERE run_id = $1", run.RunID, "sha256:"+strings.Repeat("0", 64)); err != nil {
		t.Fatal(err)
	}
	if d := env.read(t, env.owner, run.RunID); d.Status != "blocked" || d.BlockedReason != "activePackageChanged" || d.Complete {
		t.Fatalf("blocked run %+v", d)
	}
	before := env.written(t)
	_, b := env.owner.do(t, "POST", path+"/chunks", "application/json", chunks[1].body(1))
	wantProblem(t, "chunk of a blocked run", 412, b, "precondition.failed")
	if d := env.read(t, env.owner, run.RunID); d.LastAttempt.Outcome != "bindingChanged" {
		t.Errorf("lastAttempt %+v", d.LastAttempt)
	}
	if resp, _ := env.owner.do(t, "POST", path+"/chunks", "application/json", chunks[0].body(0)); resp.StatusCode != 200 {
		t.Errorf("replay on a blocked run: %d", resp.StatusCode)
	}
	// Cancel: counts and prefix unchanged; chunks then refused.
	resp, b := env.owner.do(t, "POST", path+"/cancel", "application/json", "")
	if resp.StatusCode != 200 {
		t.Fatalf("cancel: %d %s", resp.StatusCode, b)
	}
	var cancelled runDoc
	json.Unmarshal(b, &cancelled)
	if cancelled.Status != "cancelled" || cancelled.CommittedItems != 2 || cancelled.NextChunkIndex != 1 {
		t.Errorf("cancelled run %+v", cancelled)
	}
	_, b = env.owner.do(t, "POST", path+"/chunks", "application/json", chunks[1].body(1))
	wantProblem(t, "chunk of a cancelled run", 409, b, "mutation.conflict")
	if d := env.read(t, env.owner, run.RunID); d.LastAttempt.Outcome != "runNotOpen" {
		t.Errorf("lastAttempt %+v", d.LastAttempt)
	}
	_, b = env.owner.do(t, "POST", path+"/cancel", "application/json", "")
	wantProblem(t, "second cancel", 409, b, "mutation.conflict")
	if after := env.written(t); after != before {
		t.Errorf("blocked and cancelled runs wrote: %s, then %s", before, after)
	}
}

func TestIngestionRunsAreTheirCreatorsOnly(t *testing.T) {
	env := startIngestion(t)
	input := jsonl("C", 1)
	chunks := plan(t, input, 2, 4096)
	run := env.open(t, env.owner, input, 1)
	path := "/v1/records/items/ingestion-runs/" + run.RunID
	unknown := "/v1/records/items/ingestion-runs/01900000-0000-7000-8000-000000000000"
	for _, c := range []struct {
		who          string
		as           caller
		method, path string
		body         string
	}{
		{"colleague reads", env.colleague, "GET", path, ""},
		{"colleague submits", env.colleague, "POST", path + "/chunks", chunks[0].body(0)},
		{"colleague submits under the run's profile", env.colleague, "POST", path + "/chunks?accessProfile=clerk", chunks[0].body(0)},
		{"colleague submits a malformed chunk", env.colleague, "POST", path + "/chunks?accessProfile=clerk", `{"chunkIndex":`},
		{"colleague submits a chunk of no run", env.colleague, "POST", path + "/chunks?accessProfile=clerk", `{"items":[]}`},
		{"owner submits under a profile without batch", env.owner, "POST", path + "/chunks?accessProfile=reader", chunks[0].body(0)},
		{"owner submits to an unknown run", env.owner, "POST", unknown + "/chunks?accessProfile=clerk", chunks[0].body(0)},
		{"owner submits to no run id", env.owner, "POST", "/v1/records/items/ingestion-runs/nope/chunks?accessProfile=clerk", chunks[0].body(0)},
		{"colleague cancels", env.colleague, "POST", path + "/cancel", ""},
		{"colleague reads a receipt", env.colleague, "GET", path + "/chunks/0/receipt", ""},
		{"no token", env.anonymous, "GET", path, ""},
		{"no token lists", env.anonymous, "GET", "/v1/records/items/ingestion-runs", ""},
		{"unknown run", env.owner, "GET", unknown, ""},
		{"not a run id", env.owner, "GET", "/v1/records/items/ingestion-runs/nope", ""},
		{"a profile without batch", env.owner, "GET", path + "?accessProfile=reader", ""},
	} {
		_, b := c.as.do(t, c.method, c.path, "application/json", c.body)
		wantProblem(t, c.who, 404, b, "resource.not_found")
	}
	if got := env.written(t); !strings.HasPrefix(got, "records 0") {
		t.Errorf("rows: %s", got)
	}
	// No attempt of another caller is the run's lastAttempt.
	if d := env.read(t, env.owner, run.RunID); d.LastAttempt != nil || d.NextChunkIndex != 0 {
		t.Errorf("the owner's run after others' attempts: %+v", d)
	}
	_, b := env.colleague.do(t, "GET", "/v1/records/items/ingestion-runs", "", "")
	if !strings.Contains(string(b), `"runs":[]`) {
		t.Errorf("colleague's list: %s", b)
	}
	// Opening under a profile that does not grant batch is concealed too.
	_, b = env.owner.do(t, "POST", "/v1/records/items/ingestion-runs", "application/json", env.runBody(input, 1, "profileId", `"reader"`))
	wantProblem(t, "run under reader", 404, b, "resource.not_found")
}

func TestIngestionRunCreationChecksTheAnnouncement(t *testing.T) {
	env := startIngestion(t)
	input := jsonl("N", 5)
	for _, c := range []struct {
		name   string
		edit   []string
		status int
		code   string
	}{
		{"stale package revision", []string{"packageRevision", `"sha256:` + strings.Repeat("1", 64) + `"`}, 412, "precondition.failed"},
		{"other schema fingerprint", []string{"schemaFingerprint", `"sha256:` + strings.Repeat("2", 64) + `"`}, 412, "precondition.failed"},
		{"other algorithm", []string{"chunkAlgorithmVersion", `"greedy-v0"`}, 400, "request.invalid"},
		{"more chunks than items", []string{"chunkCount", "6"}, 400, "request.invalid"},
		{"fewer chunks than ceil(items/maximumItems)", []string{"chunkCount", "2"}, 400, "request.invalid"},
		{"input digest not hex", []string{"inputDigest", `"ABC"`}, 400, "request.invalid"},
		{"unknown member", []string{"extra", "1"}, 400, "request.invalid"},
		{"other operation", []string{"operation", `"tombstone"`}, 400, "request.invalid"},
	} {
		_, b := env.owner.do(t, "POST", "/v1/records/items/ingestion-runs", "application/json", env.runBody(input, 3, c.edit...))
		wantProblem(t, c.name, c.status, b, c.code)
	}
	_, b := env.owner.do(t, "POST", "/v1/records/items/ingestion-runs", "application/json", env.runBody(input, 3), "Idempotency-Key", "k")
	wantProblem(t, "idempotency key", 400, b, "request.invalid")
	// The edges: ceil(5/2) = 3 chunks and 5 chunks are accepted.
	env.open(t, env.owner, input, 3)
	env.open(t, env.owner, input, 5)
	var runs int
	env.pool.QueryRow(context.Background(), "select count(*) from registrum.ingestion_runs").Scan(&runs)
	if runs != 2 {
		t.Errorf("%d runs stored, want 2", runs)
	}
}

func TestIngestionRunListFiltersAndPages(t *testing.T) {
	env := startIngestion(t)
	var ids []string
	inputs := []string{jsonl("L", 1), jsonl("M", 1), jsonl("L", 1)}
	for _, in := range inputs {
		ids = append(ids, env.open(t, env.owner, in, 1).RunID)
	}
	env.open(t, env.colleague, inputs[0], 1)
	chunks := plan(t, inputs[1], 2, 4096)
	if resp, b := env.owner.do(t, "POST", "/v1/records/items/ingestion-runs/"+ids[1]+"/chunks", "application/json", chunks[0].body(0)); resp.StatusCode != 200 {
		t.Fatalf("chunk: %d %s", resp.StatusCode, b)
	}
	env.owner.do(t, "POST", "/v1/records/items/ingestion-runs/"+ids[2]+"/cancel", "application/json", "")
	type page struct {
		Runs      []runDoc `json:"runs"`
		HasMore   bool     `json:"hasMore"`
		NextAfter *string  `json:"nextAfter"`
	}
	list := func(q string) page {
		t.Helper()
		resp, b := env.owner.do(t, "GET", "/v1/records/items/ingestion-runs"+q, "", "")
		if resp.StatusCode != 200 {
			t.Fatalf("list %s: %d %s", q, resp.StatusCode, b)
		}
		var p page
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	idsOf := func(p page) string {
		var s []string
		for _, r := range p.Runs {
			s = append(s, r.RunID)
		}
		return strings.Join(s, ",")
	}
	if p := list(""); idsOf(p) != strings.Join(ids, ",") || p.HasMore || p.NextAfter != nil {
		t.Errorf("default list %+v", p)
	}
	p := list("?limit=2")
	if idsOf(p) != ids[0]+","+ids[1] || !p.HasMore || p.NextAfter == nil || *p.NextAfter != ids[1] {
		t.Fatalf("first page %+v", p)
	}
	if p := list("?limit=2&after=" + *p.NextAfter); idsOf(p) != ids[2] || p.HasMore {
		t.Errorf("second page %+v", p)
	}
	if p := list("?limit=1"); len(p.Runs) != 1 || !p.HasMore {
		t.Errorf("limit 1 %+v", p)
	}
	if p := list("?limit=100"); len(p.Runs) != 3 {
		t.Errorf("limit 100 %+v", p)
	}
	if p := list("?status=complete"); idsOf(p) != ids[1] {
		t.Errorf("complete %+v", p)
	}
	if p := list("?status=cancelled"); idsOf(p) != ids[2] {
		t.Errorf("cancelled %+v", p)
	}
	if p := list("?status=open"); idsOf(p) != ids[0] {
		t.Errorf("open %+v", p)
	}
	if p := list("?status=blocked"); len(p.Runs) != 0 {
		t.Errorf("blocked %+v", p)
	}
	if p := list("?inputDigest=" + sha([]byte(inputs[0]))); idsOf(p) != ids[0]+","+ids[2] {
		t.Errorf("by input digest %+v", p)
	}
	for _, q := range []string{"?limit=0", "?limit=101", "?limit=x", "?status=done", "?after=nope", "?inputDigest=ABC",
		// An unknown or repeated option is refused, not ignored or half read.
		"?limit=1&limit=100", "?status=open&status=complete", "?$top=1", "?limt=1", "?after=" + ids[0] + "&after=" + ids[1]} {
		_, b := env.owner.do(t, "GET", "/v1/records/items/ingestion-runs"+q, "", "")
		wantProblem(t, "list "+q, 400, b, "query.invalid")
		// Judged after the grant: without a token, the concealed 404.
		_, b = env.anonymous.do(t, "GET", "/v1/records/items/ingestion-runs"+q, "", "")
		wantProblem(t, "anonymous list "+q, 404, b, "resource.not_found")
	}
	if p := list("?accessProfile=clerk&limit=1"); len(p.Runs) != 1 {
		t.Errorf("with accessProfile %+v", p)
	}
}

func TestIngestionConcurrentSubmissionsOfOneChunkCommitOnce(t *testing.T) {
	env := startIngestion(t)
	input := jsonl("P", 2)
	chunks := plan(t, input, 2, 4096)
	run := env.open(t, env.owner, input, 1)
	path := "/v1/records/items/ingestion-runs/" + run.RunID
	const n = 6
	bodies := make(chan []byte, n)
	statuses := make(chan int, n)
	for i := range n {
		// Half name the run's profile, as registrum ingest does (the run is
		// not read before its lock), half name none (it is).
		query := ""
		if i%2 == 1 {
			query = "?accessProfile=clerk"
		}
		go func() {
			req, _ := http.NewRequest("POST", env.owner.srv.URL+path+"/chunks"+query, strings.NewReader(chunks[0].body(0)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+env.owner.token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				statuses <- 0
				bodies <- nil
				return
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			buf.ReadFrom(resp.Body)
			statuses <- resp.StatusCode
			bodies <- buf.Bytes()
		}()
	}
	var first []byte
	for range n {
		st, b := <-statuses, <-bodies
		if st != 200 {
			t.Errorf("concurrent submission: %d %s", st, b)
			continue
		}
		if first == nil {
			first = b
		} else if !bytes.Equal(first, b) {
			t.Errorf("answers differ:\n%s\n%s", first, b)
		}
	}
	if got := env.written(t); !strings.HasPrefix(got, "records 2 revisions 2") || !strings.HasSuffix(got, "chunks 1") {
		t.Errorf("rows: %s", got)
	}
	if d := env.read(t, env.owner, run.RunID); !d.Complete {
		t.Errorf("run %+v", d)
	}
	// After erasure of the history a receipt covers: 410 on read and replay.
	if _, err := env.pool.Exec(context.Background(), "UPDATE registrum.ingestion_run_chunks SET receipt = NULL, erased_at = now() WHERE run_id = $1", run.RunID); err != nil {
		t.Fatal(err)
	}
	_, b := env.owner.do(t, "GET", path+"/chunks/0/receipt", "", "")
	wantProblem(t, "erased receipt", 410, b, "ingestion.receipt_erased")
	_, b = env.owner.do(t, "POST", path+"/chunks", "application/json", chunks[0].body(0))
	wantProblem(t, "replay of an erased chunk", 410, b, "ingestion.receipt_erased")
}

// TestIngestionAChunkSentAheadFollowsItsPredecessor: a client with two
// chunks on their way (sdk/ingest sends chunk i+1 once i's request is
// written) can have i+1 reach the run's lock first. It waits for i and
// commits after it; the run's lastAttempt never says chunkMismatch. A
// chunk one ahead with no predecessor on its way is refused once the wait
// is over, a chunk two ahead at once, with nothing written.
func TestIngestionAChunkSentAheadFollowsItsPredecessor(t *testing.T) {
	env := startIngestion(t)
	input := jsonl("A", 12)
	chunks := plan(t, input, 2, 4096)
	run := env.open(t, env.owner, input, len(chunks))
	path := "/v1/records/items/ingestion-runs/" + run.RunID + "/chunks?accessProfile=clerk"
	type answer struct {
		status int
		body   []byte
	}
	submit := func(i int, out chan<- answer) {
		resp, b := env.owner.do(t, "POST", path, "application/json", chunks[i].body(i))
		out <- answer{resp.StatusCode, b}
	}
	// Two chunks at a time, the later one sent first: it takes the lock
	// before its predecessor is there.
	for i := 0; i+1 < len(chunks); i += 2 {
		first, second := make(chan answer, 1), make(chan answer, 1)
		go submit(i+1, second)
		time.Sleep(20 * time.Millisecond)
		go submit(i, first)
		for k, ch := range []chan answer{first, second} {
			if a := <-ch; a.status != 200 {
				t.Fatalf("chunk %d: %d %s", i+k, a.status, a.body)
			}
		}
		d := env.read(t, env.owner, run.RunID)
		if d.NextChunkIndex != i+2 || d.LastAttempt == nil || d.LastAttempt.Outcome != "committed" || d.LastAttempt.ChunkIndex != i+1 {
			t.Fatalf("after chunks %d and %d: %+v, last attempt %+v", i, i+1, d, d.LastAttempt)
		}
	}
	if got := env.written(t); !strings.HasPrefix(got, "records 12 revisions 12") || !strings.HasSuffix(got, "chunks 6") {
		t.Errorf("rows: %s", got)
	}

	input = jsonl("B", 6)
	chunks = plan(t, input, 2, 4096)
	run = env.open(t, env.owner, input, len(chunks))
	path = "/v1/records/items/ingestion-runs/" + run.RunID + "/chunks?accessProfile=clerk"
	for _, c := range []struct {
		index int
		least time.Duration
		most  time.Duration
	}{{1, ingest.AheadWait, 10 * ingest.AheadWait}, {2, 0, ingest.AheadWait / 2}} {
		start := time.Now()
		resp, b := env.owner.do(t, "POST", path, "application/json", chunks[c.index].body(c.index))
		took := time.Since(start)
		wantProblem(t, fmt.Sprintf("chunk %d alone", c.index), 409, b, "mutation.conflict")
		if resp.StatusCode != 409 || took < c.least || took > c.most {
			t.Errorf("chunk %d alone: %d after %v, want between %v and %v", c.index, resp.StatusCode, took, c.least, c.most)
		}
		if d := env.read(t, env.owner, run.RunID); d.NextChunkIndex != 0 || d.LastAttempt == nil || d.LastAttempt.Outcome != "chunkMismatch" || d.LastAttempt.ChunkIndex != c.index {
			t.Errorf("after chunk %d alone: %+v, last attempt %+v", c.index, d, d.LastAttempt)
		}
	}
	if got := env.written(t); !strings.HasPrefix(got, "records 12 revisions 12") || !strings.HasSuffix(got, "chunks 6") {
		t.Errorf("rows after the refusals: %s", got)
	}
	// While it waits, a chunk of creates one ahead has its rows inserted
	// (and rolled back) at its first try only, not at every try. A
	// statement trigger counts the record inserts with a sequence, which
	// rollbacks do not take back.
	ctx := context.Background()
	if _, err := env.pool.Exec(ctx, `CREATE SEQUENCE public.item_inserts;
		CREATE FUNCTION public.count_item_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM nextval('public.item_inserts'); RETURN NULL; END $$;
		CREATE TRIGGER count_item_insert AFTER INSERT ON registrum_data.e_item FOR EACH STATEMENT EXECUTE FUNCTION public.count_item_insert()`); err != nil {
		t.Fatal(err)
	}
	if resp, b := env.owner.do(t, "POST", path, "application/json", chunks[1].body(1)); resp.StatusCode != 409 {
		t.Fatalf("chunk 1 alone: %d %s", resp.StatusCode, b)
	}
	var tries int64
	if err := env.pool.QueryRow(ctx, "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.item_inserts").Scan(&tries); err != nil {
		t.Fatal(err)
	}
	if tries > 1 {
		t.Errorf("a chunk of creates one ahead inserted its records %d times while it waited, want at most once", tries)
	}
}
