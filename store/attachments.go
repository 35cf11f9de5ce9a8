package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/registrum/registrum/model"
)

// Verification statuses of a filled slot.
const (
	VerificationNotRequired = "notRequired"
	VerificationPending     = "pending"
	VerificationApproved    = "approved"
	VerificationRejected    = "rejected"
)

// Attachment is one filled slot of one proposal version of a request.
type Attachment struct {
	SlotID          string
	ProposalVersion int64
	SHA256          string
	Size            int64
	// ContentType, UploadedAt and UploadedBy are cleared by erasure.
	ContentType string
	UploadedAt  time.Time
	UploadedBy  string
	// PolicyDigest is the verification policy the content is checked under,
	// "" when the slot has no verification.
	PolicyDigest string
	Erased       bool
	// Status is notRequired, pending, approved or rejected ("" once erased).
	Status string
}

// Downloadable reports whether the content may be handed out: present and
// not quarantined.
func (a *Attachment) Downloadable() bool {
	return !a.Erased && (a.Status == VerificationNotRequired || a.Status == VerificationApproved)
}

const attachmentSelect = `a.slot_id, a.proposal_version, a.sha256, a.byte_size, coalesce(a.content_type, ''), a.uploaded_at,
    coalesce(a.uploaded_by, ''), coalesce(a.policy_digest, ''), a.erased_at IS NOT NULL, coalesce(v.verdict, '')
FROM registrum.request_attachments a
LEFT JOIN registrum.attachment_verifications v ON v.sha256 = a.sha256 AND v.content_type = a.content_type AND v.policy_digest = a.policy_digest`

const attachmentColumns = attachmentSelect + `
WHERE a.entity_id = $1 AND a.record_id = $2 AND a.proposal_version = $3`

func scanAttachments(rows pgx.Rows) ([]Attachment, error) {
	out, _, err := scanAttachmentsOf(rows, false)
	return out, err
}

