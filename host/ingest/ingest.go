// Package ingest is the record host's ingestion runs
// (docs/decisions/ingestion-runs.md): a run announces its source, then its
// chunks, planned by the chunking contract, are each written as one batch
// through the record kernel (host/records) with the chunk's receipt and the
// run's checkpoint, in one transaction. It knows nothing of HTTP; refusals
// are problem.Error values.
package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/chunking"
	"github.com/registrum/registrum/internal/strictjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store"
)

// Ingestion runs (docs/decisions/ingestion-runs.md): a client announces its
// source, then submits chunks planned by greedy-canonical-http-batch-v1 one
// at a time; each chunk is a batch committed with its receipt and the
// run's checkpoint in one transaction.

// Options configure the ingestion runs.
type Options struct {
	// Records is the record kernel the chunks are written through.
	// Required.
	Records *records.Service
}

// Service serves the ingestion runs of one package.
type Service struct {
	records *records.Service
	pkg     *model.Package
	store   *store.Store
}

// New returns the ingestion runs over o.Records.
func New(o Options) (*Service, error) {
	if o.Records == nil {
		return nil, errors.New("ingest: Options.Records is required")
	}
	return &Service{records: o.Records, pkg: o.Records.Package(), store: o.Records.Store()}, nil
}

// ChunkAlgorithmVersion is the only chunking contract a run accepts.
const ChunkAlgorithmVersion = chunking.Version

// Ingestion bounds of the chunking contract.
const (
	MaxIngestionItems       = chunking.MaxItems
	MaxIngestionInputLength = chunking.MaxInputLength
	// DefaultRunListLimit and MaxRunListLimit bound a page of runs.
	DefaultRunListLimit = 25
	MaxRunListLimit     = 100
)

// Outcomes of a chunk attempt, as lastAttempt.outcome says them.
const (
	OutcomeCommitted      = "committed"
	OutcomeReplayed       = "replayed"
	OutcomeInvalidItem    = "invalidItem"
	OutcomeRefused        = "refused"
	OutcomeBindingChanged = "bindingChanged"
	OutcomeChunkMismatch  = "chunkMismatch"
	OutcomeRunNotOpen     = "runNotOpen"
	OutcomeUnavailable    = "unavailable"
)

// emptyDigest is the SHA-256 of no bytes: the committed prefix of a new run.
const emptyDigest = chunking.EmptyDigest

