package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/layout"
)

// Change request states (engineState).
const (
	RequestDraft     = "draft"
	RequestSubmitted = "submitted"
	RequestApplied   = "applied"
	RequestCancelled = "cancelled"
)

// Request is the workflow state of one change request record.
type Request struct {
	EntityID, RecordID string
	// OwnerReference is the keyed reference of the principal that created it.
	OwnerReference string
	State          string
	// ProposalVersion is the current proposal: the draft being edited, or
	// the one submitted.
	ProposalVersion int64
	UpdatedAt       time.Time
	// Proposal is the frozen proposal of ProposalVersion, nil while it is a
	// draft that was never submitted under this version.
	Proposal *Proposal
	// Application is the receipt of the applied proposal, nil until applied.
	Application *Application
	// History is the page of retained proposals a read asked for
	// (Store.RequestHistory), nil when it was not read.
	History *RequestHistory
	// Submission and Result are the current proposal's submission to its
	// review authority and the result it settled, nil while unknown.
	Submission *Submission
	Result     *ReviewResult
	// DBNow is the database clock when the request was read: reads compare
	// a result's availableUntil with it.
	DBNow time.Time
	// Attachments are the filled slots of ProposalVersion.
	Attachments []Attachment
	// AutoApplication is the automatic application of ProposalVersion, nil
	// when none was queued.
	AutoApplication *AutoApplication
}

// Automatic application states (request_auto_applications.state).
const (
	// AutoQueued: the executor's apply job waits for a worker.
	AutoQueued = "queued"
	// AutoApplying: the executor's apply started; a passing failure keeps
	// it here while the job is retried.
	AutoApplying = "applying"
	// AutoBlocked: the apply was refused; an operator is needed.
	AutoBlocked = "blocked"
)

// AutoApplication is the automatic application of one proposal by its
// executor.
type AutoApplication struct {
	State string
	// Attention is why an operator is needed, "" when none is.
	Attention string
	// Attempts counts the starts of the executor's apply.
	Attempts int
}

// Attachment returns the filled slot with that id, or nil.
func (r *Request) Attachment(slot string) *Attachment {
	for i := range r.Attachments {
		if r.Attachments[i].SlotID == slot {
			return &r.Attachments[i]
		}
	}
	return nil
}

// Proposal is a submitted, frozen proposal.
type Proposal struct {
	Version int64
	// RecordRevision is the request record's revision that was submitted.
	RecordRevision int64
	// Planner is the planner kind; ModuleDigest the pinned digest of a
	// plugin planner ("" for declarative).
	Planner, ModuleDigest string
	EffectDigest          string
	// Plan is the canonical JSON of the frozen writes; nil after erasure.
	Plan               []byte
	SubmitterReference string
	SubmitterActor     string
	SubmittedAt        time.Time
	DetailErased       bool
	// Attachments is the canonical JSON of the slot manifest frozen at
	// submission, nil when the entity has no slots.
	Attachments []byte
}

// Application is the receipt of an applied proposal.
type Application struct {
	ID               string
	ProposalVersion  int64
	EffectDigest     string
	ApplierReference string
	ApplierActor     string
	// Reason is the applier's reason when one was given (possibly empty).
	Reason        *string
	ReasonPresent bool
	// Results is the canonical JSON of the records the effects wrote.
	Results   []byte
	AppliedAt time.Time
}

const requestColumns = `now(), r.entity_id, r.record_id::text, r.owner_reference, r.state, r.proposal_version, r.updated_at,
    p.proposal_version, p.record_revision, p.planner, coalesce(p.module_digest, ''), p.effect_digest, p.plan, p.submitter_reference,
    p.submitter_actor, p.submitted_at, p.detail_erased_at IS NOT NULL, p.attachments,
    a.application_id::text, a.proposal_version, a.effect_digest, a.applier_reference, a.applier_actor, a.reason, a.reason_present, a.results, a.applied_at,
    aa.state, aa.attention, aa.attempts
FROM registrum.requests r
LEFT JOIN registrum.request_proposals p ON p.entity_id = r.entity_id AND p.record_id = r.record_id AND p.proposal_version = r.proposal_version
LEFT JOIN registrum.request_applications a ON a.entity_id = r.entity_id AND a.record_id = r.record_id
LEFT JOIN registrum.request_auto_applications aa ON aa.entity_id = r.entity_id AND aa.record_id = r.record_id AND aa.proposal_version = r.proposal_version
WHERE r.entity_id = $1 AND r.record_id = $2`