// scanAttachmentsOf scans slot rows, each led by its record id when
// withRecord is set (then the second result maps record ids to their slots).
func scanAttachmentsOf(rows pgx.Rows, withRecord bool) ([]Attachment, map[string][]Attachment, error) {
	defer rows.Close()
	var out []Attachment
	byRecord := map[string][]Attachment{}
	for rows.Next() {
		var a Attachment
		var at *time.Time
		var verdict, record string
		dest := []any{&a.SlotID, &a.ProposalVersion, &a.SHA256, &a.Size, &a.ContentType, &at, &a.UploadedBy, &a.PolicyDigest, &a.Erased, &verdict}
		if withRecord {
			dest = append([]any{&record}, dest...)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, fmt.Errorf("store: read attachments: %w", err)
		}
		if at != nil {
			a.UploadedAt = at.UTC()
		}
		switch {
		case a.Erased:
		case a.PolicyDigest == "":
			a.Status = VerificationNotRequired
		case verdict == "":
			a.Status = VerificationPending
		default:
			a.Status = verdict
		}
		if withRecord {
			byRecord[record] = append(byRecord[record], a)
		} else {
			out = append(out, a)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("store: read attachments: %w", err)
	}
	return out, byRecord, nil
}

// CurrentAttachments returns the filled slots of the current proposal
// version of each request record in ids, by record id, in one query.
func (s *Store) CurrentAttachments(ctx context.Context, e *model.Entity, ids []string) (_ map[string][]Attachment, err error) {
	ctx, span := startOp(ctx, spanRead, "CurrentAttachments")
	defer func() { endOp(span, err) }()
	rows, err := s.pool.Query(ctx, `SELECT a.record_id::text, `+attachmentSelect+`
JOIN registrum.requests r ON r.entity_id = a.entity_id AND r.record_id = a.record_id AND r.proposal_version = a.proposal_version
WHERE a.entity_id = $1 AND a.record_id = ANY($2::uuid[]) ORDER BY a.record_id, a.slot_id`, e.ID, ids)
	if err != nil {
		return nil, fmt.Errorf("store: read attachments: %w", err)
	}
	_, by, err := scanAttachmentsOf(rows, true)
	return by, err
}

type rowsQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func attachments(ctx context.Context, db rowsQuerier, entity, id string, version int64) ([]Attachment, error) {
	rows, err := db.Query(ctx, "SELECT "+attachmentColumns+" ORDER BY a.slot_id", entity, id, version)
	if err != nil {
		return nil, fmt.Errorf("store: read attachments: %w", err)
	}
	return scanAttachments(rows)
}

// Attachments returns the filled slots of one proposal version of a request.
func (s *Store) Attachments(ctx context.Context, e *model.Entity, id string, version int64) (_ []Attachment, err error) {
	ctx, span := startOp(ctx, spanRead, "Attachments")
	defer func() { endOp(span, err) }()
	return attachments(ctx, s.pool, e.ID, id, version)
}

// Attachments returns the filled slots of one proposal version of a
// request, in the write's transaction.
func (w *Writer) Attachments(ctx context.Context, e *model.Entity, id string, version int64) ([]Attachment, error) {
	return w.attachments(ctx, e.ID, id, version)
}

// attachments reads slot rows after the queued statements have run.
func (w *Writer) attachments(ctx context.Context, entity, id string, version int64) ([]Attachment, error) {
	tx, err := w.direct(ctx)
	if err != nil {
		return nil, err
	}
	return attachments(ctx, tx, entity, id, version)
}

// exec runs a statement at once, after the queued ones.
func (w *Writer) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tx, err := w.direct(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return tx.Exec(ctx, sql, args...)
}

// PutAttachment fills (or refills) a slot of a proposal version with stored
// content. The content row is share-locked so an erasure cannot remove it
// under the new reference; ErrContentMissing when it is gone.
func (w *Writer) PutAttachment(ctx context.Context, e *model.Entity, id string, a *Attachment) error {
	var one int
	err := w.queryRow(ctx, `SELECT 1 FROM registrum.attachment_blobs WHERE sha256 = $1 FOR SHARE`, a.SHA256).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrContentMissing
	}
	if err != nil {
		return fmt.Errorf("store: fill slot: %w", err)
	}
	a.UploadedAt = w.now
	_, err = w.exec(ctx, `INSERT INTO registrum.request_attachments
    (entity_id, record_id, proposal_version, slot_id, sha256, byte_size, content_type, uploaded_at, uploaded_by, policy_digest)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, nullif($10, ''))
    ON CONFLICT (entity_id, record_id, proposal_version, slot_id) DO UPDATE SET
      sha256 = excluded.sha256, byte_size = excluded.byte_size, content_type = excluded.content_type, uploaded_at = excluded.uploaded_at,
      uploaded_by = excluded.uploaded_by, policy_digest = excluded.policy_digest, erased_at = NULL`,
		e.ID, id, a.ProposalVersion, a.SlotID, a.SHA256, a.Size, a.ContentType, w.now, a.UploadedBy, a.PolicyDigest)
	if err != nil {
		return fmt.Errorf("store: fill slot: %w", err)
	}
	return nil
}

