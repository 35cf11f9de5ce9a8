package records

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/store"
)

// presence is data.requestPresence of a record read: for each request
// entity the grant declares (requestPresence), the submitted requests
// whose frozen plan writes this record, as far as the request entity's row
// boundaries of the grant let the caller see them. Nil when the grant
// declares none.
func (s *Service) presence(ctx context.Context, grant *access.Grant, rec *store.Record) (json.RawMessage, error) {
	if grant.Source == nil || len(grant.Source.RequestPresence) == 0 {
		return nil, nil
	}
	type pending struct {
		RequestEntity   string `json:"entityTypeIdentifier"`
		RecordID        string `json:"recordIdentifier"`
		ProposalVersion int64  `json:"proposalVersion"`
		EffectDigest    string `json:"effectDigest"`
	}
	out := []pending{}
	for _, rp := range grant.Source.RequestPresence {
		re := s.pkg.EntityByID(rp.RequestEntity)
		if re == nil {
			continue
		}
		bounds, err := grant.BoundariesOf(re, rp.RowBoundaries)
		if err != nil {
			continue // a claim the boundary needs is missing: nothing is visible
		}
		found, err := s.store.PendingRequestsTargeting(ctx, re, rec.ID)
		if err != nil {
			return nil, err
		}
		for _, p := range found {
			if len(bounds) > 0 {
				r, err := s.store.Get(ctx, re, p.RecordID)
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				if err != nil {
					return nil, err
				}
				if !bounds.Admits(r.Values) {
					continue
				}
			}
			out = append(out, pending{RequestEntity: re.ID, RecordID: p.RecordID, ProposalVersion: p.ProposalVersion, EffectDigest: p.EffectDigest})
		}
	}
	return json.Marshal(map[string]any{"pending": out})
}
