package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrRunNotFound means no ingestion run has the given id.
var ErrRunNotFound = errors.New("store: ingestion run not found")

// Run is the stored state of one ingestion run. Status is open, complete
// or cancelled: blocked is derived by the reader from the binding.
type Run struct {
	RunID                 string
	PrincipalReference    string
	EntityID              string
	Operation             string
	ProfileID             string
	PackageRevision       string
	SchemaFingerprint     string
	InputDigest           string
	InputLength           int64
	ItemCount             int64
	ChunkCount            int64
	ChunkAlgorithmVersion string
	MaximumItems          int64
	MaximumBytes          int64
	Status                string
	NextChunkIndex        int64
	CommittedItems        int64
	CommittedPrefixDigest string
	// LastAttemptOutcome is "" before any attempt.
	LastAttemptOutcome    string
	LastAttemptChunkIndex int64
	CreatedAt             time.Time
	UpdatedAt             time.Time
}

// Chunk is one committed chunk of a run.
type Chunk struct {
	RunID        string
	Index        int64
	Digest       string
	PrefixDigest string
	ItemCount    int64
	EndItem      int64
	// Receipt is the exact batch response the chunk answered; nil when erased.
	Receipt []byte
	Erased  bool
}

const runColumns = `run_id::text, principal_reference, entity_id, operation, profile_id, package_revision, schema_fingerprint,
    input_digest, input_length, item_count, chunk_count, chunk_algorithm_version, maximum_items, maximum_bytes,
    status, next_chunk_index, committed_items, committed_prefix_digest, coalesce(last_attempt_outcome, ''),
    coalesce(last_attempt_chunk_index, 0), created_at, updated_at`

func scanRun(row pgx.Row) (*Run, error) {
	r := &Run{}
	err := row.Scan(&r.RunID, &r.PrincipalReference, &r.EntityID, &r.Operation, &r.ProfileID, &r.PackageRevision, &r.SchemaFingerprint,
		&r.InputDigest, &r.InputLength, &r.ItemCount, &r.ChunkCount, &r.ChunkAlgorithmVersion, &r.MaximumItems, &r.MaximumBytes,
		&r.Status, &r.NextChunkIndex, &r.CommittedItems, &r.CommittedPrefixDigest, &r.LastAttemptOutcome,
		&r.LastAttemptChunkIndex, &r.CreatedAt, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrRunNotFound
	}
	if err != nil {
		return nil, err
	}
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, nil
}

// CreateRun stores a new open run; its times are set here.
func (s *Store) CreateRun(ctx context.Context, r *Run) (_ *Run, err error) {
	ctx, span := startOp(ctx, spanTx, "CreateRun")
	defer func() { endOp(span, err) }()
	row := s.pool.QueryRow(ctx, `INSERT INTO registrum.ingestion_runs
    (run_id, principal_reference, entity_id, operation, profile_id, package_revision, schema_fingerprint,
     input_digest, input_length, item_count, chunk_count, chunk_algorithm_version, maximum_items, maximum_bytes,
     status, committed_prefix_digest, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 'open', $15, now(), now())
    RETURNING `+runColumns,
		r.RunID, r.PrincipalReference, r.EntityID, r.Operation, r.ProfileID, r.PackageRevision, r.SchemaFingerprint,
		r.InputDigest, r.InputLength, r.ItemCount, r.ChunkCount, r.ChunkAlgorithmVersion, r.MaximumItems, r.MaximumBytes,
		r.CommittedPrefixDigest)
	out, err := scanRun(row)
	if err != nil {
		return nil, fmt.Errorf("store: create ingestion run: %w", err)
	}
	return out, nil
}