// RemoveAttachment empties a slot of a proposal version; false when it was empty.
func (w *Writer) RemoveAttachment(ctx context.Context, e *model.Entity, id string, version int64, slot string) (bool, error) {
	tag, err := w.exec(ctx, `DELETE FROM registrum.request_attachments WHERE entity_id = $1 AND record_id = $2 AND proposal_version = $3 AND slot_id = $4`,
		e.ID, id, version, slot)
	if err != nil {
		return false, fmt.Errorf("store: empty slot: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// CarryAttachments copies the slots of proposal version from into version
// to: a revised draft starts with the slots of the proposal it revises.
func (w *Writer) CarryAttachments(ctx context.Context, e *model.Entity, id string, from, to int64) error {
	_, err := w.exec(ctx, `INSERT INTO registrum.request_attachments
    (entity_id, record_id, proposal_version, slot_id, sha256, byte_size, content_type, uploaded_at, uploaded_by, policy_digest, erased_at)
    SELECT entity_id, record_id, $4, slot_id, sha256, byte_size, content_type, uploaded_at, uploaded_by, policy_digest, erased_at
    FROM registrum.request_attachments WHERE entity_id = $1 AND record_id = $2 AND proposal_version = $3`, e.ID, id, from, to)
	if err != nil {
		return fmt.Errorf("store: carry slots: %w", err)
	}
	return nil
}

// VerificationKey names one verdict: the exact content, media type and
// verification policy.
type VerificationKey struct {
	SHA256       string `json:"sha256"`
	ContentType  string `json:"contentType"`
	PolicyDigest string `json:"policyDigest"`
}

// KindVerifyAttachment is the job kind of attachment verification.
const KindVerifyAttachment = "registrum.attachment.verify"

// VerifyAttachmentArgs verifies one pending verdict.
type VerifyAttachmentArgs struct{ VerificationKey }

// Kind implements river.JobArgs.
func (VerifyAttachmentArgs) Kind() string { return KindVerifyAttachment }

// verifyOpts: verification jobs are not unique. A second job for one
// verdict is harmless (the lease lets one worker at a time claim it, and a
// settled verdict ends the others), and a verdict that is pending again
// (its content erased, then uploaded anew) must get a job even when an
// earlier one completed.
var verifyOpts *river.InsertOpts

// RequestVerification makes sure a verdict exists for k: an existing one
// (approved, rejected or pending) is reused; otherwise a pending one is
// created and its verification job enqueued with the write. It returns the
// verdict's status.
func (w *Writer) RequestVerification(ctx context.Context, k VerificationKey, verifier, entity, slot string, size int64) (string, error) {
	tag, err := w.exec(ctx, `INSERT INTO registrum.attachment_verifications
    (sha256, content_type, policy_digest, verifier, entity_id, slot_id, byte_size, verdict, created_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8) ON CONFLICT DO NOTHING`,
		k.SHA256, k.ContentType, k.PolicyDigest, verifier, entity, slot, size, w.now)
	if err != nil {
		return "", fmt.Errorf("store: request verification: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return VerificationPending, w.Enqueue(ctx, VerifyAttachmentArgs{k}, verifyOpts)
	}
	var verdict string
	if err := w.queryRow(ctx, `SELECT verdict FROM registrum.attachment_verifications WHERE sha256 = $1 AND content_type = $2 AND policy_digest = $3`,
		k.SHA256, k.ContentType, k.PolicyDigest).Scan(&verdict); err != nil {
		return "", fmt.Errorf("store: request verification: %w", err)
	}
	if verdict == VerificationPending {
		// Another upload waits for the same verdict: one more job costs
		// little and revives a verdict whose jobs ran out of attempts.
		return verdict, w.Enqueue(ctx, VerifyAttachmentArgs{k}, verifyOpts)
	}
	return verdict, nil
}

// Verification is a pending verdict claimed by a worker.
type Verification struct {
	VerificationKey
	Verifier, EntityID, SlotID string
	Size                       int64
	// LeaseID is the worker's lease; the verdict commits only under it.
	LeaseID  string
	Attempts int
}

// ErrLeaseHeld means another worker holds the verdict's lease; RetryAt says
// when it expires.
type ErrLeaseHeld struct{ RetryAt time.Time }

func (e *ErrLeaseHeld) Error() string { return "store: the verification is leased by another worker" }

// ClaimVerification takes a durable lease of lease on a pending verdict
// and records the attempt in the audit trail, in one committed transaction.
// It returns nil when the verdict is no longer pending (nothing to do) and
// *ErrLeaseHeld while another worker's lease runs.
func (s *Store) ClaimVerification(ctx context.Context, k VerificationKey, lease time.Duration, traceID string) (_ *Verification, err error) {
	ctx, span := startOp(ctx, spanTx, "ClaimVerification")
	defer func() { endOp(span, err) }()
	var v *Verification
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var verdict string
		var expires *time.Time
		x := &Verification{VerificationKey: k}
		err := tx.QueryRow(ctx, `SELECT verdict, lease_expires_at, verifier, entity_id, slot_id, byte_size, attempts FROM registrum.attachment_verifications
    WHERE sha256 = $1 AND content_type = $2 AND policy_digest = $3 FOR UPDATE`, k.SHA256, k.ContentType, k.PolicyDigest).
			Scan(&verdict, &expires, &x.Verifier, &x.EntityID, &x.SlotID, &x.Size, &x.Attempts)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if verdict != VerificationPending {
			return nil
		}
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return err
		}
		if expires != nil && expires.After(now) {
			return &ErrLeaseHeld{RetryAt: *expires}
		}
		x.LeaseID = uuid.NewString()
		x.Attempts++
		if _, err := tx.Exec(ctx, `UPDATE registrum.attachment_verifications SET lease_id = $4, lease_expires_at = now() + $5::interval, attempts = $6
    WHERE sha256 = $1 AND content_type = $2 AND policy_digest = $3`, k.SHA256, k.ContentType, k.PolicyDigest, x.LeaseID,
			fmt.Sprintf("%d milliseconds", lease.Milliseconds()), x.Attempts); err != nil {
			return err
		}
		if err := verificationAudit(ctx, tx, x.EntityID, "attachment.verify", "attempt", traceID); err != nil {
			return err
		}
		v = x
		return nil
	})
	var held *ErrLeaseHeld
	if errors.As(err, &held) {
		return nil, held
	}
	if err != nil {
		return nil, fmt.Errorf("store: claim verification: %w", err)
	}
	return v, nil
}

// ReleaseVerification gives a lease back without a verdict (the verifier
// failed; the job retries later). A lease that was lost is left alone.
func (s *Store) ReleaseVerification(ctx context.Context, v *Verification, traceID string) (err error) {
	ctx, span := startOp(ctx, spanTx, "ReleaseVerification")
	defer func() { endOp(span, err) }()
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE registrum.attachment_verifications SET lease_id = NULL, lease_expires_at = NULL
    WHERE sha256 = $1 AND content_type = $2 AND policy_digest = $3 AND lease_id = $4`, v.SHA256, v.ContentType, v.PolicyDigest, v.LeaseID)
		if err != nil {
			return fmt.Errorf("store: release verification: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		return verificationAudit(ctx, tx, v.EntityID, "attachment.verify", "retry", traceID)
	})
}

// SettleVerification commits a verdict under the worker's lease, with its
// audit entry. A verdict that lost its lease, or whose content was erased
// meanwhile, is discarded: it returns false and writes only the audit of
// the discarded verdict.
func (s *Store) SettleVerification(ctx context.Context, v *Verification, verdict, traceID string) (_ bool, err error) {
	ctx, span := startOp(ctx, spanTx, "SettleVerification")
	defer func() { endOp(span, err) }()
	if verdict != VerificationApproved && verdict != VerificationRejected {
		return false, fmt.Errorf("store: settle verification: %q is not a verdict", verdict)
	}
	settled := false
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE registrum.attachment_verifications SET verdict = $5, decided_at = now(), lease_id = NULL, lease_expires_at = NULL
    WHERE sha256 = $1 AND content_type = $2 AND policy_digest = $3 AND lease_id = $4 AND verdict = 'pending'
      AND EXISTS (SELECT 1 FROM registrum.attachment_blobs b WHERE b.sha256 = $1)`,
			v.SHA256, v.ContentType, v.PolicyDigest, v.LeaseID, verdict)
		if err != nil {
			return err
		}
		settled = tag.RowsAffected() == 1
		outcome := verdict
		if !settled {
			outcome = "discarded"
			if err := dropOrphanVerification(ctx, tx, v.VerificationKey); err != nil {
				return err
			}
		}
		return verificationAudit(ctx, tx, v.EntityID, "attachment.verify", outcome, traceID)
	})
	if err != nil {
		return false, fmt.Errorf("store: settle verification: %w", err)
	}
	return settled, nil
}

