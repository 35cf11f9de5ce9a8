// Package ingest is the client of ingestion runs: it plans a JSONL source
// into chunks by greedy-canonical-http-batch-v1 (the one definition the
// record host checks, internal/chunking), opens a run announcing it, and
// uploads the chunks in order, resuming from the run's nextChunkIndex after
// any failure — a lost response included, since the exact resubmission of a
// committed chunk answers its stored receipt and writes nothing.
//
// A typical import:
//
//	c := &ingest.Client{BaseURL: url, Route: "cases", Profile: "caseworker", Token: tok}
//	b, _ := c.Binding(ctx)
//	plan, _ := ingest.PlanFile(path, ingest.Create, b.Bounds)
//	run, _ := c.Open(ctx, plan, b)
//	run, err := c.Upload(ctx, run, plan, file, nil)
package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/registrum/registrum/internal/chunking"
	"github.com/registrum/registrum/internal/strictjson"
)

// Operations a run binds.
const (
	Create = chunking.Create
	Patch  = chunking.Patch
)

// Plan is a source cut into chunks; Bounds the batch bounds it respects.
type (
	Plan   = chunking.Plan
	Chunk  = chunking.Chunk
	Bounds = chunking.Bounds
)

// PlanReader plans a JSONL source read from r. A line that is no item of
// op is refused with a *chunking.LineError naming it.
func PlanReader(r io.Reader, op string, b Bounds) (*Plan, error) {
	return chunking.Read(r, op, b)
}

// PlanFile plans the JSONL file at path.
func PlanFile(path, op string, b Bounds) (*Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	defer f.Close()
	return chunking.Read(f, op, b)
}

// Client talks to one batch route of a record host.
type Client struct {
	// BaseURL is the host's URL, e.g. http://127.0.0.1:8080.
	BaseURL string
	// Route is the entity's route, Profile the access profile the run is
	// bound to (sent as accessProfile and profileId).
	Route, Profile string
	// Token returns the bearer token of each call (a tokensource.Source's
	// cached token, or a fixed one).
	Token func(context.Context) (string, error)
	// HTTP is the client used (default: one with a 5-minute timeout).
	HTTP *http.Client
	// RetryFor bounds how long a chunk is retried while the host is
	// unreachable or unavailable (default 10 minutes).
	RetryFor time.Duration
	// Retrying, when set, hears of each failure that is retried.
	Retrying func(chunk int, err error, wait time.Duration)
}

// Run is an ingestion run document.
type Run struct {
	RunID                 string       `json:"runId"`
	Status                string       `json:"status"`
	BlockedReason         string       `json:"blockedReason,omitempty"`
	EntityID              string       `json:"entityId"`
	Operation             string       `json:"operation"`
	ProfileID             string       `json:"profileId"`
	PackageRevision       string       `json:"packageRevision"`
	SchemaFingerprint     string       `json:"schemaFingerprint"`
	InputDigest           string       `json:"inputDigest"`
	InputLength           int64        `json:"inputLength"`
	ItemCount             int          `json:"itemCount"`
	ChunkCount            int          `json:"chunkCount"`
	ChunkAlgorithmVersion string       `json:"chunkAlgorithmVersion"`
	MaximumItems          int          `json:"maximumItems"`
	MaximumBytes          int64        `json:"maximumBytes"`
	NextChunkIndex        int          `json:"nextChunkIndex"`
	CommittedItems        int          `json:"committedItems"`
	CommittedPrefixDigest string       `json:"committedPrefixDigest"`
	LastAttempt           *LastAttempt `json:"lastAttempt"`
	CreatedAt             string       `json:"createdAt"`
	UpdatedAt             string       `json:"updatedAt"`
	Complete              bool         `json:"complete"`
}

// LastAttempt is the outcome of a run's latest chunk attempt.
type LastAttempt struct {
	Outcome    string `json:"outcome"`
	ChunkIndex int    `json:"chunkIndex"`
}

// Binding is what a new run binds to: the active package and the route's
// batch bounds, read from the registry document.
type Binding struct {
	PackageRevision, SchemaFingerprint string
	EntityID                           string
	Bounds                             Bounds
}