// draftColumns reads what requestColumns reads from the request's row
// alone, with nulls for the columns requestColumns joins: a draft has no
// frozen proposal, no application and no automatic application at its
// proposal version (a proposal is frozen, applied and queued for its
// executor only once submitted, and a revision moves the draft to the next
// version), so for a draft both read the same. A request in another state
// reads without them; only a caller that refuses anything but a draft
// reads it so. It spares the three joins' probes and plan nodes on the
// path every submit takes.
const draftColumns = `now(), r.entity_id, r.record_id::text, r.owner_reference, r.state, r.proposal_version, r.updated_at,
    NULL::bigint, NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::jsonb, NULL::text,
    NULL::text, NULL::timestamptz, NULL::boolean, NULL::jsonb,
    NULL::text, NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text, NULL::boolean, NULL::jsonb, NULL::timestamptz,
    NULL::text, NULL::text, NULL::integer
FROM registrum.requests r
WHERE r.entity_id = $1 AND r.record_id = $2`

func scanRequest(row pgx.Row) (*Request, error) {
	var rs requestScan
	rs.init()
	err := row.Scan(rs.dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: read request: %w", err)
	}
	return rs.request(), nil
}

// requestScan is the scan of requestColumns in a row.
type requestScan struct {
	r                                                        *Request
	pVersion, pRevision                                      *int64
	planner, moduleDigest, effectDigest, submitter, subActor *string
	plan, manifest                                           []byte
	submittedAt                                              *time.Time
	erased                                                   *bool
	aID, aDigest, aApplier, aActor, aReason                  *string
	aVersion                                                 *int64
	aPresent                                                 *bool
	aResults                                                 []byte
	aAt                                                      *time.Time
	autoState, autoAttention                                 *string
	autoAttempts                                             *int
	dest                                                     []any
}

// init readies rs for a scan.
func (rs *requestScan) init() {
	r := &Request{}
	rs.r = r
	rs.dest = []any{&r.DBNow, &r.EntityID, &r.RecordID, &r.OwnerReference, &r.State, &r.ProposalVersion, &r.UpdatedAt,
		&rs.pVersion, &rs.pRevision, &rs.planner, &rs.moduleDigest, &rs.effectDigest, &rs.plan, &rs.submitter, &rs.subActor, &rs.submittedAt, &rs.erased, &rs.manifest,
		&rs.aID, &rs.aVersion, &rs.aDigest, &rs.aApplier, &rs.aActor, &rs.aReason, &rs.aPresent, &rs.aResults, &rs.aAt,
		&rs.autoState, &rs.autoAttention, &rs.autoAttempts}
}

// request returns the workflow state the row held.
func (rs *requestScan) request() *Request {
	r := rs.r
	r.UpdatedAt, r.DBNow = r.UpdatedAt.UTC(), r.DBNow.UTC()
	if rs.pVersion != nil {
		r.Proposal = &Proposal{Version: *rs.pVersion, RecordRevision: *rs.pRevision, Planner: *rs.planner, ModuleDigest: *rs.moduleDigest,
			EffectDigest: *rs.effectDigest, Plan: rs.plan, SubmitterReference: *rs.submitter, SubmitterActor: *rs.subActor,
			SubmittedAt: rs.submittedAt.UTC(), DetailErased: *rs.erased, Attachments: rs.manifest}
	}
	if rs.aID != nil {
		r.Application = &Application{ID: *rs.aID, ProposalVersion: *rs.aVersion, EffectDigest: *rs.aDigest, ApplierReference: *rs.aApplier,
			ApplierActor: *rs.aActor, Reason: rs.aReason, ReasonPresent: *rs.aPresent, Results: rs.aResults, AppliedAt: rs.aAt.UTC()}
	}
	if rs.autoState != nil {
		r.AutoApplication = &AutoApplication{State: *rs.autoState, Attempts: *rs.autoAttempts}
		if rs.autoAttention != nil {
			r.AutoApplication.Attention = *rs.autoAttention
		}
	}
	return r
}

