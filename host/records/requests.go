package records

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store"
)

// Change-request actions: the last path segment of an action's href, and
// the grant operation it needs.
const (
	ActionSubmit = "submit"
	ActionRevise = "revise"
	ActionCancel = "cancel"
	ActionApply  = "apply"
)

// ActionOperation returns the grant operation an action needs ("" for an
// unknown action).
func ActionOperation(action string) string { return actionOperations[action] }

// actionOperations maps an action to its grant operation.
var actionOperations = map[string]string{
	ActionSubmit: model.OpSubmitRequest,
	ActionRevise: model.OpReviseRequest,
	ActionCancel: model.OpCancelRequest,
	ActionApply:  model.OpApplyRequest,
}

// ApplyRefusal reports why apply is refused to grant on req whatever the
// review evidence says, "" when nothing but the evidence is left to decide:
// a read offers apply when the review outcome (database clock) is also
// approved; an apply decides the evidence with the service clock once it
// has fetched the authority's result (host/requests decides that).
func (s *Service) ApplyRefusal(e *model.Entity, req *store.Request, grant *access.Grant, executor string) string {
	cr := e.ChangeRequest
	switch {
	case req.State != store.RequestSubmitted || req.Proposal == nil:
		return "only a submitted request can be applied"
	case !grantAllows(grant, model.OpApplyRequest):
		return "the selected profile may not apply requests"
	case cr.Application.Mode == model.ApplyAutomatic && executor != cr.Application.Executor:
		return "this request is applied automatically by its executor"
	case cr.Application.Mode != model.ApplyAutomatic && executor != "":
		return "this request is applied by a person, not an executor"
	case req.Proposal.DetailErased:
		return "the proposal's detail was erased"
	}
	if grant.Source != nil && len(grant.Source.ApplyTargets) > 0 && req.Proposal.Plan != nil {
		if s.plans == nil {
			return "the frozen plan cannot be read"
		}
		targets, err := s.plans.TargetEntities(req.Proposal.Plan)
		if err != nil {
			return "the frozen plan cannot be read"
		}
		for _, entity := range targets {
			if !applyTarget(grant.Source, entity) {
				return "the selected profile may not write " + entity
			}
		}
	}
	return ""
}

// SlotRefusal reports why the attachment slots of draft req keep it from
// being submitted now, nil when they do not: a required slot is empty (or
// its content erased), or a filled slot holds content still pending or
// rejected by its verifier (even an optional slot). It is the one check of
// both the offer and the act: a read offers submit_request only when it
// is nil, and submit refuses with it (412).
func SlotRefusal(e *model.Entity, req *store.Request) error {
	for _, slot := range e.Attachments {
		a := req.Attachment(slot.ID)
		if a == nil || a.Erased {
			if slot.Required {
				return problem.New(problem.PreconditionFailed, "the required attachment slot %s is not filled", slot.ID)
			}
			continue
		}
		switch a.Status {
		case store.VerificationPending:
			return problem.New(problem.PreconditionFailed, "the attachment in slot %s is still being verified; submit once it is approved", slot.ID)
		case store.VerificationRejected:
			return problem.New(problem.PreconditionFailed, "the attachment in slot %s was rejected by its verifier; replace or remove it", slot.ID)
		}
	}
	return nil
}

func applyTarget(g *model.Grant, entity string) bool {
	for _, t := range g.ApplyTargets {
		if t.Entity == entity {
			return true
		}
	}
	return false
}

// RequestCore is the part of data.request every view shares: engineState,
// proposalVersion, effectDigest and application.
func (s *Service) RequestCore(req *store.Request) map[string]any {
	core := map[string]any{
		"engineState":     req.State,
		"proposalVersion": req.ProposalVersion,
		"application":     nil,
	}
	if req.Proposal != nil {
		core["effectDigest"] = req.Proposal.EffectDigest
	}
	if a := req.Application; a != nil {
		app := map[string]any{
			"applicationId":   a.ID,
			"proposalVersion": a.ProposalVersion,
			"effectDigest":    a.EffectDigest,
			"appliedAt":       a.AppliedAt.Format(time.RFC3339Nano),
			"reasonPresent":   a.ReasonPresent,
		}
		core["application"] = app
	}
	return core
}