// Problem is a refusal by the host (a problem document).
type Problem struct {
	Status    int     `json:"status"`
	Code      string  `json:"code"`
	Title     string  `json:"title"`
	Detail    string  `json:"detail"`
	FieldPath *string `json:"fieldPath"`
	TraceID   string  `json:"traceId"`
}

// MaxDetailBytes bounds the detail of a refusal as the client keeps it:
// an answer that is no problem document (a proxy's error page, say) or an
// oversized detail is cut, so that it cannot flood the output that echoes
// it at every retry.
const MaxDetailBytes = 512

// boundDetail cuts s to at most MaxDetailBytes of valid UTF-8.
func boundDetail(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxDetailBytes {
		return s
	}
	const more = "…"
	cut := MaxDetailBytes - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

func (p *Problem) Error() string {
	s := fmt.Sprintf("%d %s: %s", p.Status, p.Code, p.Detail)
	if p.FieldPath != nil && *p.FieldPath != "" {
		s += " (at " + *p.FieldPath + ")"
	}
	return s
}

// Refusal is a chunk the host refused for what it holds or for the run's
// state; resubmitting it cannot succeed. Rows are never skipped: the remedy
// is a successor run over the source from Line on (after correcting it).
type Refusal struct {
	Run *Run
	// Chunk is the refused chunk, Outcome the run's lastAttempt.outcome.
	Chunk   Chunk
	Outcome string
	// Item is the 0-based source item the host named (-1 when none), Line
	// its 1-based line.
	Item, Line int
	// Committed is how many items are committed: the successor run starts
	// at line Committed+1.
	Committed int
	Problem   *Problem
}

func (r *Refusal) Error() string {
	where := fmt.Sprintf("chunk %d (lines %d-%d)", r.Chunk.Index+1, r.Chunk.FirstItem+1, r.Chunk.FirstItem+r.Chunk.Items)
	if r.Line > 0 {
		where = fmt.Sprintf("line %d (in chunk %d)", r.Line, r.Chunk.Index+1)
	}
	return fmt.Sprintf("ingest: run %s refused %s: %v", r.Run.RunID, where, r.Problem)
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 5 * time.Minute}
}

func (c *Client) runsURL() string {
	return strings.TrimRight(c.BaseURL, "/") + "/v1/records/" + url.PathEscape(c.Route) + "/ingestion-runs"
}

// maxResponse bounds a response body read (receipts of a chunk of the
// largest batch included).
const maxResponse = 64 << 20