// Request reads the workflow state of a request record.
func (s *Store) Request(ctx context.Context, e *model.Entity, id string) (_ *Request, err error) {
	ctx, span := startOp(ctx, spanRead, "Request")
	defer func() { endOp(span, err) }()
	r, err := scanRequest(s.pool.QueryRow(ctx, "SELECT "+requestColumns, e.ID, id))
	if err != nil {
		return nil, err
	}
	return r, s.requestDetail(ctx, e, r)
}

// requestDetail reads what a request's workflow state carries beyond its
// row: the slots of its current proposal and its review.
func (s *Store) requestDetail(ctx context.Context, e *model.Entity, r *Request) error {
	if len(e.Attachments) > 0 {
		var err error
		if r.Attachments, err = attachments(ctx, s.pool, e.ID, r.RecordID, r.ProposalVersion); err != nil {
			return err
		}
	}
	return s.review(ctx, s.pool, e, r)
}

// LockRequest reads the workflow state of a request record and locks it
// until the transaction ends.
func (w *Writer) LockRequest(ctx context.Context, e *model.Entity, id string) (*Request, error) {
	r, err := scanRequest(w.queryRow(ctx, "SELECT "+requestColumns+" FOR UPDATE OF r", e.ID, id))
	if err != nil {
		return nil, err
	}
	return r, w.requestDetail(ctx, e, r)
}

// requestDetail is Store.requestDetail in the write's transaction.
func (w *Writer) requestDetail(ctx context.Context, e *model.Entity, r *Request) error {
	if len(e.Attachments) > 0 {
		var err error
		if r.Attachments, err = w.attachments(ctx, e.ID, r.RecordID, r.ProposalVersion); err != nil {
			return err
		}
	}
	return w.s.review(ctx, w.db(), e, r)
}

// LockWithRequest locks a request record and its workflow state with one
// statement (the record's row, then the request's), and reads both. A
// missing record or request is ErrNotFound.
func (w *Writer) LockWithRequest(ctx context.Context, e *model.Entity, id string) (*Record, *Request, error) {
	var rec recordScan
	var req requestScan
	rec.init(e, id)
	req.init()
	err := w.queryRow(ctx, w.s.lockWithRequestSQL(e), e.ID, id).Scan(append(rec.dest, req.dest...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("store: lock %s request: %w", e.ID, err)
	}
	r := req.request()
	return rec.record(), r, w.requestDetail(ctx, e, r)
}

// lockWithRequestSQL returns LockWithRequest's statement, built once per
// entity: the record's columns (recordColumns) then requestColumns, from
// the record's table joined to the request's row and its workflow rows,
// locking the record's row and the request's.
func (s *Store) lockWithRequestSQL(e *model.Entity) string {
	if q, ok := s.locks.Load(e); ok {
		return q.(string)
	}
	from := strings.Replace(requestColumns, "\nFROM registrum.requests r\n", "\nFROM "+layout.Table(e)+" t, registrum.requests r\n", 1)
	q, _ := s.locks.LoadOrStore(e, "SELECT "+recordColumns(e, "t")+", "+from+" AND t."+layout.ColRecordID+" = $2 FOR UPDATE OF t, r")
	return q.(string)
}

// ErrMoved means rows a write decided on before its transaction changed
// before the transaction locked them (Writer.ExpectRequest): nothing was
// written, and the caller decides again on the rows as locked.
var ErrMoved = errors.New("store: the request moved since it was read")

// ExpectRequest queues the lock of a request record and its workflow state
// as the caller read them before the transaction: the record at revision
// and the request in state at proposal version. It reads nothing back, so
// the transaction's statements can follow it in the same round trip; when
// either row moved (or is gone), PostgreSQL fails the statement, skips
// every statement queued after it, COMMIT included, and the write returns
// ErrMoved with nothing written. A write that expects rows this way needs
// no round trip to lock them before it writes. The record's revision
// stands for its values and lifecycle (every change of either takes a new
// revision), the state and proposal version for the workflow; the owner
// never changes. What moves neither (an attachment's verification
// verdict, say) is not guarded: a caller that decides on it locks the
// rows with LockWithRequest.
func (w *Writer) ExpectRequest(e *model.Entity, id string, revision int64, state string, proposalVersion int64) {
	w.sendRow(func(row pgx.Row) error {
		var held bool
		err := row.Scan(&held)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "RGMV1":
			return ErrMoved
		case err != nil:
			return fmt.Errorf("store: lock the request as read: %w", err)
		}
		return nil
	}, w.s.expectRequestSQL(e), id, revision, e.ID, state, proposalVersion)
}

