package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/querysql"
)

// Bounds of one page of a request's history (docs/decisions/request-history.md).
const (
	// HistoryPageProposals is the most proposals one history page holds.
	HistoryPageProposals = 50
	// HistoryPageBytes is the byte budget of one history page: the sum of
	// the frozen writes' JSON text of its proposals. A page always holds
	// at least one whole proposal, so a single larger proposal is a page of
	// its own; proposals are never cut.
	HistoryPageBytes = 256 << 10
)

// RequestHistory is one page of the retained proposals of a request, in
// ascending proposal version.
type RequestHistory struct {
	Items []HistoryItem
	// NextAfter is the proposal version the next page continues after, nil
	// on the last page.
	NextAfter *int64
}

// HistoryItem is one retained proposal.
type HistoryItem struct {
	ProposalVersion int64
	EffectDigest    string
	// Planner is the planner kind; ModuleDigest the pinned digest of a
	// plugin planner ("" for declarative).
	Planner, ModuleDigest string
	SubmittedAt           time.Time
	// Writes is the JSON array of the frozen plan's writes, nil after the
	// detail was erased.
	Writes       []byte
	DetailErased bool
	// Outcome is the review outcome of the proposal when one is known (see
	// ReviewOutcomeSQL), "" otherwise.
	Outcome string
	// RevisedAs is how revise_request replaced the proposal
	// (RevisedAsRevision or RevisedAsRebase), "" while it was not revised;
	// RevisedAt is when.
	RevisedAs string
	RevisedAt *time.Time
}

// proposalOutcome is the SQL expression of a proposal's known review
// outcome, over the proposal p and its review result rr: the result's
// status, approved past its availableUntil (by the database clock) as
// approvedExpired, approved without a result under review mode none, null
// when no result is known.
func proposalOutcome(e *model.Entity) string {
	none := "NULL"
	if e.ChangeRequest != nil && e.ChangeRequest.Review.Mode == model.ReviewNone {
		none = "'approved'"
	}
	return "CASE WHEN rr.status IS NULL THEN " + none +
		" WHEN rr.status = 'approved' AND rr.available_until <= now() THEN 'approvedExpired' ELSE rr.status END"
}

// RequestHistory reads the page of the retained proposals of request id of e
// that follows proposal version after (0: the first page): at most
// HistoryPageProposals whole proposals within HistoryPageBytes, in one
// snapshot.
func (s *Store) RequestHistory(ctx context.Context, e *model.Entity, id string, after int64) (_ *RequestHistory, err error) {
	ctx, span := startOp(ctx, spanRead, "RequestHistory")
	defer func() { endOp(span, err) }()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("store: read request history: %w", err)
	}
	defer tx.Rollback(ctx)
	return requestHistory(ctx, tx, e, id, after)
}

// RequestHistory reads the page of the history of request id of e, as
// Store.RequestHistory does, in w's own transaction (after the statements
// queued so far): a write that renders a request never asks the pool for a
// second connection while it holds one. The request's workflow row is
// locked by the write, so its proposals cannot change between the two reads.
func (w *Writer) RequestHistory(ctx context.Context, e *model.Entity, id string, after int64) (*RequestHistory, error) {
	tx, err := w.direct(ctx)
	if err != nil {
		return nil, err
	}
	return requestHistory(ctx, tx, e, id, after)
}