// Run reads one run of an entity; ErrRunNotFound when there is none.
func (s *Store) Run(ctx context.Context, entityID, runID string) (_ *Run, err error) {
	ctx, span := startOp(ctx, spanRead, "Run")
	defer func() { endOp(span, err) }()
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM registrum.ingestion_runs WHERE run_id = $1 AND entity_id = $2`, runID, entityID))
	if err != nil && !errors.Is(err, ErrRunNotFound) {
		return nil, fmt.Errorf("store: read ingestion run: %w", err)
	}
	return r, err
}

// RunFilter selects a page of one caller's runs of one entity.
type RunFilter struct {
	EntityID           string
	PrincipalReference string
	// After is the run id the page starts after, "" for the first page.
	After string
	// Status is open, complete, cancelled or blocked, "" for any. Blocked
	// and open are told apart by the active binding.
	Status string
	// InputDigest keeps only the runs of this input, "" for any.
	InputDigest string
	// PackageRevision and SchemaFingerprint are the active binding.
	PackageRevision   string
	SchemaFingerprint string
	Limit             int
}

// Runs lists a caller's runs in creation order (run ids are UUIDv7), at
// most Limit of them.
func (s *Store) Runs(ctx context.Context, f RunFilter) (_ []*Run, err error) {
	ctx, span := startOp(ctx, spanRead, "Runs")
	defer func() { endOp(span, err) }()
	q := `SELECT ` + runColumns + ` FROM registrum.ingestion_runs
    WHERE principal_reference = $1 AND entity_id = $2
      AND ($3 = '' OR run_id > $3::uuid)
      AND ($4 = '' OR input_digest = $4)`
	switch f.Status {
	case "":
	case "blocked":
		q += ` AND status = 'open' AND (package_revision <> $5 OR schema_fingerprint <> $6)`
	case "open":
		q += ` AND status = 'open' AND package_revision = $5 AND schema_fingerprint = $6`
	default:
		q += ` AND status = $7`
	}
	q += ` AND $5::text IS NOT NULL AND $6::text IS NOT NULL AND $7::text IS NOT NULL ORDER BY run_id LIMIT $8`
	rows, err := s.pool.Query(ctx, q, f.PrincipalReference, f.EntityID, f.After, f.InputDigest, f.PackageRevision, f.SchemaFingerprint, f.Status, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("store: list ingestion runs: %w", err)
	}
	defer rows.Close()
	var out []*Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list ingestion runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list ingestion runs: %w", err)
	}
	return out, nil
}

// CancelRun moves an open run to cancelled and returns it; a run in
// another status is returned unchanged with changed=false.
func (s *Store) CancelRun(ctx context.Context, entityID, runID string) (r *Run, changed bool, err error) {
	ctx, span := startOp(ctx, spanTx, "CancelRun")
	defer func() { endOp(span, err) }()
	r, err = scanRun(s.pool.QueryRow(ctx, `UPDATE registrum.ingestion_runs SET status = 'cancelled', updated_at = now()
    WHERE run_id = $1 AND entity_id = $2 AND status = 'open' RETURNING `+runColumns, runID, entityID))
	if err == nil {
		return r, true, nil
	}
	if !errors.Is(err, ErrRunNotFound) {
		return nil, false, fmt.Errorf("store: cancel ingestion run: %w", err)
	}
	r, err = s.Run(ctx, entityID, runID)
	return r, false, err
}

// RecordAttempt notes the outcome of a chunk attempt that wrote nothing
// (a refusal or a replay); the run's progress is unchanged.
func (s *Store) RecordAttempt(ctx context.Context, runID, outcome string, chunkIndex int64) (err error) {
	ctx, span := startOp(ctx, spanTx, "RecordAttempt")
	defer func() { endOp(span, err) }()
	if _, err := s.pool.Exec(ctx, `UPDATE registrum.ingestion_runs SET last_attempt_outcome = $2, last_attempt_chunk_index = $3 WHERE run_id = $1`,
		runID, outcome, chunkIndex); err != nil {
		return fmt.Errorf("store: record ingestion attempt: %w", err)
	}
	return nil
}

// Chunk reads one committed chunk of a run; ErrRunNotFound when the chunk
// was not committed.
func (s *Store) Chunk(ctx context.Context, runID string, index int64) (_ *Chunk, err error) {
	ctx, span := startOp(ctx, spanRead, "Chunk")
	defer func() { endOp(span, err) }()
	return scanChunk(s.pool.QueryRow(ctx, sqlReadChunk, runID, index), runID, index)
}

// sqlReadChunk reads a committed chunk of a run.
const sqlReadChunk = `SELECT chunk_digest, prefix_digest, item_count, end_item, receipt, receipt_token, erased_at IS NOT NULL
    FROM registrum.ingestion_run_chunks WHERE run_id = $1 AND chunk_index = $2`

// scanChunk reads the row of sqlReadChunk: ErrRunNotFound when the chunk
// was not committed.
func scanChunk(row pgx.Row, runID string, index int64) (*Chunk, error) {
	c := &Chunk{RunID: runID, Index: index}
	var token *storedToken
	err := row.Scan(&c.Digest, &c.PrefixDigest, &c.ItemCount, &c.EndItem, &c.Receipt, &token, &c.Erased)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrRunNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: read ingestion chunk: %w", err)
	}
	if c.Receipt != nil && token != nil {
		// The receipt was stored without its token (CommitChunk).
		if c.Receipt, err = completeBody(c.Receipt, token); err != nil {
			return nil, fmt.Errorf("store: ingestion chunk %d of run %s: %w", index, runID, err)
		}
	}
	return c, nil
}

// RunLock is a run's lock and the read of one of its chunks, queued by
// QueueRunLock; its Result is known once the Writer's next round trip was
// made.
type RunLock struct {
	sent     bool
	run      *Run
	runErr   error
	chunk    *Chunk
	chunkErr error
}

// QueueRunLock queues the statements of LockRunWithChunk without sending
// them: the statements queued after it (a chunk's writes) travel in the
// same round trip and run once the lock is granted, so that a chunk's
// records are written while no host work stands between the lock and
// COMMIT. The caller judges Result before it commits; a transaction whose
// lock says no is rolled back with what was queued after it.
func (w *Writer) QueueRunLock(entityID, runID, principalReference, profileID string, index int64) *RunLock {
	l := &RunLock{}
	w.sendRow(func(row pgx.Row) error {
		l.sent = true
		l.run, l.runErr = scanRun(row)
		return nil
	}, `SELECT `+runColumns+` FROM registrum.ingestion_runs
    WHERE run_id = $1 AND entity_id = $2 AND principal_reference = $3 AND profile_id = $4 FOR UPDATE`, runID, entityID, principalReference, profileID)
	w.sendRow(func(row pgx.Row) error {
		l.chunk, l.chunkErr = scanChunk(row, runID, index)
		return nil
	}, sqlReadChunk, runID, index)
	return l
}

// Result is the locked run and its chunk (nil when that chunk was not
// committed); ErrRunNotFound when the run is not the caller's.
func (l *RunLock) Result() (*Run, *Chunk, error) {
	switch {
	case !l.sent:
		return nil, nil, errors.New("store: the run's lock was not sent")
	case l.runErr != nil && !errors.Is(l.runErr, ErrRunNotFound):
		return nil, nil, fmt.Errorf("store: lock ingestion run: %w", l.runErr)
	case l.runErr != nil:
		return nil, nil, l.runErr
	case errors.Is(l.chunkErr, ErrRunNotFound):
		return l.run, nil, nil
	case l.chunkErr != nil:
		return nil, nil, l.chunkErr
	}
	return l.run, l.chunk, nil
}

// LockRunWithChunk reads a run of entityID that principalReference opened
// under profileID and locks it until the transaction ends, so that one
// chunk of a run commits at a time, and reads its committed chunk index
// (nil when that chunk was not committed) in the same round trip; the
// round trip begins the transaction. Another principal's run, or a run of
// another profile, is ErrRunNotFound, and is neither read nor locked. The
// chunk's statement runs after the lock was granted, so it sees a chunk
// that the run's previous holder committed.
func (w *Writer) LockRunWithChunk(ctx context.Context, entityID, runID, principalReference, profileID string, index int64) (*Run, *Chunk, error) {
	l := w.QueueRunLock(entityID, runID, principalReference, profileID, index)
	if err := w.flush(ctx); err != nil && !l.sent {
		return nil, nil, fmt.Errorf("store: lock ingestion run: %w", err)
	}
	return l.Result()
}

// CommitChunk stores a chunk's receipt and advances the run's checkpoint in
// the transaction that wrote the chunk's records; complete marks the run
// complete. An audit entry records the commit. The receipt is w's answer:
// w was told it StoresAnswer, and the receipt carries the stand-in
// TokenAtCommit rendered for its snapshot token. It is stored without it,
// with what the token is made of, read in the same statement; every read
// of the receipt (a replay, Store.Chunk) makes the token again.
func (w *Writer) CommitChunk(ctx context.Context, r *Run, c Chunk, complete bool, principalReference, traceID string) error {
	if !w.storesAnswer || w.atCommit == nil || w.atCommit.marker == "" {
		return errors.New("store: a chunk's receipt is stored with its snapshot (StoresAnswer, then TokenAtCommit)")
	}
	receipt, at, err := w.atCommit.cut(c.Receipt)
	if err != nil {
		return err
	}
	w.atCommit.at, w.atCommit.stored = at, true
	w.sendRow(w.atCommit.read, sqlStoreChunkWithSnapshot,
		r.RunID, c.Index, c.Digest, c.PrefixDigest, c.ItemCount, c.EndItem, w.commitID, receipt, w.now, at, w.s.fp, w.s.maxInProgress)
	status := "open"
	if complete {
		status = "complete"
	}
	w.send(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("store: advance ingestion run %s: the checkpoint moved", r.RunID)
		}
		return nil
	}, func(err error) error { return fmt.Errorf("store: advance ingestion run: %w", err) }, SQLAdvanceRun,
		r.RunID, c.Index, c.EndItem, c.PrefixDigest, status, w.now)
	w.send(nil, func(err error) error { return fmt.Errorf("store: append audit entry: %w", err) },
		`INSERT INTO registrum.audit (operation, outcome, entity_id, record_reference, revision, principal_reference, trace_id)
    VALUES ('ingestion_chunk', 'succeeded', $1, NULL, NULL, nullif($2, ''), $3)`, r.EntityID, principalReference, traceID)
	return nil
}

// sqlStoreChunkWithSnapshot stores a chunk's receipt as SQLStoreChunk does,
// without its token, and what the token is made of beside it, read by
// writeSnapshotOf in the same statement: $1–$9 as SQLStoreChunk's, $10
// where the token goes in the receipt, $11 schema fingerprint, $12 the
// in-progress bound. It returns the snapshot as sqlWriteSnapshot does.
var sqlStoreChunkWithSnapshot = `INSERT INTO registrum.ingestion_run_chunks
    (run_id, chunk_index, chunk_digest, prefix_digest, item_count, end_item, commit_id, receipt, created_at, receipt_token)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, (SELECT jsonb_build_object('at', $10::int, 'own', s.own, 'of', s.snapshot, 'tag', encode(s.tag, 'hex'))
        FROM ` + writeSnapshotOf("$11", "$12") + ` s WHERE s.ok))
    RETURNING receipt_token->>'own', receipt_token->>'of', decode(receipt_token->>'tag', 'hex')`