// expectRequestSQL returns the statement that locks the record row and the
// request row when they are as read, and fails (RGMV1) when either is not,
// built once per entity. Under READ COMMITTED a row a concurrent
// transaction changed is waited for and judged again in its new version.
func (s *Store) expectRequestSQL(e *model.Entity) string {
	if q, ok := s.expects.Load(e); ok {
		return q.(string)
	}
	q, _ := s.expects.LoadOrStore(e, `SELECT registrum.expect_unmoved(count(*) = 1, 'request') FROM (SELECT FROM `+layout.Table(e)+` t, registrum.requests r
    WHERE t.`+layout.ColRecordID+` = $1 AND t.`+layout.ColRevision+` = $2
      AND r.entity_id = $3 AND r.record_id = $1 AND r.state = $4 AND r.proposal_version = $5
    FOR UPDATE OF t, r) held`)
	return q.(string)
}

// ActionInputs reads, in one round trip, what a request action checks
// before its transaction: the outcome stored under its idempotency key
// (see Stored), the request's workflow state and the request record. With
// draftOnly (a submit, which only a draft admits) the workflow state is
// read from the request's row alone (draftColumns). A missing record or
// request is ErrNotFound, returned after the stored outcome (a replay is
// answered first).
func (s *Store) ActionInputs(ctx context.Context, idem *Idempotency, e *model.Entity, id string, draftOnly bool) (_ *Outcome, _ *Record, _ *Request, err error) {
	ctx, span := startOp(ctx, spanRead, "ActionInputs")
	defer func() { endOp(span, err) }()
	b := &pgx.Batch{}
	b.Queue(`SELECT request_digest, outcome, outcome_erased_at IS NOT NULL FROM registrum.idempotency WHERE key_reference = $1`, idem.KeyReference)
	if draftOnly {
		b.Queue("SELECT "+draftColumns, e.ID, id)
	} else {
		b.Queue("SELECT "+requestColumns, e.ID, id)
	}
	b.Queue(s.readSQL(e, false), id)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	stored, err := storedOutcome(br.QueryRow(), idem)
	if err != nil || stored != nil {
		return stored, nil, nil, err
	}
	req, reqErr := scanRequest(br.QueryRow())
	rec, recErr := s.scanRecord(br.QueryRow(), e, id)
	if err := br.Close(); err != nil {
		return nil, nil, nil, fmt.Errorf("store: read request action inputs: %w", err)
	}
	switch {
	case recErr != nil:
		return nil, nil, nil, recErr
	case reqErr != nil:
		return nil, nil, nil, reqErr
	}
	return nil, rec, req, s.requestDetail(ctx, e, req)
}

// CreateRequest starts the workflow of a new request record as a draft of
// proposal version 1 owned by owner.
func (w *Writer) CreateRequest(ctx context.Context, e *model.Entity, id, owner string) error {
	w.send(nil, func(err error) error { return fmt.Errorf("store: create request: %w", err) },
		`INSERT INTO registrum.requests (entity_id, record_id, owner_reference, state, proposal_version, updated_at)
    VALUES ($1, $2, $3, 'draft', 1, $4)`, e.ID, id, owner, w.now)
	return nil
}

