package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/model"
)

// Submission states (review.submission.state).
const (
	SubmissionPending   = "pending"
	SubmissionAccepted  = "accepted"
	SubmissionUncertain = "uncertain"
	SubmissionFailed    = "failed"
	// SubmissionCancelling: the request was cancelled while its proposal
	// was under review; the authority is being told.
	SubmissionCancelling = "cancelling"
	// SubmissionCancelled: the authority was told, or never held it.
	SubmissionCancelled = "cancelled"
)

// Delivery states of a submission's result (review.delivery.state).
const (
	DeliveryPolling   = "polling"
	DeliveryReceived  = "received"
	DeliveryUnmatched = "unmatched"
	DeliveryExhausted = "exhausted"
)

// Submission is what was, or will be, sent to a review authority for one
// proposal.
type Submission struct {
	// Entity, RecordID and ProposalVersion name the proposal.
	Entity, RecordID    string
	ProposalVersion     int64
	Authority, PolicyID string
	State               string
	// Body is the exact body sent; SubmissionDigest the SHA-256 of its
	// canonical form.
	Body             []byte
	SubmissionDigest string
	// Known once accepted.
	AuthorityRequestID, PolicyVersion, PolicyDigest string
	DeliveryState                                   string
	Attempts                                        int
	RecoveryDeadline                                time.Time
	// Attention is set when the request needs an operator.
	Attention string
}

// ReviewResult is a result the authority settled for one proposal.
type ReviewResult struct {
	ResultID       string
	Status         string
	CompletedAt    time.Time
	AvailableUntil *time.Time
	// Stage is the review stage the authority reported with the result,
	// "" when it reported none.
	Stage string
	// Body is the result document as the authority sent it.
	Body []byte
	// ReceivedAt is when the host stored the result (the database clock).
	ReceivedAt time.Time
}

// InsertSubmission records a submission to send, in the submit transaction.
func (w *Writer) InsertSubmission(ctx context.Context, s *Submission) error {
	w.send(nil, func(err error) error { return fmt.Errorf("store: record submission: %w", err) }, `INSERT INTO registrum.review_submissions
    (entity_id, record_id, proposal_version, authority, policy_id, state, body, submission_digest, recovery_deadline, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $8, $9, $9)`,
		s.Entity, s.RecordID, s.ProposalVersion, s.Authority, s.PolicyID, string(s.Body), s.SubmissionDigest, s.RecoveryDeadline, w.now)
	return nil
}

const submissionColumns = `entity_id, record_id::text, proposal_version, authority, policy_id, state, body, submission_digest,
    coalesce(request_id, ''), coalesce(policy_version, ''), coalesce(policy_digest, ''), delivery_state, attempts, recovery_deadline, coalesce(attention, '')`

func scanSubmission(row pgx.Row) (*Submission, error) {
	s := &Submission{}
	err := row.Scan(&s.Entity, &s.RecordID, &s.ProposalVersion, &s.Authority, &s.PolicyID, &s.State, &s.Body, &s.SubmissionDigest,
		&s.AuthorityRequestID, &s.PolicyVersion, &s.PolicyDigest, &s.DeliveryState, &s.Attempts, &s.RecoveryDeadline, &s.Attention)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: read submission: %w", err)
	}
	s.RecoveryDeadline = s.RecoveryDeadline.UTC()
	return s, nil
}

// Submission reads the submission of one proposal.
func (s *Store) Submission(ctx context.Context, entity, recordID string, version int64) (_ *Submission, err error) {
	ctx, span := startOp(ctx, spanRead, "Submission")
	defer func() { endOp(span, err) }()
	return scanSubmission(s.pool.QueryRow(ctx, "SELECT "+submissionColumns+` FROM registrum.review_submissions
    WHERE entity_id = $1 AND record_id = $2 AND proposal_version = $3`, entity, recordID, version))
}

// UpdateSubmission records the outcome of a send, or of a poll: its state,
// the authority's binding once accepted, the delivery state, and whether
// an operator is needed; every call counts an attempt. A withdrawn
// submission keeps its withdrawal: an acceptance recorded after it makes
// it cancelling again (the authority now holds a request to cancel), and
// sub.State is set to the state stored.
func (s *Store) UpdateSubmission(ctx context.Context, sub *Submission) (err error) {
	ctx, span := startOp(ctx, spanTx, "UpdateSubmission")
	defer func() { endOp(span, err) }()
	err = s.pool.QueryRow(ctx, `UPDATE registrum.review_submissions SET
    state = CASE WHEN state IN ('cancelling', 'cancelled') THEN
        CASE WHEN $4 = 'accepted' THEN 'cancelling' ELSE state END
      ELSE $4 END,
    request_id = nullif($5, ''),
    policy_version = nullif($6, ''), policy_digest = nullif($7, ''), delivery_state = $8, attention = nullif($9, ''),
    attempts = attempts + 1, updated_at = now()
    WHERE entity_id = $1 AND record_id = $2 AND proposal_version = $3 RETURNING state`,
		sub.Entity, sub.RecordID, sub.ProposalVersion, sub.State, sub.AuthorityRequestID, sub.PolicyVersion, sub.PolicyDigest, sub.DeliveryState, sub.Attention).Scan(&sub.State)
	if err != nil {
		return fmt.Errorf("store: update submission: %w", err)
	}
	return nil
}