// do sends one request and reads its answer; a problem document becomes a
// *Problem, anything that never got an answer a transport error.
func (c *Client) do(ctx context.Context, method, u string, body []byte) (*reply, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.Profile != "" {
		q := req.URL.Query()
		q.Set("accessProfile", c.Profile)
		req.URL.RawQuery = q.Encode()
	}
	if c.Token != nil {
		tok, err := c.Token(ctx)
		if err != nil {
			return nil, fmt.Errorf("ingest: bearer token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, &transportError{err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, &transportError{err}
	}
	if resp.StatusCode >= 400 {
		p := &Problem{Status: resp.StatusCode}
		if json.Unmarshal(b, p) != nil || p.Code == "" {
			p.Code, p.Detail = http.StatusText(resp.StatusCode), strings.TrimSpace(string(b))
		}
		p.Status = resp.StatusCode
		p.Detail = boundDetail(p.Detail)
		return nil, p
	}
	return &reply{resp.StatusCode, resp.Header, b}, nil
}

// reply is an answer of the host.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// transportError is a call that got no answer: the connection failed or
// broke, the answer was lost.
type transportError struct{ err error }

func (e *transportError) Error() string { return "ingest: no answer: " + e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// transient reports whether err may pass by itself: no answer, or the host
// or database unavailable.
func transient(err error) bool {
	var te *transportError
	var p *Problem
	switch {
	case errors.As(err, &te):
		return true
	case errors.As(err, &p):
		return p.Status == http.StatusServiceUnavailable || p.Status == http.StatusBadGateway || p.Status == http.StatusGatewayTimeout ||
			p.Status == http.StatusTooManyRequests || p.Status == http.StatusInternalServerError
	}
	return false
}

// Binding reads the registry document for the active package and the
// route's batch bounds under the client's profile.
func (c *Client) Binding(ctx context.Context) (*Binding, error) {
	rep, err := c.do(ctx, http.MethodGet, strings.TrimRight(c.BaseURL, "/")+"/v1/registry", nil)
	if err != nil {
		return nil, fmt.Errorf("ingest: read the registry document: %w", err)
	}
	b := rep.body
	var doc struct {
		PackageRevision   string `json:"packageRevision"`
		SchemaFingerprint string `json:"schemaFingerprint"`
		Entities          []struct {
			ID    string `json:"id"`
			Route string `json:"route"`
			Batch *struct {
				MaximumItems int   `json:"maximumItems"`
				MaximumBytes int64 `json:"maximumBytes"`
			} `json:"batch"`
		} `json:"entities"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("ingest: registry document: %w", err)
	}
	for _, e := range doc.Entities {
		if e.Route != c.Route {
			continue
		}
		if e.Batch == nil {
			return nil, fmt.Errorf("ingest: the profile %q does not grant batch on %s", c.Profile, c.Route)
		}
		return &Binding{PackageRevision: doc.PackageRevision, SchemaFingerprint: doc.SchemaFingerprint, EntityID: e.ID,
			Bounds: Bounds{MaximumItems: e.Batch.MaximumItems, MaximumBytes: e.Batch.MaximumBytes}}, nil
	}
	return nil, fmt.Errorf("ingest: no route %q visible under the profile %q (unknown route, or a token or profile that grants nothing on it)", c.Route, c.Profile)
}

// Open announces plan as a new run bound to b.
func (c *Client) Open(ctx context.Context, plan *Plan, b *Binding) (*Run, error) {
	body, err := json.Marshal(map[string]any{
		"operation": plan.Operation, "profileId": c.Profile, "packageRevision": b.PackageRevision, "schemaFingerprint": b.SchemaFingerprint,
		"inputDigest": plan.InputDigest, "inputLength": plan.InputLength, "itemCount": plan.ItemCount, "chunkCount": len(plan.Chunks),
		"chunkAlgorithmVersion": chunking.Version,
	})
	if err != nil {
		return nil, err
	}
	rep, err := c.do(ctx, http.MethodPost, c.runsURL(), body)
	if err != nil {
		return nil, fmt.Errorf("ingest: open a run: %w", err)
	}
	return decodeRun(rep.body)
}

// Run reads one of the caller's runs.
func (c *Client) Run(ctx context.Context, runID string) (*Run, error) {
	rep, err := c.do(ctx, http.MethodGet, c.runsURL()+"/"+url.PathEscape(runID), nil)
	if err != nil {
		return nil, fmt.Errorf("ingest: read run %s: %w", runID, err)
	}
	return decodeRun(rep.body)
}

// Cancel cancels an open or blocked run.
func (c *Client) Cancel(ctx context.Context, runID string) (*Run, error) {
	rep, err := c.do(ctx, http.MethodPost, c.runsURL()+"/"+url.PathEscape(runID)+"/cancel", nil)
	if err != nil {
		return nil, fmt.Errorf("ingest: cancel run %s: %w", runID, err)
	}
	return decodeRun(rep.body)
}

func decodeRun(b []byte) (*Run, error) {
	var r Run
	if err := json.Unmarshal(b, &r); err != nil || r.RunID == "" {
		return nil, fmt.Errorf("ingest: not a run document: %.200s", b)
	}
	return &r, nil
}

// Matches checks that run announced plan: the same source, operation,
// chunk count and bounds, and a committed prefix that ends where a chunk of
// the plan ends. Resuming a run with another source is refused here.
func Matches(run *Run, plan *Plan) error {
	switch {
	case run.InputDigest != plan.InputDigest || run.InputLength != plan.InputLength:
		return fmt.Errorf("ingest: run %s announced another source (inputDigest %s, %d bytes; this file: %s, %d bytes)", run.RunID, run.InputDigest, run.InputLength, plan.InputDigest, plan.InputLength)
	case run.Operation != plan.Operation:
		return fmt.Errorf("ingest: run %s is a %s run, the source was planned for %s", run.RunID, run.Operation, plan.Operation)
	case run.ItemCount != plan.ItemCount || run.ChunkCount != len(plan.Chunks) || run.MaximumItems != plan.Bounds.MaximumItems || run.MaximumBytes != plan.Bounds.MaximumBytes:
		return fmt.Errorf("ingest: run %s announced %d items in %d chunks of at most %d items and %d bytes; the plan has %d items in %d chunks of at most %d and %d",
			run.RunID, run.ItemCount, run.ChunkCount, run.MaximumItems, run.MaximumBytes, plan.ItemCount, len(plan.Chunks), plan.Bounds.MaximumItems, plan.Bounds.MaximumBytes)
	case run.NextChunkIndex < 0 || run.NextChunkIndex > len(plan.Chunks):
		return fmt.Errorf("ingest: run %s is at chunk %d of %d", run.RunID, run.NextChunkIndex+1, len(plan.Chunks))
	}
	want, items := chunking.EmptyDigest, 0
	if n := run.NextChunkIndex; n > 0 {
		want, items = plan.Chunks[n-1].PrefixDigest, plan.Chunks[n-1].FirstItem+plan.Chunks[n-1].Items
	}
	if run.CommittedPrefixDigest != want || run.CommittedItems != items {
		return fmt.Errorf("ingest: run %s committed a prefix (%d items, %s) that is not this plan's first %d chunks", run.RunID, run.CommittedItems, run.CommittedPrefixDigest, run.NextChunkIndex)
	}
	return nil
}

// Progress reports one committed chunk.
type Progress struct {
	Run *Run
	// Chunk is the chunk just committed (or answered as a replay).
	Chunk    Chunk
	Replayed bool
	// Took is the time of the successful submission (its round trip,
	// the chunk's commit included; for a chunk sent while its predecessor
	// was on its way, the wait for the predecessor's commit too).
	Took time.Duration
	// CommittedItems and CommittedBytes count the source committed so far.
	CommittedItems int
	CommittedBytes int64
}

// Upload submits the chunks of plan from run.NextChunkIndex on, reading
// them from src (the planned source), until the run is complete. A failure
// that may pass (no answer, 5xx) is retried with the same chunk for up to
// RetryFor: a chunk that committed although its answer was lost answers
// its stored receipt. A chunk the host refuses for its content or the
// run's state ends the upload with a *Refusal. progress, when set, hears of
// each committed chunk.
//
// Two chunks are on their way at a time: once chunk i's request is
// written, chunk i+1 is sent, and the host takes it after i commits, so
// that the host reads and checks i+1 while i commits. A failure of i
// withdraws i+1 before the run is read again, so the run's lastAttempt is
// i's.
func (c *Client) Upload(ctx context.Context, run *Run, plan *Plan, src io.ReaderAt, progress func(Progress)) (*Run, error) {
	if err := Matches(run, plan); err != nil {
		return run, err
	}
	if run.Status != "open" && !run.Complete {
		return run, c.refusal(run, plan, run.NextChunkIndex, &Problem{Code: "run." + run.Status, Detail: "the run is " + run.Status + blockedWhy(run)})
	}
	var ahead *inflight // chunk i+1, sent while chunk i was on its way
	defer func() { ahead.withdraw() }()
	plain := -1 // a chunk refused while sent ahead, sent again on its own
	for i := run.NextChunkIndex; i < len(plan.Chunks); {
		ch := plan.Chunks[i]
		cur := ahead
		ahead = nil
		if cur == nil || cur.index != i {
			cur.withdraw()
			next := prepare(plan, src, i)
			if next.err != nil {
				return run, next.err
			}
			cur = c.send(ctx, run, ch, next.body, false)
		}
		// While chunk i is on its way, i+1 is read and rebuilt, and sent
		// once i's request is written.
		var later *prepared
		if i+1 < len(plan.Chunks) {
			next := prepare(plan, src, i+1)
			later = &next
			select {
			case <-cur.wrote:
				if next.err == nil {
					ahead = c.send(ctx, run, plan.Chunks[i+1], next.body, true)
				}
			case <-cur.retried:
			}
		}
		res := cur.wait(func() { ahead.withdraw(); ahead = nil })
		var p *Problem
		switch {
		case res.err == nil:
		case errors.As(res.err, &p) && p.Status == http.StatusConflict:
			ahead.withdraw()
			ahead = nil
			// The run moved on (a lost answer of this chunk, another
			// uploader) or the chunk does not fit it: reread and resume
			// where it stands when it is this plan's prefix.
			again, rerr := c.Run(ctx, run.RunID)
			if rerr != nil {
				return run, rerr
			}
			run = again
			if run.NextChunkIndex > i && Matches(run, plan) == nil {
				i = run.NextChunkIndex
				continue
			}
			if cur.ahead && plain != i && run.NextChunkIndex == i && Matches(run, plan) == nil {
				// Sent ahead, it waited longer for its predecessor than
				// the host holds a chunk: sent again on its own.
				plain = i
				continue
			}
			return run, c.refusal(run, plan, i, p)
		case errors.As(res.err, &p):
			ahead.withdraw()
			ahead = nil
			if again, rerr := c.Run(ctx, run.RunID); rerr == nil {
				run = again
			}
			return run, c.refusal(run, plan, i, p)
		default:
			return run, res.err
		}
		if later != nil && later.err != nil {
			return run, later.err
		}
		run.NextChunkIndex, run.CommittedItems, run.CommittedPrefixDigest = i+1, ch.FirstItem+ch.Items, ch.PrefixDigest
		if i+1 == len(plan.Chunks) {
			run.Status, run.Complete = "complete", true
		}
		if progress != nil {
			progress(Progress{Run: run, Chunk: ch, Replayed: res.replayed, Took: res.took, CommittedItems: ch.FirstItem + ch.Items, CommittedBytes: ch.Offset + ch.Length})
		}
		i++
	}
	if len(plan.Chunks) > 0 && !run.Complete {
		// Resumed a run whose chunks were all committed already.
		again, err := c.Run(ctx, run.RunID)
		if err != nil {
			return run, err
		}
		run = again
	}
	return run, nil
}

// inflight is the submission of one chunk, on its way in a goroutine of
// its own.
type inflight struct {
	index int
	// ahead: sent while its predecessor was on its way.
	ahead  bool
	cancel context.CancelFunc
	// wrote is closed once the request is written (or the submission
	// ended), retried once it is first retried.
	wrote, retried chan struct{}
	done           chan submitted
}

// submitted is how a submission ended.
type submitted struct {
	replayed bool
	took     time.Duration
	err      error
}

// send starts submitting chunk ch.
func (c *Client) send(ctx context.Context, run *Run, ch Chunk, body []byte, ahead bool) *inflight {
	f := &inflight{index: ch.Index, ahead: ahead, wrote: make(chan struct{}), retried: make(chan struct{}), done: make(chan submitted, 1)}
	var wrote, retried sync.Once
	ctx, f.cancel = context.WithCancel(ctx)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		wrote.Do(func() { close(f.wrote) })
	}})
	go func() {
		start := time.Now()
		replayed, err := c.submit(ctx, run, ch, body, func() { retried.Do(func() { close(f.retried) }) })
		wrote.Do(func() { close(f.wrote) })
		f.done <- submitted{replayed, time.Since(start), err}
	}()
	return f
}

// wait returns how the submission ended; onRetry runs when it is first
// retried, before it ends.
func (f *inflight) wait(onRetry func()) submitted {
	retried := f.retried
	for {
		select {
		case res := <-f.done:
			f.cancel()
			return res
		case <-retried:
			onRetry()
			retried = nil
		}
	}
}

// withdraw cancels the submission, if any, and waits for it to end: the
// host then records nothing for it unless it was already judged.
func (f *inflight) withdraw() {
	if f == nil {
		return
	}
	f.cancel()
	<-f.done
	f.done <- submitted{err: context.Canceled}
}

// prepared is the submission of one chunk, read and rebuilt from the
// source.
type prepared struct {
	body []byte
	err  error
}

// prepare reads chunk i of plan from src, checks it against the plan and
// returns its submission.
func prepare(plan *Plan, src io.ReaderAt, i int) prepared {
	ch := plan.Chunks[i]
	raw := make([]byte, ch.Length)
	if _, err := src.ReadAt(raw, ch.Offset); err != nil {
		return prepared{err: fmt.Errorf("ingest: read chunk %d of the source: %w", i+1, err)}
	}
	body, err := chunking.Rebuild(ch, raw, plan.Operation)
	if err != nil {
		return prepared{err: err}
	}
	return prepared{body: chunking.AppendSubmission(make([]byte, 0, len(body)+256), ch, body)}
}

func blockedWhy(run *Run) string {
	if run.BlockedReason != "" {
		return " (" + run.BlockedReason + ")"
	}
	return ""
}

// submit posts one chunk, retrying what may pass by itself. It reports
// whether the host answered a replay of a committed chunk.
func (c *Client) submit(ctx context.Context, run *Run, ch Chunk, body []byte, retrying func()) (bool, error) {
	retryFor := c.RetryFor
	if retryFor == 0 {
		retryFor = 10 * time.Minute
	}
	deadline := time.Now().Add(retryFor)
	wait := 100 * time.Millisecond
	u := c.runsURL() + "/" + url.PathEscape(run.RunID) + "/chunks"
	for {
		rep, err := c.do(ctx, http.MethodPost, u, body)
		if err == nil {
			if n, ok := receiptResults(rep.body); !ok || n != ch.Items {
				return false, fmt.Errorf("ingest: chunk %d answered no receipt of its %d items: %.200s", ch.Index+1, ch.Items, rep.body)
			}
			return rep.header.Get("Idempotent-Replayed") == "true", nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if !transient(err) || time.Now().Add(wait).After(deadline) {
			return false, err
		}
		retrying()
		if c.Retrying != nil {
			c.Retrying(ch.Index, err, wait)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// receiptResults counts the results of a chunk's receipt, a JSON object
// whose results member is an array; ok is false for anything else. The
// next chunk waits for this check, so it reads the receipt (tens of
// kilobytes) once, with strictjson's scanner, instead of encoding/json's
// reflection.
func receiptResults(body []byte) (n int, ok bool) {
	p := strictjson.NewParser(body, false)
	p.Space()
	if p.ExpectObject() != nil {
		return 0, false
	}
	members, err := p.ScanObject(0, nil, true)
	if err != nil || p.End() != nil {
		return 0, false
	}
	for _, m := range members {
		if m.Key == "results" {
			return arrayLength(body[m.Start:m.End])
		}
	}
	return 0, false
}

// arrayLength counts the elements of a JSON array that a parser already
// accepted; ok is false when the value is no array.
func arrayLength(v []byte) (n int, ok bool) {
	if len(v) < 2 || v[0] != '[' {
		return 0, false
	}
	depth, inString, nonEmpty := 0, false, false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
			continue
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		case c == ',' && depth == 1:
			n++
		}
		if depth >= 1 && c != ' ' && c != '\t' && c != '\n' && c != '\r' && !(depth == 1 && (c == '[' || c == ',')) {
			nonEmpty = true
		}
	}
	if nonEmpty {
		n++
	}
	return n, true
}

// refusal builds the Refusal of chunk i of plan.
func (c *Client) refusal(run *Run, plan *Plan, i int, p *Problem) *Refusal {
	r := &Refusal{Run: run, Chunk: plan.Chunks[min(i, len(plan.Chunks)-1)], Item: -1, Committed: run.CommittedItems, Problem: p}
	if run.LastAttempt != nil {
		r.Outcome = run.LastAttempt.Outcome
	}
	if p.FieldPath != nil && strings.HasPrefix(*p.FieldPath, "/items/") {
		rest := strings.TrimPrefix(*p.FieldPath, "/items/")
		if k, _, _ := strings.Cut(rest, "/"); k != "" {
			if n, err := strconv.Atoi(k); err == nil && n >= 0 && n < r.Chunk.Items {
				r.Item = r.Chunk.FirstItem + n
				r.Line = r.Item + 1
			}
		}
	}
	return r
}