// SubmitRequest freezes p as the request's current proposal and moves the
// request to submitted.
func (w *Writer) SubmitRequest(ctx context.Context, e *model.Entity, id string, p *Proposal) error {
	w.send(nil, func(err error) error { return fmt.Errorf("store: freeze proposal: %w", err) }, SQLFreezeProposal,
		e.ID, id, p.Version, p.RecordRevision, p.Planner, p.ModuleDigest, p.EffectDigest, string(p.Plan), p.SubmitterReference, p.SubmitterActor, w.now, nullableJSON(p.Attachments))
	p.SubmittedAt = w.now
	return w.SetRequestState(ctx, e, id, RequestSubmitted, p.Version)
}

// SetRequestState moves a request to state at proposal version.
func (w *Writer) SetRequestState(ctx context.Context, e *model.Entity, id, state string, proposalVersion int64) error {
	w.send(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return ErrNotFound
		}
		return nil
	}, func(err error) error { return fmt.Errorf("store: set request state: %w", err) }, SQLSetRequestState,
		e.ID, id, state, proposalVersion, w.now)
	return nil
}

// ApplyRequest writes the application receipt and moves the request to
// applied. It must run in the transaction that wrote the effects.
func (w *Writer) ApplyRequest(ctx context.Context, e *model.Entity, id string, a *Application) error {
	a.AppliedAt = w.now
	w.send(nil, func(err error) error { return fmt.Errorf("store: write application receipt: %w", err) }, SQLStoreApplication,
		a.ID, e.ID, id, a.ProposalVersion, a.EffectDigest, a.ApplierReference, a.ApplierActor, a.Reason, a.ReasonPresent, string(a.Results), w.now)
	return w.SetRequestState(ctx, e, id, RequestApplied, a.ProposalVersion)
}

// Touch appends a revision of a live record with unchanged values, under
// operation (a request action), so that its validator moves on. expected
// is the revision the caller read; anything else is ErrStale.
func (w *Writer) Touch(ctx context.Context, e *model.Entity, rec *Record, expected int64, operation string, j Journal) (*Record, error) {
	next := *rec
	w.send(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return ErrStale
		}
		return nil
	}, func(err error) error { return w.s.writeError(e, err) }, SQLTouchRecord(e), rec.ID, expected, w.now, w.s.pkg.Revision)
	next.Revision = expected + 1
	next.UpdatedAt = w.now
	if err := w.journal(ctx, operation, &next, j); err != nil {
		return nil, err
	}
	return &next, nil
}

// Now returns the transaction's clock reading (the service clock).
func (w *Writer) Now() time.Time { return w.now }

// Stored returns the outcome a write under idem already committed: nil when
// the key is unused (or its first write has not committed),
// ErrIdempotencyConflict when it was used with another request. It lets a
// caller answer a replay before doing work the write would need (a
// planner's run, say); the write itself checks again.
func (s *Store) Stored(ctx context.Context, idem *Idempotency) (_ *Outcome, err error) {
	ctx, span := startOp(ctx, spanRead, "Stored")
	defer func() { endOp(span, err) }()
	return storedOutcome(s.pool.QueryRow(ctx, `SELECT request_digest, outcome, outcome_erased_at IS NOT NULL FROM registrum.idempotency WHERE key_reference = $1`, idem.KeyReference), idem)
}

// storedOutcome reads the row of an idempotency key (see Stored).
func storedOutcome(row pgx.Row, idem *Idempotency) (*Outcome, error) {
	var digest string
	var stored []byte
	var erased bool
	err := row.Scan(&digest, &stored, &erased)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("store: read idempotency key: %w", err)
	case digest != idem.RequestDigest:
		return nil, ErrIdempotencyConflict
	case erased:
		return nil, ErrOutcomeErased
	case stored == nil:
		return nil, nil
	}
	var out struct {
		Outcome
		// Token is what the token of a write that read its snapshot with
		// its COMMIT is made of (TokenAtCommit); its body lacks the token.
		Token *storedToken `json:"snapshot"`
	}
	if err := json.Unmarshal(stored, &out); err != nil {
		return nil, fmt.Errorf("store: stored outcome: %w", err)
	}
	if out.Token != nil {
		if out.Body, err = completeBody(out.Body, out.Token); err != nil {
			return nil, err
		}
	}
	return &out.Outcome, nil
}