// requestView is data.request for one caller: the core, the frozen review
// binding, the review state where disclosed, what the caller may do now,
// and the actor references where disclosed.
func (s *Service) requestView(rec *store.Record, req *store.Request, grant *access.Grant, rep Representation) map[string]any {
	e := rec.Entity
	cr := e.ChangeRequest
	view := s.RequestCore(req)
	owner := grant.PrincipalReference != "" && grant.PrincipalReference == req.OwnerReference
	if req.Proposal != nil {
		review := map[string]any{"mode": cr.Review.Mode}
		if cr.Review.Mode == model.ReviewAuthority {
			review["authority"], review["policyId"] = cr.Review.Authority, cr.Review.PolicyID
		}
		proposal := map[string]any{"review": review, "planner": req.Proposal.Planner, "submittedAt": req.Proposal.SubmittedAt.Format(time.RFC3339Nano)}
		if req.Proposal.ModuleDigest != "" {
			proposal["moduleDigest"] = req.Proposal.ModuleDigest
		}
		if len(req.Proposal.Attachments) > 0 {
			proposal["attachments"] = json.RawMessage(req.Proposal.Attachments)
		}
		view["proposal"] = proposal
		view["detailErased"] = req.Proposal.DetailErased
	} else {
		view["detailErased"] = false
	}
	src := grant.Source
	if src != nil && slicesContains(src.ReadableRequestFields, model.RequestFieldReviewState) {
		view["review"] = reviewView(e, req)
	}
	if src != nil && slicesContains(src.ReadableRequestFields, model.RequestFieldActorReference) {
		if req.Proposal != nil {
			view["submitterReference"] = req.Proposal.SubmitterActor
		}
		if a := req.Application; a != nil {
			view["applierReference"] = a.ApplierActor
			// The reason is the applier's own statement: it is disclosed
			// with the actor references, where retention keeps it.
			if a.Reason != nil && e.ChangeRequest.Retention.Mode == model.RetainAll {
				view["application"].(map[string]any)["reason"] = *a.Reason
			}
		}
	}
	view["editable"] = req.State == store.RequestDraft && owner && grantAllows(grant, model.OpPatch)
	etag := s.keys.ETag(s.pkg.Revision, e.ID, rec.ID, strconv.FormatInt(rec.Revision, 10), string(rep))
	href := func(action string) string {
		return "/v1/records/" + e.Route + "/" + rec.ID + "/actions/" + action + "?accessProfile=" + grant.Profile
	}
	actions := []map[string]any{}
	offer := func(action string, extra map[string]any) {
		a := map[string]any{"operation": actionOperations[action], "href": href(action), "ifMatch": etag, "proposalVersion": req.ProposalVersion}
		if req.Proposal != nil {
			a["effectDigest"] = req.Proposal.EffectDigest
		}
		for k, v := range extra {
			a[k] = v
		}
		actions = append(actions, a)
	}
	switch req.State {
	case store.RequestDraft:
		if owner && grantAllows(grant, model.OpSubmitRequest) && SlotRefusal(e, req) == nil {
			offer(ActionSubmit, nil)
		}
		if owner && grantAllows(grant, model.OpCancelRequest) {
			offer(ActionCancel, nil)
		}
	case store.RequestSubmitted:
		if grant.PrincipalReference != "" && ReviewOutcome(e, req) == ResultApproved && s.ApplyRefusal(e, req, grant, "") == "" {
			offer(ActionApply, nil)
		}
		if owner && grantAllows(grant, model.OpReviseRequest) {
			if offered, rebase := ReviseOffer(ReviewOutcome(e, req)); offered {
				offer(ActionRevise, map[string]any{"rebase": rebase})
			}
		}
		if owner && grantAllows(grant, model.OpCancelRequest) {
			offer(ActionCancel, nil)
		}
	}
	view["actions"] = actions
	view["history"] = s.HistoryView(req, grant)
	return view
}

func grantAllows(g *access.Grant, op string) bool { return g.Source == nil || g.Source.Allows(op) }

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// RequestVisible reports whether the grant may see the request: a grant
// with requestVisibility "owner" shows only the caller's own requests.
func RequestVisible(grant *access.Grant, req *store.Request) bool {
	if grant.Source == nil || grant.Source.RequestVisibility != "owner" {
		return true
	}
	return grant.PrincipalReference != "" && grant.PrincipalReference == req.OwnerReference
}

// LockDraft locks the workflow state of a request record about to be
// patched: only its owner may change it, and only while it is a draft.
func (s *Service) LockDraft(ctx context.Context, w *store.Writer, e *model.Entity, grant *access.Grant, id string) (*store.Request, error) {
	req, err := w.LockRequest(ctx, e, id)
	if err != nil {
		return nil, err
	}
	if !RequestVisible(grant, req) {
		return nil, problem.Concealed(problem.ReasonRequestHidden)
	}
	if req.OwnerReference != grant.PrincipalReference {
		return nil, problem.New(problem.PreconditionFailed, "only the principal that owns the request may change it")
	}
	if req.State != store.RequestDraft {
		return nil, problem.New(problem.PreconditionFailed, "only a draft can be changed; this request is %s (revise it first)", req.State)
	}
	return req, nil
}
