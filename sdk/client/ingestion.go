package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// Ingestion runs are driven one chunk at a time. The client sends what it
// is given: the run's announcement (RunRequest) and each chunk (Chunk),
// whose items, digest and prefix digest come from the SDK's chunker of the
// greedy-canonical-http-batch-v1 contract, which splits a source into the
// chunks a run announces. The client does not cut chunks itself.

// ChunkAlgorithmVersion is the only chunking contract a run accepts.
const ChunkAlgorithmVersion = "greedy-canonical-http-batch-v1"

// RunRequest announces a run: what the chunker computed over the whole
// source, and the binding read from GET /v1/registry.
type RunRequest struct {
	Operation             string `json:"operation"`
	ProfileID             string `json:"profileId"`
	PackageRevision       string `json:"packageRevision"`
	SchemaFingerprint     string `json:"schemaFingerprint"`
	InputDigest           string `json:"inputDigest"`
	InputLength           int64  `json:"inputLength"`
	ItemCount             int64  `json:"itemCount"`
	ChunkCount            int64  `json:"chunkCount"`
	ChunkAlgorithmVersion string `json:"chunkAlgorithmVersion"`
}

// Run is an ingestion run document.
type Run struct {
	RunID                 string `json:"runId"`
	Status                string `json:"status"`
	BlockedReason         string `json:"blockedReason,omitempty"`
	EntityID              string `json:"entityId"`
	Operation             string `json:"operation"`
	ProfileID             string `json:"profileId"`
	PackageRevision       string `json:"packageRevision"`
	SchemaFingerprint     string `json:"schemaFingerprint"`
	InputDigest           string `json:"inputDigest"`
	InputLength           int64  `json:"inputLength"`
	ItemCount             int64  `json:"itemCount"`
	ChunkCount            int64  `json:"chunkCount"`
	ChunkAlgorithmVersion string `json:"chunkAlgorithmVersion"`
	MaximumItems          int64  `json:"maximumItems"`
	MaximumBytes          int64  `json:"maximumBytes"`
	NextChunkIndex        int64  `json:"nextChunkIndex"`
	CommittedItems        int64  `json:"committedItems"`
	CommittedPrefixDigest string `json:"committedPrefixDigest"`
	LastAttempt           *struct {
		Outcome    string `json:"outcome"`
		ChunkIndex int64  `json:"chunkIndex"`
	} `json:"lastAttempt"`
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`
	Complete  bool   `json:"complete"`
}

// Chunk is one chunk of a run, as the chunker makes it.
type Chunk struct {
	ChunkIndex   int64           `json:"chunkIndex"`
	Items        json.RawMessage `json:"items"`
	Digest       string          `json:"digest"`
	PrefixDigest string          `json:"prefixDigest"`
}

func runsPath(route string) string { return recordPath(route) + "/ingestion-runs" }

func runPath(route, runID string) string { return runsPath(route) + "/" + url.PathEscape(runID) }

// CreateRun opens an ingestion run (no Idempotency-Key: runs take none).
func (c *Client) CreateRun(ctx context.Context, route string, rr RunRequest, opts ...CallOption) (*Run, error) {
	return c.runCall(ctx, http.MethodPost, runsPath(route), rr, opts)
}

// ReadRun reads a run; after a lost answer, read it and resubmit the chunk
// at NextChunkIndex.
func (c *Client) ReadRun(ctx context.Context, route, runID string, opts ...CallOption) (*Run, error) {
	return c.runCall(ctx, http.MethodGet, runPath(route, runID), nil, opts)
}

// CancelRun cancels an open or blocked run.
func (c *Client) CancelRun(ctx context.Context, route, runID string, opts ...CallOption) (*Run, error) {
	return c.runCall(ctx, http.MethodPost, runPath(route, runID)+"/cancel", nil, opts)
}

// SubmitChunk submits a chunk; an exact replay answers the stored receipt
// and writes nothing, so a chunk whose answer was lost is sent again as is.
func (c *Client) SubmitChunk(ctx context.Context, route, runID string, ch Chunk, opts ...CallOption) (*BatchResult, error) {
	o := options(opts)
	b, err := jsonBody(ch)
	if err != nil {
		return nil, err
	}
	// A chunk is idempotent by its run, index and digest: safe to retry.
	r := &request{method: http.MethodPost, path: runPath(route, runID) + "/chunks", body: b, ctype: "application/json", idempotent: true}
	resp, err := c.do(ctx, r, o.profile)
	if err != nil {
		return nil, err
	}
	var out BatchResult
	return &out, decode(resp, &out)
}

// Receipt reads the stored answer of a committed chunk.
func (c *Client) Receipt(ctx context.Context, route, runID string, chunkIndex int64, opts ...CallOption) (*BatchResult, error) {
	o := options(opts)
	resp, err := c.do(ctx, &request{method: http.MethodGet, path: runPath(route, runID) + "/chunks/" + strconv.FormatInt(chunkIndex, 10) + "/receipt"}, o.profile)
	if err != nil {
		return nil, err
	}
	var out BatchResult
	return &out, decode(resp, &out)
}

func (c *Client) runCall(ctx context.Context, method, path string, body any, opts []CallOption) (*Run, error) {
	o := options(opts)
	r := &request{method: method, path: path}
	if body != nil {
		b, err := jsonBody(body)
		if err != nil {
			return nil, err
		}
		r.body, r.ctype = b, "application/json"
	}
	resp, err := c.do(ctx, r, o.profile)
	if err != nil {
		return nil, err
	}
	var run Run
	return &run, decode(resp, &run)
}