// KeyUsed reports whether an idempotency key reference was used before,
// whatever the request.
func (s *Store) KeyUsed(ctx context.Context, keyReference string) (_ bool, err error) {
	ctx, span := startOp(ctx, spanRead, "KeyUsed")
	defer func() { endOp(span, err) }()
	var used bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM registrum.idempotency WHERE key_reference = $1)`, keyReference).Scan(&used); err != nil {
		return false, fmt.Errorf("store: read idempotency key: %w", err)
	}
	return used, nil
}

// QueueAutoApplication records, in the transaction that enqueues the
// executor's apply job, that the automatic application of the proposal is
// queued. A proposal's automatic application is queued once: a second call
// changes nothing and reports false (the caller then enqueues nothing).
func (w *Writer) QueueAutoApplication(ctx context.Context, entity, recordID string, version int64) (bool, error) {
	tag, err := w.exec(ctx, `INSERT INTO registrum.request_auto_applications
    (entity_id, record_id, proposal_version, state, created_at, updated_at)
    VALUES ($1, $2, $3, 'queued', $4, $4) ON CONFLICT DO NOTHING`, entity, recordID, version, w.now)
	if err != nil {
		return false, fmt.Errorf("store: queue automatic application: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// StartAutoApplication moves the automatic application of the proposal from
// queued (or applying, for a retried job) to applying and counts the
// attempt. It reports the state found: anything but queued or applying
// (blocked, or no row) is left as it was, and the job does nothing.
func (s *Store) StartAutoApplication(ctx context.Context, entity, recordID string, version int64) (_ string, err error) {
	ctx, span := startOp(ctx, spanTx, "StartAutoApplication")
	defer func() { endOp(span, err) }()
	var state string
	err = s.pool.QueryRow(ctx, `WITH moved AS (
    UPDATE registrum.request_auto_applications SET state = 'applying', attempts = attempts + 1, updated_at = now()
    WHERE entity_id = $1 AND record_id = $2 AND proposal_version = $3 AND state IN ('queued', 'applying')
    RETURNING 'applying'::text AS state)
SELECT coalesce((SELECT state FROM moved),
    (SELECT state FROM registrum.request_auto_applications WHERE entity_id = $1 AND record_id = $2 AND proposal_version = $3), '')`,
		entity, recordID, version).Scan(&state)
	if err != nil {
		return "", fmt.Errorf("store: start automatic application: %w", err)
	}
	return state, nil
}

// BlockAutoApplication records that the automatic application of the
// proposal was refused: it is blocked until an operator acts, with the
// reason code attention.
func (s *Store) BlockAutoApplication(ctx context.Context, entity, recordID string, version int64, attention string) (err error) {
	ctx, span := startOp(ctx, spanTx, "BlockAutoApplication")
	defer func() { endOp(span, err) }()
	_, err = s.pool.Exec(ctx, `UPDATE registrum.request_auto_applications SET state = 'blocked', attention = $4, updated_at = now()
    WHERE entity_id = $1 AND record_id = $2 AND proposal_version = $3`, entity, recordID, version, attention)
	if err != nil {
		return fmt.Errorf("store: block automatic application: %w", err)
	}
	return nil
}

// Revision kinds of a replaced proposal (request_proposals.revised_as).
const (
	// RevisedAsRevision: revise_request with rebase false.
	RevisedAsRevision = "revision"
	// RevisedAsRebase: revise_request with rebase true.
	RevisedAsRebase = "rebase"
)

// MarkRevised records on the submitted proposal version of request id how
// revise_request replaced it (RevisedAsRevision or RevisedAsRebase), in the
// revise's transaction.
func (w *Writer) MarkRevised(ctx context.Context, e *model.Entity, id string, version int64, as string) error {
	w.send(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return ErrNotFound
		}
		return nil
	}, func(err error) error { return fmt.Errorf("store: record revision: %w", err) },
		`UPDATE registrum.request_proposals SET revised_as = $4, revised_at = $5 WHERE entity_id = $1 AND record_id = $2 AND proposal_version = $3`,
		e.ID, id, version, as, w.now)
	return nil
}