// WithdrawSubmission marks the submission of a proposal cancelling, in the
// transaction that cancels its request, when the authority may hold it
// and has settled no result; it reports whether it did (the caller then
// enqueues the job that tells the authority).
func (w *Writer) WithdrawSubmission(ctx context.Context, entity, recordID string, version int64) (bool, error) {
	var n int
	err := w.queryRow(ctx, `WITH moved AS (
    UPDATE registrum.review_submissions s SET state = 'cancelling', updated_at = now()
    WHERE s.entity_id = $1 AND s.record_id = $2 AND s.proposal_version = $3 AND s.state IN ('pending', 'accepted', 'uncertain')
      AND NOT EXISTS (SELECT 1 FROM registrum.review_results x
        WHERE x.entity_id = s.entity_id AND x.record_id = s.record_id AND x.proposal_version = s.proposal_version)
    RETURNING 1)
    SELECT count(*) FROM moved`, entity, recordID, version).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("store: withdraw submission: %w", err)
	}
	return n == 1, nil
}

// SubmissionWithdrawn records that the authority no longer holds a
// withdrawn submission: cancelling becomes cancelled.
func (s *Store) SubmissionWithdrawn(ctx context.Context, entity, recordID string, version int64) (err error) {
	ctx, span := startOp(ctx, spanTx, "SubmissionWithdrawn")
	defer func() { endOp(span, err) }()
	_, err = s.pool.Exec(ctx, `UPDATE registrum.review_submissions SET state = 'cancelled', attempts = attempts + 1, updated_at = now()
    WHERE entity_id = $1 AND record_id = $2 AND proposal_version = $3 AND state = 'cancelling'`, entity, recordID, version)
	if err != nil {
		return fmt.Errorf("store: record withdrawal: %w", err)
	}
	return nil
}

// sqlStoreResult keeps a proposal's result once ($1 entity id, $2 record
// id, $3 proposal version, $4 result id, $5 status, $6 completed at, $7
// available until, $8 body, $9 the stage, empty for none): a result already stored is
// kept (the authority's result is final).
const sqlStoreResult = `INSERT INTO registrum.review_results
    (entity_id, record_id, proposal_version, result_id, status, completed_at, available_until, body, stage, received_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, nullif($9, ''), now()) ON CONFLICT DO NOTHING`

// sqlResultReceived marks a submission's result delivered.
const sqlResultReceived = `UPDATE registrum.review_submissions SET delivery_state = 'received', updated_at = now()
    WHERE entity_id = $1 AND record_id = $2 AND proposal_version = $3`

// StoreResult keeps the result the authority settled for a proposal, once,
// in the write's transaction: a result already stored is kept (the
// authority's result is final), and the submission's delivery becomes
// received. It reports whether this call stored it.
func (w *Writer) StoreResult(ctx context.Context, entity, recordID string, version int64, r *ReviewResult) (bool, error) {
	tag, err := w.exec(ctx, sqlStoreResult, entity, recordID, version, r.ResultID, r.Status, r.CompletedAt, r.AvailableUntil, string(r.Body), r.Stage)
	if err != nil {
		return false, fmt.Errorf("store: store review result: %w", err)
	}
	if _, err := w.exec(ctx, sqlResultReceived, entity, recordID, version); err != nil {
		return false, fmt.Errorf("store: store review result: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// review reads the submission and result of a request's current proposal,
// in one statement (so a read never sees a result without the delivery
// state stored with it); a request entity reviewed by nobody has neither.
func (s *Store) review(ctx context.Context, db querier, e *model.Entity, r *Request) error {
	if e.ChangeRequest == nil || e.ChangeRequest.Review.Mode != model.ReviewAuthority || r.State == RequestDraft {
		return nil
	}
	sub := &Submission{}
	var (
		resultID, status    *string
		completed, received *time.Time
		until               *time.Time
		body                []byte
		stage               *string
	)
	err := db.QueryRow(ctx, `SELECT s.entity_id, s.record_id::text, s.proposal_version, s.authority, s.policy_id, s.state, s.body, s.submission_digest,
    coalesce(s.request_id, ''), coalesce(s.policy_version, ''), coalesce(s.policy_digest, ''), s.delivery_state, s.attempts, s.recovery_deadline, coalesce(s.attention, ''),
    x.result_id, x.status, x.completed_at, x.available_until, x.body, x.received_at, x.stage
    FROM registrum.review_submissions s
    LEFT JOIN registrum.review_results x ON x.entity_id = s.entity_id AND x.record_id = s.record_id AND x.proposal_version = s.proposal_version
    WHERE s.entity_id = $1 AND s.record_id = $2 AND s.proposal_version = $3`, r.EntityID, r.RecordID, r.ProposalVersion).
		Scan(&sub.Entity, &sub.RecordID, &sub.ProposalVersion, &sub.Authority, &sub.PolicyID, &sub.State, &sub.Body, &sub.SubmissionDigest,
			&sub.AuthorityRequestID, &sub.PolicyVersion, &sub.PolicyDigest, &sub.DeliveryState, &sub.Attempts, &sub.RecoveryDeadline, &sub.Attention,
			&resultID, &status, &completed, &until, &body, &received, &stage)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: read submission: %w", err)
	}
	sub.RecoveryDeadline = sub.RecoveryDeadline.UTC()
	r.Submission = sub
	if resultID == nil {
		return nil
	}
	res := &ReviewResult{ResultID: *resultID, Status: *status, CompletedAt: completed.UTC(), Body: body, ReceivedAt: received.UTC()}
	if until != nil {
		t := until.UTC()
		res.AvailableUntil = &t
	}
	if stage != nil {
		res.Stage = *stage
	}
	r.Result = res
	return nil
}