var (
	hexDigestRE    = regexp.MustCompile(`^[0-9a-f]{64}$`)
	prefixDigestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// RunDocument is the wire form of an ingestion run.
type RunDocument struct {
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
	ItemCount             int64        `json:"itemCount"`
	ChunkCount            int64        `json:"chunkCount"`
	ChunkAlgorithmVersion string       `json:"chunkAlgorithmVersion"`
	MaximumItems          int64        `json:"maximumItems"`
	MaximumBytes          int64        `json:"maximumBytes"`
	NextChunkIndex        int64        `json:"nextChunkIndex"`
	CommittedItems        int64        `json:"committedItems"`
	CommittedPrefixDigest string       `json:"committedPrefixDigest"`
	LastAttempt           *LastAttempt `json:"lastAttempt"`
	CreatedAt             string       `json:"createdAt"`
	UpdatedAt             string       `json:"updatedAt"`
	Complete              bool         `json:"complete"`
}

// LastAttempt is the outcome of a run's latest chunk attempt.
type LastAttempt struct {
	Outcome    string `json:"outcome"`
	ChunkIndex int64  `json:"chunkIndex"`
}

// RunList is a page of the caller's runs.
type RunList struct {
	Runs      []RunDocument `json:"runs"`
	HasMore   bool          `json:"hasMore"`
	NextAfter *string       `json:"nextAfter"`
}

// RunQuery holds the query options of a run list, as sent.
type RunQuery struct {
	Limit, After, Status, InputDigest *string
	// refused is the refusal of an unknown or repeated option, which
	// ListRuns answers once the grant is decided.
	refused error
}

// RunQueryOf reads the query options of a run list: limit, after, status
// and inputDigest, each at most once, beside accessProfile. Any other
// option, or one given twice, is refused by ListRuns with 400
// query.invalid after the grant is decided.
func RunQueryOf(opts query.RawOptions) RunQuery {
	var q RunQuery
	for name, vs := range opts {
		var dst **string
		switch name {
		case query.OptAccessProfile:
			continue
		case "limit":
			dst = &q.Limit
		case "after":
			dst = &q.After
		case "status":
			dst = &q.Status
		case "inputDigest":
			dst = &q.InputDigest
		default:
			q.refused = problem.New(problem.QueryInvalid, "%q is not a query option of a run list: limit, after, status and inputDigest are", query.Shorten(name))
			continue
		}
		if len(vs) != 1 {
			q.refused = problem.New(problem.QueryInvalid, "%s must be given exactly once", name)
			continue
		}
		v := vs[0]
		*dst = &v
	}
	return q
}

// bound reports whether a run is bound to the active package.
func (s *Service) bound(r *store.Run) bool {
	return r.PackageRevision == s.pkg.Revision && r.SchemaFingerprint == s.pkg.SchemaFingerprint
}

func (s *Service) runDocument(r *store.Run) RunDocument {
	d := RunDocument{
		RunID: r.RunID, Status: r.Status, EntityID: r.EntityID, Operation: r.Operation, ProfileID: r.ProfileID,
		PackageRevision: r.PackageRevision, SchemaFingerprint: r.SchemaFingerprint, InputDigest: r.InputDigest,
		InputLength: r.InputLength, ItemCount: r.ItemCount, ChunkCount: r.ChunkCount, ChunkAlgorithmVersion: r.ChunkAlgorithmVersion,
		MaximumItems: r.MaximumItems, MaximumBytes: r.MaximumBytes, NextChunkIndex: r.NextChunkIndex, CommittedItems: r.CommittedItems,
		CommittedPrefixDigest: r.CommittedPrefixDigest,
		CreatedAt:             r.CreatedAt.Format(time.RFC3339Nano), UpdatedAt: r.UpdatedAt.Format(time.RFC3339Nano),
		Complete: r.Status == "complete",
	}
	if r.Status == "open" && !s.bound(r) {
		d.Status, d.BlockedReason = "blocked", "activePackageChanged"
	}
	if r.LastAttemptOutcome != "" {
		d.LastAttempt = &LastAttempt{Outcome: r.LastAttemptOutcome, ChunkIndex: r.LastAttemptChunkIndex}
	}
	return d
}

func (s *Service) runResult(status int, r *store.Run) (*records.Result, error) {
	b, err := json.Marshal(s.runDocument(r))
	if err != nil {
		return nil, fmt.Errorf("ingest: render run: %w", err)
	}
	return &records.Result{Status: status, Body: b}, nil
}

// noIdempotencyKey refuses an Idempotency-Key: ingestion routes derive
// their attempt key from the run, the chunk index and the chunk digest.
func noIdempotencyKey(c records.Call) error {
	if c.IdempotencyKey != "" {
		return problem.New(problem.RequestInvalid, "ingestion routes take no Idempotency-Key: a chunk is identified by its run, index and digest; resubmit the same chunk after a lost response")
	}
	return nil
}

// CreateRun opens an ingestion run on a batch entity. The body is judged
// once the route's authority is decided.
func (s *Service) CreateRun(ctx context.Context, c records.Call, e *model.Entity, in records.Body) (*records.Result, error) {
	if e.Batch == nil {
		return nil, problem.NotFound()
	}
	// The route's authority first, so that a caller without it learns
	// nothing: under accessProfile when sent, else under the profileId the
	// body names (checked again below once the body is judged). A faulty
	// body names no profile: the route's default decides.
	body, bodyErr := in.Bytes()
	var doc any
	var decodeErr error
	if bodyErr == nil {
		doc, decodeErr = strictjson.Decode(body)
	}
	hint := c.Profile
	if m, ok := doc.(map[string]any); ok && hint == "" {
		hint, _ = m["profileId"].(string)
	}
	if _, err := s.records.Decide(ctx, records.Call{Bearer: c.Bearer, UnusableCredential: c.UnusableCredential, Profile: hint}, model.OpBatch, e); err != nil {
		return nil, err
	}
	if err := noIdempotencyKey(c); err != nil {
		return nil, err
	}
	if bodyErr != nil {
		return nil, bodyErr
	}
	if decodeErr != nil {
		return nil, records.BodyFault(decodeErr)
	}
	m, err := objectOf(doc, "an ingestion run", "operation", "profileId", "packageRevision", "schemaFingerprint", "inputDigest", "inputLength", "itemCount", "chunkCount", "chunkAlgorithmVersion")
	if err != nil {
		return nil, err
	}
	str := func(k string) (string, error) {
		v, ok := m[k].(string)
		if !ok || v == "" {
			return "", problem.At(problem.RequestInvalid, "/"+k, "%s must be a nonempty string", k)
		}
		return v, nil
	}
	var op, profile, pkgRev, fp, input, algo string
	for _, f := range []struct {
		k string
		v *string
	}{{"operation", &op}, {"profileId", &profile}, {"packageRevision", &pkgRev}, {"schemaFingerprint", &fp}, {"inputDigest", &input}, {"chunkAlgorithmVersion", &algo}} {
		if *f.v, err = str(f.k); err != nil {
			return nil, err
		}
	}
	inputLength, err := count(m, "inputLength", 0, MaxIngestionInputLength)
	if err != nil {
		return nil, err
	}
	items, err := count(m, "itemCount", 1, MaxIngestionItems)
	if err != nil {
		return nil, err
	}
	chunks, err := count(m, "chunkCount", 1, MaxIngestionItems)
	if err != nil {
		return nil, err
	}
	switch {
	case algo != ChunkAlgorithmVersion:
		return nil, problem.At(problem.RequestInvalid, "/chunkAlgorithmVersion", "chunkAlgorithmVersion must be %s", ChunkAlgorithmVersion)
	case op != model.OpCreate && op != model.OpPatch:
		return nil, problem.At(problem.RequestInvalid, "/operation", "operation must be create or patch")
	case op == model.OpPatch && e.MutationMode == model.CreateOnly:
		return nil, problem.At(problem.RequestInvalid, "/operation", "%s records cannot be patched", e.ID)
	case !prefixDigestRE.MatchString(pkgRev):
		return nil, problem.At(problem.RequestInvalid, "/packageRevision", "packageRevision is sha256:<64 lowercase hex>")
	case !prefixDigestRE.MatchString(fp):
		return nil, problem.At(problem.RequestInvalid, "/schemaFingerprint", "schemaFingerprint is sha256:<64 lowercase hex>")
	case !hexDigestRE.MatchString(input):
		return nil, problem.At(problem.RequestInvalid, "/inputDigest", "inputDigest is 64 lowercase hex")
	case chunks > items:
		return nil, problem.At(problem.RequestInvalid, "/chunkCount", "chunkCount is at most itemCount (%d)", items)
	case chunks < (items+int64(e.Batch.MaximumItems)-1)/int64(e.Batch.MaximumItems):
		return nil, problem.At(problem.RequestInvalid, "/chunkCount", "chunkCount is at least ceil(itemCount / maximumItems) = %d", (items+int64(e.Batch.MaximumItems)-1)/int64(e.Batch.MaximumItems))
	case inputLength < 2*items:
		// Every item is a nonempty line ending in a newline.
		return nil, problem.At(problem.RequestInvalid, "/inputLength", "inputLength is at least two bytes per item")
	}
	if c.Profile != "" && c.Profile != profile {
		return nil, problem.At(problem.RequestInvalid, "/profileId", "profileId must name the selected access profile %q", c.Profile)
	}
	// The run's authority is the batch operation under the profile it names.
	grant, err := s.records.Decide(ctx, records.Call{Bearer: c.Bearer, UnusableCredential: c.UnusableCredential, Profile: profile}, model.OpBatch, e)
	if err != nil {
		return nil, err
	}
	if grant.PrincipalReference == "" {
		return nil, problem.At(problem.RequestInvalid, "/profileId", "an ingestion run belongs to its caller: the profile must identify the caller")
	}
	if _, err := s.records.Decide(ctx, records.Call{Bearer: c.Bearer, Profile: profile}, op, e); err != nil {
		return nil, problem.At(problem.RequestInvalid, "/operation", "the profile does not grant %s on %s", op, e.ID)
	}
	if pkgRev != s.pkg.Revision {
		return nil, problem.At(problem.PreconditionFailed, "/packageRevision", "packageRevision is not the active package revision %s", s.pkg.Revision)
	}
	if fp != s.pkg.SchemaFingerprint {
		return nil, problem.At(problem.PreconditionFailed, "/schemaFingerprint", "schemaFingerprint is not the active schema fingerprint %s", s.pkg.SchemaFingerprint)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	r, err := s.store.CreateRun(ctx, &store.Run{
		RunID: id.String(), PrincipalReference: grant.PrincipalReference, EntityID: e.ID, Operation: op, ProfileID: profile,
		PackageRevision: pkgRev, SchemaFingerprint: fp, InputDigest: input, InputLength: inputLength, ItemCount: items, ChunkCount: chunks,
		ChunkAlgorithmVersion: algo, MaximumItems: int64(e.Batch.MaximumItems), MaximumBytes: e.Batch.MaximumBytes, CommittedPrefixDigest: emptyDigest,
	})
	if err != nil {
		return nil, err
	}
	return s.runResult(http.StatusCreated, r)
}

// objectOf checks that doc is an object with exactly the members named.
func objectOf(doc any, what string, members ...string) (map[string]any, error) {
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, problem.At(problem.RequestInvalid, "", "the body of %s is a JSON object", what)
	}
	known := map[string]bool{}
	for _, k := range members {
		known[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !known[k] {
			return nil, problem.At(problem.RequestInvalid, strictjson.Pointer(k), "unknown member %q of %s", k, what)
		}
	}
	for _, k := range members {
		if _, has := m[k]; !has {
			return nil, problem.At(problem.RequestInvalid, strictjson.Pointer(k), "%s is required", k)
		}
	}
	return m, nil
}

// count reads a whole number member within [min, max].
func count(m map[string]any, k string, min, max int64) (int64, error) {
	n, ok := m[k].(json.Number)
	if ok {
		if v, err := strconv.ParseInt(string(n), 10, 64); err == nil && v >= min && v <= max {
			return v, nil
		}
	}
	return 0, problem.At(problem.RequestInvalid, "/"+k, "%s must be a whole number from %d to %d", k, min, max)
}

// ownRun returns a run of e that the caller created, under the authority
// of the batch operation of the run's profile, rechecked on every call.
// Another caller's run and an unknown run are the same concealed 404.
func (s *Service) ownRun(ctx context.Context, c records.Call, e *model.Entity, runID string) (*store.Run, *access.Grant, error) {
	if e.Batch == nil {
		return nil, nil, problem.NotFound()
	}
	var r *store.Run
	if validRunID(runID) {
		var err error
		if r, err = s.store.Run(ctx, e.ID, runID); err != nil && !errors.Is(err, store.ErrRunNotFound) {
			return nil, nil, err
		}
	}
	grant, profile, err := s.decideRun(ctx, c, e, r)
	if err != nil {
		return nil, nil, err
	}
	if r == nil || profile != r.ProfileID || grant.PrincipalReference == "" || grant.PrincipalReference != r.PrincipalReference {
		return nil, nil, problem.NotFound()
	}
	if err := noIdempotencyKey(c); err != nil {
		return nil, nil, err
	}
	return r, grant, nil
}

// validRunID reports whether runID can name a run: run ids are UUIDs.
func validRunID(runID string) bool {
	_, err := uuid.Parse(runID)
	return err == nil && len(runID) == 36
}

// decideRun decides the batch operation of e for a call on a run under
// the call's accessProfile or, when it names none, under the profile of r
// (the run read by its id; nil when none was found or read), and returns
// the profile decided under.
func (s *Service) decideRun(ctx context.Context, c records.Call, e *model.Entity, r *store.Run) (*access.Grant, string, error) {
	profile := c.Profile
	if r != nil && profile == "" {
		profile = r.ProfileID
	}
	grant, err := s.records.Decide(ctx, records.Call{Bearer: c.Bearer, UnusableCredential: c.UnusableCredential, Profile: profile}, model.OpBatch, e)
	if err != nil {
		return nil, "", err
	}
	return grant, profile, nil
}

// GetRun reads one of the caller's runs.
func (s *Service) GetRun(ctx context.Context, c records.Call, e *model.Entity, runID string) (*records.Result, error) {
	r, _, err := s.ownRun(ctx, c, e, runID)
	if err != nil {
		return nil, err
	}
	return s.runResult(http.StatusOK, r)
}

// CancelRun cancels an open or blocked run; its committed chunks stay.
// Cancelling a complete or cancelled run is refused with mutation.conflict.
func (s *Service) CancelRun(ctx context.Context, c records.Call, e *model.Entity, runID string) (*records.Result, error) {
	if _, _, err := s.ownRun(ctx, c, e, runID); err != nil {
		return nil, err
	}
	r, changed, err := s.store.CancelRun(ctx, e.ID, runID)
	if err != nil {
		return nil, err
	}
	if !changed {
		return nil, problem.New(problem.MutationConflict, "the run is %s: only an open or blocked run can be cancelled", r.Status)
	}
	return s.runResult(http.StatusOK, r)
}

// ListRuns lists the caller's runs of e in creation order.
func (s *Service) ListRuns(ctx context.Context, c records.Call, e *model.Entity, q RunQuery) (*records.Result, error) {
	if e.Batch == nil {
		return nil, problem.NotFound()
	}
	grant, err := s.records.Decide(ctx, c, model.OpBatch, e)
	if err != nil {
		return nil, err
	}
	if err := noIdempotencyKey(c); err != nil {
		return nil, err
	}
	if grant.PrincipalReference == "" {
		return nil, problem.NotFound()
	}
	if q.refused != nil {
		return nil, q.refused
	}
	f := store.RunFilter{EntityID: e.ID, PrincipalReference: grant.PrincipalReference, PackageRevision: s.pkg.Revision, SchemaFingerprint: s.pkg.SchemaFingerprint, Limit: DefaultRunListLimit}
	if q.Limit != nil {
		n, err := strconv.Atoi(*q.Limit)
		if err != nil || n < 1 || n > MaxRunListLimit || strconv.Itoa(n) != *q.Limit {
			return nil, problem.New(problem.QueryInvalid, "limit is a whole number from 1 to %d", MaxRunListLimit)
		}
		f.Limit = n
	}
	if q.After != nil {
		if id, err := uuid.Parse(*q.After); err != nil || id.String() != *q.After {
			return nil, problem.New(problem.QueryInvalid, "after is the run id of a run listed before")
		}
		f.After = *q.After
	}
	if q.Status != nil {
		switch *q.Status {
		case "open", "complete", "cancelled", "blocked":
			f.Status = *q.Status
		default:
			return nil, problem.New(problem.QueryInvalid, "status is open, complete, cancelled or blocked")
		}
	}
	if q.InputDigest != nil {
		if !hexDigestRE.MatchString(*q.InputDigest) {
			return nil, problem.New(problem.QueryInvalid, "inputDigest is 64 lowercase hex")
		}
		f.InputDigest = *q.InputDigest
	}
	want := f.Limit
	f.Limit++
	runs, err := s.store.Runs(ctx, f)
	if err != nil {
		return nil, err
	}
	out := RunList{Runs: []RunDocument{}}
	if len(runs) > want {
		out.HasMore = true
		runs = runs[:want]
		last := runs[want-1].RunID
		out.NextAfter = &last
	}
	for _, r := range runs {
		out.Runs = append(out.Runs, s.runDocument(r))
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return &records.Result{Status: http.StatusOK, Body: b}, nil
}

// Receipt returns the stored batch response of a committed chunk, byte for
// byte; 410 ingestion.receipt_erased after the history it covers was erased.
func (s *Service) Receipt(ctx context.Context, c records.Call, e *model.Entity, runID, index string) (*records.Result, error) {
	r, _, err := s.ownRun(ctx, c, e, runID)
	if err != nil {
		return nil, err
	}
	i, err := strconv.ParseInt(index, 10, 64)
	if err != nil || i < 0 || strconv.FormatInt(i, 10) != index {
		return nil, problem.NotFound()
	}
	ch, err := s.store.Chunk(ctx, r.RunID, i)
	if errors.Is(err, store.ErrRunNotFound) {
		return nil, problem.NotFound()
	}
	if err != nil {
		return nil, err
	}
	if ch.Erased || ch.Receipt == nil {
		return nil, problem.New(problem.IngestionReceiptErased, "the history this receipt describes was erased")
	}
	return &records.Result{Status: http.StatusOK, Body: ch.Receipt}, nil
}

// ChunkBody is a parsed chunk submission.
type ChunkBody struct {
	Index        int64
	Items        []any
	Digest       string
	PrefixDigest string
	// Canonical is JCS({"items": items}), the batch body the digest covers;
	// Items are what decoding it gives.
	Canonical []byte
}

// ParseChunk checks a chunk body's shape ({chunkIndex, items, digest,
// prefixDigest}, nothing else) and returns it with the canonical batch
// body its digest must cover. It checks no item against the entity.
func ParseChunk(body []byte) (*ChunkBody, error) {
	doc, err := strictjson.Decode(body)
	if err != nil {
		return nil, records.BodyFault(err)
	}
	m, err := objectOf(doc, "a chunk", "chunkIndex", "items", "digest", "prefixDigest")
	if err != nil {
		return nil, err
	}
	idx, err := count(m, "chunkIndex", 0, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	items, ok := m["items"].([]any)
	if !ok || len(items) == 0 {
		return nil, problem.At(problem.RequestInvalid, "/items", "items must be a nonempty array")
	}
	digest, _ := m["digest"].(string)
	if !hexDigestRE.MatchString(digest) {
		return nil, problem.At(problem.RequestInvalid, "/digest", "digest is 64 lowercase hex")
	}
	prefix, _ := m["prefixDigest"].(string)
	if !hexDigestRE.MatchString(prefix) {
		return nil, problem.At(problem.RequestInvalid, "/prefixDigest", "prefixDigest is 64 lowercase hex")
	}
	canonical, err := chunking.Body(items)
	if err != nil {
		return nil, problem.At(problem.RequestInvalid, "/items", "the items have no canonical form (numbers must fit binary64)")
	}
	// The items as the canonical body holds them (numbers in their
	// canonical form), which is what the chunk's items are checked as.
	for i := range items {
		if items[i], err = canonjson.CanonicalNumbers(items[i]); err != nil {
			return nil, problem.At(problem.RequestInvalid, "/items", "the items have no canonical form (numbers must fit binary64)")
		}
	}
	return &ChunkBody{Index: idx, Items: items, Digest: digest, PrefixDigest: prefix, Canonical: canonical}, nil
}

// CanonicalDigest is the lowercase hex SHA-256 of the canonical batch body.
func (b *ChunkBody) CanonicalDigest() string {
	return chunking.Digest(b.Canonical)
}

// AheadWait is how long a chunk one index ahead of its run waits for its
// predecessor before it is refused: a client may send chunk i+1 while
// chunk i commits (sdk/ingest keeps two in flight), and i+1 can reach the
// run's lock first. Within the wait the lock is let go and taken again, so
// the predecessor commits and i+1 follows it; nothing is written or
// recorded for the chunk until it is judged.
const AheadWait = 500 * time.Millisecond

// errAhead unwinds the transaction of a chunk one ahead of its run, to
// take the lock again after its predecessor.
var errAhead = errors.New("ingest: the chunk is one ahead of its run")

// createsOnly reports whether every item of a chunk says it is a create
// (the items' checks say whether they are).
func createsOnly(items []any) bool {
	for _, raw := range items {
		if m, ok := raw.(map[string]any); !ok || m["operation"] != model.OpCreate {
			return false
		}
	}
	return true
}

// chunkRefusal is a refusal of a chunk attempt with the outcome it records.
type chunkRefusal struct {
	outcome string
	err     error
}

func (r *chunkRefusal) Error() string { return r.err.Error() }
func (r *chunkRefusal) Unwrap() error { return r.err }

// chunkReplay unwinds the chunk transaction with a stored receipt.
type chunkReplay struct{ receipt []byte }

func (r *chunkReplay) Error() string { return "replayed" }

func refuse(outcome string, code problem.Code, at, format string, args ...any) *chunkRefusal {
	if at == "" {
		return &chunkRefusal{outcome, problem.New(code, format, args...)}
	}
	return &chunkRefusal{outcome, problem.At(code, at, format, args...)}
}

// Chunk submits the next chunk of a run: it commits atomically with its
// records, revisions, audit entries, receipt and checkpoint and answers the
// batch response; the exact replay of a committed chunk answers its stored
// receipt byte for byte and writes nothing; anything else is refused with
// nothing written. Every attempt's outcome is the run's lastAttempt.
//
// The body is judged once the caller's own run is found: another caller's
// run and an unknown run are the concealed not-found whatever the body.
// A well-formed chunk takes two round trips to the database. A chunk of
// creates is checked under the run's profile first; the first round trip
// locks the caller's run, reads the chunk's index (for a replay) and
// writes the chunk's records, revisions and audit entries; the second
// carries the receipt with the snapshot, the checkpoint and COMMIT, once
// the chunk was judged against the locked run. Any other chunk's items are
// checked while the lock travels, and its writes go with the second.
func (s *Service) Chunk(ctx context.Context, c records.Call, e *model.Entity, runID string, in records.Body) (*records.Result, error) {
	if e.Batch == nil {
		return nil, problem.NotFound()
	}
	body, err := in.Bytes()
	var cb *ChunkBody
	if err == nil {
		cb, err = ParseChunk(body)
	}
	if err != nil {
		return nil, s.malformedChunk(ctx, c, e, runID, err)
	}
	// Without an accessProfile the run's profile is read for the
	// decision; the lock below checks the run against both again.
	var pre *store.Run
	if c.Profile == "" && validRunID(runID) {
		if pre, err = s.store.Run(ctx, e.ID, runID); err != nil && !errors.Is(err, store.ErrRunNotFound) {
			return nil, err
		}
	}
	grant, profile, err := s.decideRun(ctx, c, e, pre)
	if err != nil {
		return nil, err
	}
	if !validRunID(runID) || grant.PrincipalReference == "" {
		return nil, problem.NotFound()
	}
	// Items are checked under the run's profile, whatever accessProfile
	// says: the lock finds the run only when it is the caller's under this
	// profile. They are checked while the lock travels; what the check
	// says is used once every check of the chunk before it has passed, so
	// the answer is the one checking them in turn gives.
	c.Profile = profile
	type checked struct {
		items []records.BatchItem
		err   error
	}
	itemsChecked := make(chan checked, 1)
	go func() {
		items, err := s.records.ParseBatchItems(ctx, c, e, grant, cb.Items)
		itemsChecked <- checked{items, err}
	}()
	var run *store.Run // the caller's run, once locked
	var items []records.BatchItem
	var got *checked
	// checkedItems waits, once, for the items' checks.
	checkedItems := func() *checked {
		if got == nil {
			g := <-itemsChecked
			got = &g
		}
		return got
	}
	var cc []byte
	waitUntil := time.Now().Add(AheadWait)
	// Once a chunk waited for its predecessor, its writes go after its
	// lock: a chunk one ahead that no predecessor follows does not have
	// its rows inserted and rolled back at every try.
	waited := false
	write := func(w *store.Writer) (*store.Outcome, error) {
		lock := w.QueueRunLock(e.ID, runID, grant.PrincipalReference, profile, cb.Index)
		// A chunk of creates whose items passed their checks is written in
		// the lock's round trip: its records, revisions and audit entries
		// are inserted as soon as the lock is granted, and what stands
		// between the lock and COMMIT is the judgement of the chunk
		// against the run. A chunk the run refuses is rolled back with
		// them, and its refusal is the one checking in turn gives.
		var out *store.Outcome
		var writeErr error
		queued := false
		if !waited && createsOnly(cb.Items) {
			if g := checkedItems(); g.err == nil {
				items, queued = g.items, true
				w.StoresAnswer()
				out, writeErr = s.records.WriteBatch(ctx, w, c, e, grant, items, cc)
			}
		}
		flushErr := w.Flush(ctx)
		locked, done, err := lock.Result()
		if errors.Is(err, store.ErrRunNotFound) {
			return nil, problem.NotFound()
		}
		if err != nil {
			if flushErr != nil {
				return nil, flushErr
			}
			return nil, err
		}
		if err := noIdempotencyKey(c); err != nil {
			return nil, err
		}
		if done == nil && cb.Index == locked.NextChunkIndex+1 && locked.Status == "open" && s.bound(locked) && time.Now().Before(waitUntil) {
			// One ahead: its predecessor may be on its way to this lock
			// (a client with two chunks in flight). The lock is let go
			// for it and taken again; past AheadWait the chunk is
			// refused as any other index.
			return nil, errAhead
		}
		run = locked
		if done != nil {
			if done.Digest == cb.Digest && done.PrefixDigest == cb.PrefixDigest && cb.CanonicalDigest() == cb.Digest {
				if done.Erased || done.Receipt == nil {
					return nil, refuse(OutcomeReplayed, problem.IngestionReceiptErased, "", "the history this chunk's receipt describes was erased")
				}
				return nil, &chunkReplay{done.Receipt}
			}
			return nil, refuse(OutcomeChunkMismatch, problem.MutationConflict, "", "chunk %d was committed with another digest or prefix digest", cb.Index)
		}
		if err := s.fits(run, cb); err != nil {
			return nil, err
		}
		parsed := checkedItems()
		if parsed.err != nil {
			return nil, &chunkRefusal{OutcomeInvalidItem, parsed.err}
		}
		switch {
		case queued && writeErr != nil:
			return nil, &chunkRefusal{OutcomeRefused, writeErr}
		case queued && flushErr != nil:
			// A statement of the chunk's writes failed.
			return nil, flushErr
		case !queued:
			items = parsed.items
			w.StoresAnswer()
			if out, err = s.records.WriteBatch(ctx, w, c, e, grant, items, cc); err != nil {
				return nil, &chunkRefusal{OutcomeRefused, err}
			}
		}
		end := run.CommittedItems + int64(len(items))
		if err := w.CommitChunk(ctx, run, store.Chunk{Index: cb.Index, Digest: cb.Digest, PrefixDigest: cb.PrefixDigest,
			ItemCount: int64(len(items)), EndItem: end, Receipt: out.Body}, cb.Index == run.ChunkCount-1, grant.PrincipalReference, c.TraceID); err != nil {
			return nil, err
		}
		return out, nil
	}
	out, _, err := s.store.Write(ctx, nil, write)
	for pause := time.Millisecond; errors.Is(err, errAhead); pause = min(2*pause, 16*time.Millisecond) {
		waited = true
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		out, _, err = s.store.Write(ctx, nil, write)
	}
	var replay *chunkReplay
	var refusal *chunkRefusal
	switch {
	case err == nil:
		return &records.Result{Status: out.Status, Body: out.Body}, nil
	case run == nil:
		// Not the caller's run (or never locked): no attempt is recorded.
		return nil, err
	case errors.As(err, &replay):
		if err := s.store.RecordAttempt(ctx, run.RunID, OutcomeReplayed, cb.Index); err != nil {
			return nil, err
		}
		return &records.Result{Status: http.StatusOK, Body: replay.receipt, Replayed: true}, nil
	case errors.As(err, &refusal):
		return nil, s.attempt(ctx, run, refusal.outcome, cb.Index, s.records.Refusal(e, s.records.NameViolatingItem(ctx, c, e, grant, items, cc, refusal.err)))
	case store.Unavailable(err):
		return nil, s.attempt(ctx, run, OutcomeUnavailable, cb.Index, err)
	}
	err = s.records.Refusal(e, s.records.NameViolatingItem(ctx, c, e, grant, items, cc, err))
	var pe *problem.Error
	if errors.As(err, &pe) {
		return nil, s.attempt(ctx, run, OutcomeRefused, cb.Index, err)
	}
	return nil, err
}

// malformedChunk answers a chunk body that cannot be read or is no chunk,
// once the run is found to be the caller's, and records the attempt.
func (s *Service) malformedChunk(ctx context.Context, c records.Call, e *model.Entity, runID string, fault error) error {
	r, _, err := s.ownRun(ctx, c, e, runID)
	if err != nil {
		return err
	}
	outcome := OutcomeRefused
	var pe *problem.Error
	if errors.As(fault, &pe) && pe.FieldPath != nil && len(*pe.FieldPath) > len("/items/") && strings.HasPrefix(*pe.FieldPath, "/items/") {
		outcome = OutcomeInvalidItem
	}
	return s.attempt(ctx, r, outcome, r.NextChunkIndex, fault)
}

// fits checks a chunk that was not committed against the locked run: the
// run open and bound to the active package, the chunk the next one, its
// digest, its bounds, where it ends, and every item the run's operation.
func (s *Service) fits(run *store.Run, cb *ChunkBody) error {
	switch {
	case run.Status != "open":
		return refuse(OutcomeRunNotOpen, problem.MutationConflict, "", "the run is %s", run.Status)
	case !s.bound(run):
		return refuse(OutcomeBindingChanged, problem.PreconditionFailed, "", "the active package changed since the run was opened (activePackageChanged): start a successor run under the new binding")
	case cb.Index != run.NextChunkIndex:
		return refuse(OutcomeChunkMismatch, problem.MutationConflict, "/chunkIndex", "chunkIndex must be nextChunkIndex %d", run.NextChunkIndex)
	case cb.CanonicalDigest() != cb.Digest:
		return refuse(OutcomeChunkMismatch, problem.MutationConflict, "/digest", "digest is not the SHA-256 of the chunk's canonical batch body")
	case int64(len(cb.Items)) > run.MaximumItems:
		return refuse(OutcomeChunkMismatch, problem.MutationConflict, "/items", "the chunk has more than %d items", run.MaximumItems)
	case int64(len(cb.Canonical)) > run.MaximumBytes:
		return refuse(OutcomeChunkMismatch, problem.MutationConflict, "/items", "the chunk's canonical batch body is larger than %d bytes", run.MaximumBytes)
	}
	end := run.CommittedItems + int64(len(cb.Items))
	last := cb.Index == run.ChunkCount-1
	switch {
	case end > run.ItemCount:
		return refuse(OutcomeChunkMismatch, problem.MutationConflict, "/items", "the chunk goes past the run's %d items", run.ItemCount)
	case last && end != run.ItemCount:
		return refuse(OutcomeChunkMismatch, problem.MutationConflict, "/items", "the final chunk must bring the run to its %d items", run.ItemCount)
	case !last && end == run.ItemCount:
		return refuse(OutcomeChunkMismatch, problem.MutationConflict, "/chunkIndex", "the run's items end before its announced %d chunks", run.ChunkCount)
	case last && cb.PrefixDigest != run.InputDigest:
		return refuse(OutcomeChunkMismatch, problem.MutationConflict, "/prefixDigest", "the final chunk's prefixDigest must be the run's inputDigest")
	case !last && cb.PrefixDigest == run.InputDigest:
		return refuse(OutcomeChunkMismatch, problem.MutationConflict, "/prefixDigest", "only the final chunk covers the whole input")
	}
	for i, raw := range cb.Items {
		if m, ok := raw.(map[string]any); ok && m["operation"] != run.Operation {
			return refuse(OutcomeInvalidItem, problem.RequestInvalid, "/items/"+strconv.Itoa(i)+"/operation", "every item of this run is a %s", run.Operation)
		}
	}
	return nil
}

// attempt records the outcome of an attempt that wrote nothing and returns
// its refusal.
func (s *Service) attempt(ctx context.Context, r *store.Run, outcome string, index int64, refusal error) error {
	if err := s.store.RecordAttempt(ctx, r.RunID, outcome, index); err != nil && !store.Unavailable(err) {
		return err
	}
	return refusal
}