// requestHistory reads a page of a request's history through tx.
func requestHistory(ctx context.Context, tx pgx.Tx, e *model.Entity, id string, after int64) (*RequestHistory, error) {
	rows, err := tx.Query(ctx, `SELECT p.proposal_version, p.effect_digest, p.planner, coalesce(p.module_digest, ''), p.submitted_at,
    p.detail_erased_at IS NOT NULL, coalesce(octet_length((p.plan->'writes')::text), 0), coalesce(`+proposalOutcome(e)+`, ''),
    coalesce(p.revised_as, ''), p.revised_at
FROM registrum.request_proposals p
LEFT JOIN registrum.review_results rr ON rr.entity_id = p.entity_id AND rr.record_id = p.record_id AND rr.proposal_version = p.proposal_version
WHERE p.entity_id = $1 AND p.record_id = $2 AND p.proposal_version > $3
ORDER BY p.proposal_version LIMIT $4`, e.ID, id, after, HistoryPageProposals+1)
	if err != nil {
		return nil, fmt.Errorf("store: read request history: %w", err)
	}
	h := &RequestHistory{}
	var spent int64
	more := false
	for rows.Next() {
		var it HistoryItem
		var size int64
		if err := rows.Scan(&it.ProposalVersion, &it.EffectDigest, &it.Planner, &it.ModuleDigest, &it.SubmittedAt, &it.DetailErased, &size, &it.Outcome, &it.RevisedAs, &it.RevisedAt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: read request history: %w", err)
		}
		if len(h.Items) == HistoryPageProposals || (len(h.Items) > 0 && spent+size > HistoryPageBytes) {
			more = true
			break
		}
		spent += size
		it.SubmittedAt = it.SubmittedAt.UTC()
		if it.RevisedAt != nil {
			t := it.RevisedAt.UTC()
			it.RevisedAt = &t
		}
		h.Items = append(h.Items, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read request history: %w", err)
	}
	if len(h.Items) == 0 {
		return h, nil
	}
	last := h.Items[len(h.Items)-1].ProposalVersion
	if more {
		h.NextAfter = &last
	}
	plans, err := tx.Query(ctx, `SELECT proposal_version, p.plan->'writes' FROM registrum.request_proposals p
WHERE entity_id = $1 AND record_id = $2 AND proposal_version > $3 AND proposal_version <= $4 AND plan IS NOT NULL`, e.ID, id, after, last)
	if err != nil {
		return nil, fmt.Errorf("store: read request history plans: %w", err)
	}
	defer plans.Close()
	byVersion := make(map[int64]int, len(h.Items))
	for i, it := range h.Items {
		byVersion[it.ProposalVersion] = i
	}
	for plans.Next() {
		var v int64
		var writes []byte
		if err := plans.Scan(&v, &writes); err != nil {
			return nil, fmt.Errorf("store: read request history plans: %w", err)
		}
		if i, ok := byVersion[v]; ok && !h.Items[i].DetailErased {
			h.Items[i].Writes = writes
		}
	}
	if err := plans.Err(); err != nil {
		return nil, fmt.Errorf("store: read request history plans: %w", err)
	}
	return h, nil
}

// ErrRetentionRetains refuses an erasure on an entity whose retention mode
// keeps proposal detail.
var ErrRetentionRetains = errors.New("store: the entity's retention mode keeps proposal detail; erasure needs retention mode " + model.OperatorErase)

// EraseProposalDetail erases the frozen plan of the proposals of request id
// of e (every proposal when version is 0, else that one), stamping
// detail_erased_at with the database clock. It is an operator's command,
// run on the database directly; e's retention mode must be operator-erase
// (else ErrRetentionRetains). It returns the number of proposals it
// erased now (those erased before are left as they are); ErrNotFound when
// the request, or the named proposal, does not exist.
func EraseProposalDetail(ctx context.Context, pool *pgxpool.Pool, e *model.Entity, id string, version int64) (int64, error) {
	if e.ChangeRequest == nil {
		return 0, fmt.Errorf("store: %s is not a request entity", e.ID)
	}
	if e.ChangeRequest.Retention.Mode != model.OperatorErase {
		return 0, fmt.Errorf("store: erase proposal detail of %s: %w", e.ID, ErrRetentionRetains)
	}
	var n int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var found int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM registrum.request_proposals
WHERE entity_id = $1 AND record_id::text = $2 AND ($3 = 0 OR proposal_version = $3)`, e.ID, id, version).Scan(&found); err != nil {
			return err
		}
		if found == 0 {
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM registrum.requests WHERE entity_id = $1 AND record_id::text = $2)`, e.ID, id).Scan(&exists); err != nil {
				return err
			}
			if !exists || version != 0 {
				return ErrNotFound
			}
			return nil // a draft never submitted: nothing to erase
		}
		tag, err := tx.Exec(ctx, `UPDATE registrum.request_proposals SET plan = NULL, detail_erased_at = now()
WHERE entity_id = $1 AND record_id::text = $2 AND ($3 = 0 OR proposal_version = $3) AND detail_erased_at IS NULL`, e.ID, id, version)
		n = tag.RowsAffected()
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("store: erase proposal detail of %s/%s: %w", e.ID, id, err)
	}
	return n, nil
}

// ReviewOutcomeSQL is the SQL expression (text) of the reviewOutcome pseudo
// field of request entity e, evaluated for a row of e's table: cancelled
// for a cancelled request; for a submitted one the status of the stored
// review result of its current proposal, approved whose availableUntil has
// passed by the database clock (now(), the start of the read's
// transaction) as approvedExpired, pending without a result (approved under
// review mode none); approved once applied; null for a draft (no outcome:
// it matches no value).
func ReviewOutcomeSQL(e *model.Entity) string {
	pending := "'pending'"
	if e.ChangeRequest.Review.Mode == model.ReviewNone {
		pending = "'approved'"
	}
	return `SELECT CASE r.state WHEN 'cancelled' THEN 'cancelled' WHEN 'applied' THEN 'approved'
  WHEN 'submitted' THEN CASE WHEN rr.status IS NULL THEN ` + pending + `
    WHEN rr.status = 'approved' AND rr.available_until <= now() THEN 'approvedExpired' ELSE rr.status END END
FROM registrum.requests r
LEFT JOIN registrum.review_results rr ON rr.entity_id = r.entity_id AND rr.record_id = r.record_id AND rr.proposal_version = r.proposal_version
WHERE r.entity_id = ` + sqlString(e.ID) + ` AND r.record_id = ` + layout.Table(e) + `.` + layout.ColRecordID
}

// sqlString quotes s as an SQL string literal (package identifiers only,
// never caller input).
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// compilerFor is the query compiler of e's collection reads: request
// entities know the reviewOutcome pseudo field.
func compilerFor(e *model.Entity) querysql.Compiler {
	if !e.IsRequestEntity() {
		return querysql.Compiler{}
	}
	return querysql.Compiler{Pseudo: map[string]string{query.ReviewOutcome: ReviewOutcomeSQL(e)}}
}

// OwnedRequests narrows scope (placeholders from $1) to the records of
// request entity e owned by the principal owner: the collection scope of a
// grant with requestVisibility owner.
func OwnedRequests(e *model.Entity, scope querysql.Fragment, owner string) querysql.Fragment {
	args := append(append([]any(nil), scope.Args...), owner)
	cond := layout.Table(e) + "." + layout.ColRecordID + " IN (SELECT r.record_id FROM registrum.requests r WHERE r.entity_id = " +
		sqlString(e.ID) + " AND r.owner_reference = $" + fmt.Sprint(len(args)) + "::text)"
	if scope.SQL != "" {
		cond = "(" + scope.SQL + ") AND " + cond
	}
	return querysql.Fragment{SQL: cond, Args: args}
}
