package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/model"
)

// PendingRequest is a submitted request whose frozen plan writes a record.
type PendingRequest struct {
	RecordID        string
	ProposalVersion int64
	EffectDigest    string
}

// maxPresence bounds the pending requests listed on one record.
const maxPresence = 100

// PendingRequestsTargeting lists the submitted requests of request entity
// re whose current proposal's frozen plan writes record targetID (at most
// 100, oldest first). A plan whose detail was erased no longer names its
// targets and is not listed.
func (s *Store) PendingRequestsTargeting(ctx context.Context, re *model.Entity, targetID string) (_ []PendingRequest, err error) {
	ctx, span := startOp(ctx, spanRead, "PendingRequestsTargeting")
	defer func() { endOp(span, err) }()
	probe, err := json.Marshal(map[string]any{"writes": []any{map[string]any{"target": map[string]any{"recordId": targetID}}}})
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT r.record_id::text, r.proposal_version, p.effect_digest
    FROM registrum.requests r
    JOIN registrum.request_proposals p ON p.entity_id = r.entity_id AND p.record_id = r.record_id AND p.proposal_version = r.proposal_version
    WHERE r.entity_id = $1 AND r.state = 'submitted' AND p.plan @> $2::jsonb
    ORDER BY p.submitted_at, r.record_id LIMIT $3`, re.ID, string(probe), maxPresence)
	if err != nil {
		return nil, fmt.Errorf("store: pending requests: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (PendingRequest, error) {
		var p PendingRequest
		err := r.Scan(&p.RecordID, &p.ProposalVersion, &p.EffectDigest)
		return p, err
	})
}
