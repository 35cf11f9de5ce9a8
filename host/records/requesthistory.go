package records

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store"
)

// historyAfter parses requestHistoryAfterProposalVersion: a proposal version
// (a positive integer, digits only, no sign or leading zero) below the
// request's current one; 0 when the read did not give it (raw is nil).
func historyAfter(raw *string, req *store.Request) (int64, error) {
	if raw == nil {
		return 0, nil
	}
	n, err := strconv.ParseInt(*raw, 10, 64)
	if err != nil || n < 1 || (*raw)[0] == '0' || (*raw)[0] == '+' {
		return 0, problem.New(problem.QueryInvalid, "%s must be a proposal version: a positive integer.", query.OptRequestHistoryAfter)
	}
	if n >= req.ProposalVersion {
		return 0, problem.New(problem.QueryInvalid, "%s must be below the request's proposal version %d.", query.OptRequestHistoryAfter, req.ProposalVersion)
	}
	return n, nil
}

// HistoryReader reads a page of a request's history: the store for a read
// (a snapshot of its own), a write's *store.Writer inside the write (its
// own transaction, never a second pooled connection).
type HistoryReader interface {
	RequestHistory(ctx context.Context, e *model.Entity, id string, after int64) (*store.RequestHistory, error)
}

// LoadHistory reads into req, through from, the page of its history that
// the read asked for: the first, or the one after
// requestHistoryAfterProposalVersion (afterRaw as the read gave it, nil
// when it did not).
func (s *Service) LoadHistory(ctx context.Context, from HistoryReader, e *model.Entity, req *store.Request, afterRaw *string) error {
	after, err := historyAfter(afterRaw, req)
	if err != nil {
		return err
	}
	h, err := from.RequestHistory(ctx, e, req.RecordID, after)
	if err != nil {
		return err
	}
	req.History = h
	return nil
}

// HistoryView is data.request.history: the page of retained proposals read
// with the request (none when it was not read, as for a new draft), each
// with its version, effect digest, planner, submission time and frozen
// writes (unless erased), its review outcome where the grant discloses
// review_state, and, for a proposal revise_request replaced, revisedAs
// (revision or rebase) and revisedAt; nextAfterProposalVersion continues
// it, null on the last page.
// Writes are narrowed to what the caller may read (see readableWrites).
func (s *Service) HistoryView(req *store.Request, grant *access.Grant) map[string]any {
	items := []map[string]any{}
	var next any
	disclose := grant.Source != nil && slicesContains(grant.Source.ReadableRequestFields, model.RequestFieldReviewState)
	if h := req.History; h != nil {
		for _, it := range h.Items {
			item := map[string]any{
				"proposalVersion": it.ProposalVersion,
				"effectDigest":    it.EffectDigest,
				"planner":         it.Planner,
				"submittedAt":     it.SubmittedAt.Format(time.RFC3339Nano),
				"detailErased":    it.DetailErased,
			}
			if it.ModuleDigest != "" {
				item["moduleDigest"] = it.ModuleDigest
			}
			if !it.DetailErased && it.Writes != nil {
				item["writes"] = s.readableWrites(it.Writes, grant)
			}
			if disclose && it.Outcome != "" {
				item["outcome"] = it.Outcome
			}
			if it.RevisedAs != "" {
				// How the owner's revise_request replaced it: a revision
				// (rebase false) or a rebase (rebase true).
				item["revisedAs"] = it.RevisedAs
				item["revisedAt"] = it.RevisedAt.Format(time.RFC3339Nano)
			}
			items = append(items, item)
		}
		if h.NextAfter != nil {
			next = *h.NextAfter
		}
	}
	return map[string]any{"items": items, "nextAfterProposalVersion": next}
}

// requestPseudo adds to what a collection read of e allows the
// reviewOutcome pseudo field, on request entities whose grant discloses
// review_state.
func requestPseudo(e *model.Entity, grant *access.Grant, allowed *query.Allowed) {
	if e.IsRequestEntity() && grant.Source != nil && slicesContains(grant.Source.ReadableRequestFields, model.RequestFieldReviewState) {
		allowed.Pseudo = append(allowed.Pseudo, query.Pseudo{Name: query.ReviewOutcome, Values: query.ReviewOutcomeValues()})
	}
}

// ownRequestsOnly reports whether a collection read of e lists only the
// caller's own requests (requestVisibility owner).
func ownRequestsOnly(e *model.Entity, grant *access.Grant) bool {
	return e.IsRequestEntity() && grant.Source != nil && grant.Source.RequestVisibility == "owner"
}

// readableWrites narrows a proposal's frozen writes (JSON text as stored)
// to what the caller may read under the selected profile: a write whose
// target entity the profile cannot get is left out, and a kept write sets
// and clears only fields the profile's grant on its target lists in
// readableFields. Unrestricted callers (no authored grant) see every write.
func (s *Service) readableWrites(raw []byte, grant *access.Grant) any {
	if grant.Source == nil {
		return json.RawMessage(raw)
	}
	var writes []map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&writes); err != nil {
		return []any{} // stored by the service itself; unreadable means nothing to show
	}
	profile := s.pkg.ProfileByID(grant.Profile)
	kept := make([]map[string]any, 0, len(writes))
	for _, w := range writes {
		target, _ := w["target"].(map[string]any)
		entity, _ := target["entity"].(string)
		var g *model.Grant
		if profile != nil {
			g = profile.Grant(entity)
		}
		if g == nil || !g.Allows(model.OpGet) {
			continue
		}
		if set, ok := w["set"].(map[string]any); ok {
			for f := range set {
				if !slices.Contains(g.ReadableFields, f) {
					delete(set, f)
				}
			}
		}
		if clear, ok := w["clear"].([]any); ok {
			w["clear"] = slices.DeleteFunc(clear, func(f any) bool {
				id, _ := f.(string)
				return !slices.Contains(g.ReadableFields, id)
			})
		}
		kept = append(kept, w)
	}
	return kept
}