// Verdict returns the status of the verdict for k ("" when there is none).
func (s *Store) Verdict(ctx context.Context, k VerificationKey) (_ string, err error) {
	ctx, span := startOp(ctx, spanRead, "Verdict")
	defer func() { endOp(span, err) }()
	var verdict string
	err = s.pool.QueryRow(ctx, `SELECT verdict FROM registrum.attachment_verifications WHERE sha256 = $1 AND content_type = $2 AND policy_digest = $3`,
		k.SHA256, k.ContentType, k.PolicyDigest).Scan(&verdict)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: read verdict: %w", err)
	}
	return verdict, nil
}

func verificationAudit(ctx context.Context, tx pgx.Tx, entity, operation, outcome, traceID string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO registrum.audit (operation, outcome, entity_id, trace_id) VALUES ($1, $2, $3, $4)`,
		operation, outcome, entity, traceID); err != nil {
		return fmt.Errorf("store: audit %s: %w", operation, err)
	}
	return nil
}

// ErasedAttachment reports what EraseAttachment did.
type ErasedAttachment struct {
	// Slots is the number of slot rows (proposal versions) erased.
	Slots int
	// ContentDeleted is true when the bytes themselves were deleted (no
	// other live attachment holds the same content).
	ContentDeleted bool
}

// EraseAttachment erases the content of one slot of a request, in every
// proposal version that holds it: the slot rows keep slot id, proposal
// version, size and hash and lose content type, uploader and upload time;
// the bytes are deleted once no live attachment refers to them; an audit
// entry records the erasure. ErrNotFound when the slot holds nothing live.
// It connects to the database directly: there is no HTTP route for it.
func EraseAttachment(ctx context.Context, pool *pgxpool.Pool, entity, id, slot, traceID string) (*ErasedAttachment, error) {
	out := &ErasedAttachment{}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE registrum.request_attachments SET erased_at = now(), content_type = NULL, uploaded_at = NULL, uploaded_by = NULL
    WHERE entity_id = $1 AND record_id = $2 AND slot_id = $3 AND erased_at IS NULL RETURNING sha256`, entity, id, slot)
		if err != nil {
			return err
		}
		hashes := map[string]bool{}
		for rows.Next() {
			var h string
			if err := rows.Scan(&h); err != nil {
				rows.Close()
				return err
			}
			hashes[h] = true
			out.Slots++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if out.Slots == 0 {
			return ErrNotFound
		}
		for h := range hashes {
			// Lock the content first: an upload referring to it holds a
			// share lock until it commits, and the check below then sees it.
			var blob int64
			err := tx.QueryRow(ctx, `SELECT blob_id FROM registrum.attachment_blobs WHERE sha256 = $1 FOR UPDATE`, h).Scan(&blob)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			var live bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM registrum.request_attachments WHERE sha256 = $1 AND erased_at IS NULL)`, h).Scan(&live); err != nil {
				return err
			}
			if live {
				continue
			}
			if _, err := tx.Exec(ctx, `DELETE FROM registrum.attachment_blobs WHERE blob_id = $1`, blob); err != nil {
				return err
			}
			out.ContentDeleted = true
		}
		return verificationAudit(ctx, tx, entity, "attachment.erase", "succeeded", traceID)
	})
	if errors.Is(err, ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: erase attachment: %w", err)
	}
	return out, nil
}

// SweepContent deletes kept content that no slot refers to and that is
// older than age: what uploads left behind when their write was refused
// after the bytes were stored. It returns the number of contents deleted.
func SweepContent(ctx context.Context, pool *pgxpool.Pool, age time.Duration, traceID string) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Lock the candidates first (skipping those an upload holds), then
		// delete the ones still unreferenced in a statement that sees every
		// reference committed before the locks were taken.
		var ids []int64
		rows, err := tx.Query(ctx, `SELECT blob_id FROM registrum.attachment_blobs WHERE sha256 IS NOT NULL AND created_at < now() - $1::interval
    FOR UPDATE SKIP LOCKED`, fmt.Sprintf("%d seconds", int64(age.Seconds())))
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM registrum.attachment_blobs b WHERE b.blob_id = ANY($1)
    AND NOT EXISTS (SELECT 1 FROM registrum.request_attachments a WHERE a.sha256 = b.sha256 AND a.erased_at IS NULL)`, ids)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		return verificationAudit(ctx, tx, "", "attachment.sweep", fmt.Sprintf("deleted %d", n), traceID)
	})
	if err != nil {
		return 0, fmt.Errorf("store: sweep attachment content: %w", err)
	}
	return n, nil
}

// dropOrphanVerification deletes a pending verdict whose content is gone:
// a later upload of the same bytes starts a fresh one with its own job.
func dropOrphanVerification(ctx context.Context, tx pgx.Tx, k VerificationKey) error {
	_, err := tx.Exec(ctx, `DELETE FROM registrum.attachment_verifications
    WHERE sha256 = $1 AND content_type = $2 AND policy_digest = $3 AND verdict = 'pending'
      AND NOT EXISTS (SELECT 1 FROM registrum.attachment_blobs b WHERE b.sha256 = $1)`, k.SHA256, k.ContentType, k.PolicyDigest)
	return err
}

// DropOrphanVerification deletes the pending verdict of k when its content
// is gone (erased before it could be verified).
func (s *Store) DropOrphanVerification(ctx context.Context, k VerificationKey) (err error) {
	ctx, span := startOp(ctx, spanTx, "DropOrphanVerification")
	defer func() { endOp(span, err) }()
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return dropOrphanVerification(ctx, tx, k) })
}
