package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/strictjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/planners"
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

// actionOperations maps an action to its grant operation.
var actionOperations = map[string]string{
	ActionSubmit: model.OpSubmitRequest,
	ActionRevise: model.OpReviseRequest,
	ActionCancel: model.OpCancelRequest,
	ActionApply:  model.OpApplyRequest,
}

// Bounds of action bodies.
const (
	// MaxActorReferenceBytes bounds actorReference.
	MaxActorReferenceBytes = 256
	// MaxReasonCharacters bounds an apply's reason (Unicode characters).
	MaxReasonCharacters = 4096
	// maxActionBodyBytes bounds an action body.
	maxActionBodyBytes = 64 << 10
)

// UsePlanners gives the service the planners of the package's request
// entities; without them a submit answers service.unavailable.
func (s *Service) UsePlanners(p *planners.Set) { s.planners = p }

// ownerAction reports whether only the request's owner may do the action.
func ownerAction(action string) bool { return action != ActionApply }

// actionBody is a parsed action body.
type actionBody struct {
	ActorReference  string
	Rebase          *bool
	ProposalVersion *int64
	EffectDigest    string
	Reason          *string
}

// parseActionBody reads an action body: a JSON object whose members are
// those of the action, actorReference always required.
func parseActionBody(action string, body []byte) (*actionBody, error) {
	if len(body) > maxActionBodyBytes {
		return nil, problem.At(problem.RequestInvalid, "", "the body is larger than %d bytes", maxActionBodyBytes)
	}
	doc, err := strictjson.Decode(body)
	if err != nil {
		return nil, bodyFault(err)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, problem.At(problem.RequestInvalid, "", "the body must be a JSON object")
	}
	allowed := map[string]bool{"actorReference": true}
	switch action {
	case ActionRevise:
		allowed["rebase"] = true
	case ActionApply:
		allowed["proposalVersion"], allowed["effectDigest"], allowed["reason"] = true, true, true
	}
	for _, k := range sortedKeys(top) {
		if !allowed[k] {
			return nil, problem.At(problem.RequestInvalid, strictjson.Pointer(k), "unknown member %q: not a member of a %s body", k, action)
		}
	}
	out := &actionBody{}
	actor, ok := top["actorReference"].(string)
	switch {
	case !ok:
		return nil, problem.At(problem.RequestInvalid, "/actorReference", "actorReference is required: a string naming who acts")
	case actor == "" || len(actor) > MaxActorReferenceBytes:
		return nil, problem.At(problem.RequestInvalid, "/actorReference", "actorReference must have 1 to %d bytes", MaxActorReferenceBytes)
	case !utf8.ValidString(actor) || containsControl(actor):
		return nil, problem.At(problem.RequestInvalid, "/actorReference", "actorReference must not contain control characters")
	}
	out.ActorReference = actor
	if action == ActionRevise {
		b, ok := top["rebase"].(bool)
		if !ok {
			return nil, problem.At(problem.RequestInvalid, "/rebase", "rebase is required: true or false, as the offered revise_request says")
		}
		out.Rebase = &b
	}
	if action == ActionApply {
		n, ok := top["proposalVersion"].(json.Number)
		v, err := strconv.ParseInt(string(n), 10, 64)
		if !ok || err != nil || v < 1 {
			return nil, problem.At(problem.RequestInvalid, "/proposalVersion", "proposalVersion is required: the positive integer of the read that offered apply")
		}
		out.ProposalVersion = &v
		d, ok := top["effectDigest"].(string)
		if !ok || d == "" {
			return nil, problem.At(problem.RequestInvalid, "/effectDigest", "effectDigest is required: the digest of the read that offered apply")
		}
		out.EffectDigest = d
		if raw, present := top["reason"]; present {
			r, ok := raw.(string)
			switch {
			case !ok:
				return nil, problem.At(problem.RequestInvalid, "/reason", "reason must be a string")
			case utf8.RuneCountInString(r) > MaxReasonCharacters:
				return nil, problem.At(problem.RequestInvalid, "/reason", "reason must have at most %d characters", MaxReasonCharacters)
			case containsNUL(r):
				return nil, problem.At(problem.RequestInvalid, "/reason", "reason must not contain NUL characters")
			}
			out.Reason = &r
		}
	}
	return out, nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

func containsControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// Act performs a change-request action (submit, revise, cancel, apply) on
// request record id of e. It needs If-Match and an Idempotency-Key; its
// answer is the action response of the specification, not an envelope.
func (s *Service) Act(ctx context.Context, c Call, e *model.Entity, id, action, ifMatch string, body []byte) (*Result, error) {
	op, ok := actionOperations[action]
	if !ok || !e.IsRequestEntity() {
		return nil, problem.NotFound()
	}
	grant, err := s.decide(ctx, c, op, e)
	if err != nil {
		return nil, err
	}
	if !values.IsUUID(id) {
		return nil, problem.NotFound()
	}
	if ifMatch == "" {
		return nil, problem.New(problem.PreconditionRequired, "a %s needs the request record's ETag in If-Match", action)
	}
	if c.IdempotencyKey == "" {
		return nil, problem.New(problem.RequestInvalid, "a request action needs an Idempotency-Key header")
	}
	if grant.PrincipalReference == "" {
		return nil, problem.NotFound()
	}
	idem, err := s.idempotency(c, grant, "action", action, e.ID, id, ifMatch, string(body))
	if err != nil {
		return nil, err
	}
	in, err := parseActionBody(action, body)
	if err != nil {
		return nil, err
	}
	var plan *planners.Plan
	if action == ActionSubmit || (action == ActionApply && e.ChangeRequest.Review.Mode == model.ReviewAuthority) {
		// Work outside the transaction (a planner's run, the authority's
		// result) comes first: the replay of an action is answered before
		// it is done again.
		var res *Result
		if res, plan, err = s.beforeAction(ctx, c, e, id, action, ifMatch, grant, idem); res != nil || err != nil {
			return res, err
		}
	}
	// Other actions are decided in their transaction alone; its first round
	// trip takes the idempotency key (a replay is answered from there) and
	// locks the record with its workflow state.
	return s.write(ctx, e, idem, func(w *store.Writer) (*store.Outcome, error) {
		cur, req, err := w.LockWithRequest(ctx, e, id)
		if err != nil {
			return nil, err
		}
		if err := s.checkLocked(cur, grant, ifMatch); err != nil {
			return nil, err
		}
		if ownerAction(action) && req.OwnerReference != grant.PrincipalReference {
			return nil, problem.New(problem.PreconditionFailed, "only the principal that owns the request may %s it", action)
		}
		fromState := req.State
		switch action {
		case ActionSubmit:
			err = s.submit(ctx, w, e, cur, req, plan, grant, in)
		case ActionCancel:
			if req.State != store.RequestDraft && req.State != store.RequestSubmitted {
				return nil, problem.New(problem.PreconditionFailed, "a %s request cannot be cancelled", req.State)
			}
			wasSubmitted := req.State == store.RequestSubmitted
			err = w.SetRequestState(ctx, e, id, store.RequestCancelled, req.ProposalVersion)
			req.State = store.RequestCancelled
			if err == nil && wasSubmitted && e.ChangeRequest.Review.Mode == model.ReviewAuthority {
				err = s.withdraw(ctx, w, e, req)
			}
		case ActionRevise:
			err = s.revise(ctx, w, e, req, in)
		case ActionApply:
			err = s.apply(ctx, w, c, e, req, grant, in)
		}
		if err != nil {
			return nil, err
		}
		j, err := s.journal(c, grant, e, id, cur.Values)
		if err != nil {
			return nil, err
		}
		rec, err := w.Touch(ctx, e, cur, cur.Revision, op, j)
		if err != nil {
			return nil, err
		}
		// req now holds the state the action wrote.
		lc := &store.Lifecycle{Transition: action, FromState: fromState, ToState: req.State, ProposalVersion: req.ProposalVersion}
		if req.Proposal != nil {
			lc.EffectDigest = req.Proposal.EffectDigest
		}
		if err := w.Capture(ctx, store.Change{Entity: e, Trigger: model.TriggerRequestLifecycle, After: rec, Lifecycle: lc}); err != nil {
			return nil, err
		}
		tok, err := s.writeSnapshot(ctx, w)
		if err != nil {
			return nil, err
		}
		return s.actionOutcome(rec, req, in.ActorReference, c.Representation, tok)
	})
}

// plan runs the planner of a draft on the request record as it is now read,
// outside any transaction; the submit transaction then checks that nothing
// moved since.
func (s *Service) plan(ctx context.Context, grant *access.Grant, e *model.Entity, rec *store.Record, req *store.Request, ifMatch string) (*planners.Plan, error) {
	if rec.Lifecycle != "active" || !grant.Admits(rec.Values) {
		return nil, problem.NotFound()
	}
	if !s.matches(ifMatch, rec) {
		return nil, problem.New(problem.PreconditionFailed, "the request changed since the If-Match validator was read")
	}
	if req.OwnerReference != grant.PrincipalReference {
		return nil, problem.New(problem.PreconditionFailed, "only the principal that owns the request may submit it")
	}
	if req.State != store.RequestDraft {
		return nil, problem.New(problem.PreconditionFailed, "only a draft can be submitted; this request is %s", req.State)
	}
	if _, err := attachmentManifest(e, req); err != nil {
		return nil, err
	}
	if s.planners == nil || s.planners.For(e) == nil {
		return nil, problem.New(problem.ServiceUnavailable, "the planner of %s is not loaded on this host", e.ID)
	}
	fields := map[string]any{}
	for _, f := range e.Fields {
		if v := rec.Values[f.ID]; v != nil {
			fields[f.ID] = values.Encode(f, v)
		}
	}
	p, err := s.planners.For(e).Plan(ctx, planners.Input{RequestID: rec.ID, ProposalVersion: req.ProposalVersion, Fields: fields})
	var refusal *planners.Refusal
	switch {
	case errors.As(err, &refusal):
		return nil, &problem.Error{Code: problem.RequestPlanRefused, Detail: "the planner produced no plan: " + refusal.Kind, Cause: err}
	case errors.Is(err, planners.ErrDeadline):
		return nil, &problem.Error{Code: problem.ServiceUnavailable, Detail: "the planner ran out of its time budget; try again", Cause: err}
	case err != nil:
		return nil, err
	}
	return p, nil
}

// submit freezes the plan as the request's proposal: patch targets are
// read for their current revision, which apply will expect.
func (s *Service) submit(ctx context.Context, w *store.Writer, e *model.Entity, cur *store.Record, req *store.Request, p *planners.Plan, grant *access.Grant, in *actionBody) error {
	if req.State != store.RequestDraft || p.ProposalVersion != req.ProposalVersion {
		return problem.New(problem.PreconditionFailed, "the request changed while it was being planned; read it again")
	}
	for i := range p.Writes {
		wr := &p.Writes[i]
		if wr.Operation != model.EffectPatch || wr.Target.RecordID == "" {
			continue
		}
		target := s.pkg.EntityByID(wr.Target.Entity)
		rec, err := w.Lock(ctx, target, wr.Target.RecordID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && rec.Lifecycle != "active") {
			return &problem.Error{Code: problem.RequestPlanRefused, Detail: "the planner produced no plan: " + planners.RefusedInvalid,
				Cause: fmt.Errorf("effect %s: target %s/%s does not exist", wr.ID, target.ID, wr.Target.RecordID)}
		}
		if err != nil {
			return err
		}
		wr.ExpectedRevision = rec.Revision
	}
	if err := p.Freeze(); err != nil {
		return err
	}
	// The slots as locked with the draft: the manifest the proposal freezes.
	manifest, err := attachmentManifest(e, req)
	if err != nil {
		return err
	}
	prop := &store.Proposal{
		Version: req.ProposalVersion, RecordRevision: cur.Revision, Planner: p.Kind, ModuleDigest: p.ModuleDigest,
		EffectDigest: p.EffectDigest, Plan: p.Canonical, SubmitterReference: grant.PrincipalReference, SubmitterActor: in.ActorReference,
		Attachments: manifest,
	}
	if err := w.SubmitRequest(ctx, e, cur.ID, prop); err != nil {
		return err
	}
	req.State, req.Proposal = store.RequestSubmitted, prop
	if e.ChangeRequest.Review.Mode != model.ReviewAuthority {
		return nil
	}
	// The submission is recorded here and sent after commit by a job: no
	// network call inside the transaction.
	sub, err := s.submission(e, cur, req, p.EffectDigest, in.ActorReference)
	if err != nil {
		return err
	}
	if err := w.InsertSubmission(ctx, sub); err != nil {
		return err
	}
	return w.Enqueue(ctx, store.ReviewSubmitArgs{RequestJob: sub.RequestJob}, nil)
}

// withdraw marks the submission of a cancelled (or revised) request's
// proposal cancelling while the authority may still hold it unsettled, and enqueues
// the job that tells the authority (never a network call in the
// transaction).
func (s *Service) withdraw(ctx context.Context, w *store.Writer, e *model.Entity, req *store.Request) error {
	j := store.RequestJob{Entity: e.ID, RecordID: req.RecordID, ProposalVersion: req.ProposalVersion}
	moved, err := w.WithdrawSubmission(ctx, j)
	if err != nil || !moved {
		return err
	}
	if req.Submission != nil {
		req.Submission.State = store.SubmissionCancelling
	}
	return w.Enqueue(ctx, store.ReviewWithdrawArgs{RequestJob: j}, nil)
}

// revise moves a submitted request back to a draft of the next proposal
// version, when the review outcome offers it with this rebase value.
func (s *Service) revise(ctx context.Context, w *store.Writer, e *model.Entity, req *store.Request, in *actionBody) error {
	if req.State != store.RequestSubmitted {
		return problem.New(problem.PreconditionFailed, "only a submitted request can be revised; this request is %s", req.State)
	}
	if offered, rebase := reviseOffer(outcome(e, req)); !offered || *in.Rebase != rebase {
		return problem.New(problem.MutationConflict, "the review outcome does not offer a revision with rebase %t", *in.Rebase)
	}
	if e.ChangeRequest.Review.Mode == model.ReviewAuthority {
		// The authority's review of the replaced proposal, if unsettled,
		// is withdrawn.
		if err := s.withdraw(ctx, w, e, req); err != nil {
			return err
		}
	}
	if err := w.SetRequestState(ctx, e, req.RecordID, store.RequestDraft, req.ProposalVersion+1); err != nil {
		return err
	}
	// The next draft starts with the slots of the proposal it revises.
	if err := w.CarryAttachments(ctx, e, req.RecordID, req.ProposalVersion, req.ProposalVersion+1); err != nil {
		return err
	}
	for i := range req.Attachments {
		req.Attachments[i].ProposalVersion = req.ProposalVersion + 1
	}
	req.State, req.ProposalVersion, req.Proposal, req.Submission, req.Result = store.RequestDraft, req.ProposalVersion+1, nil, nil, nil
	return nil
}

// applyRefusal reports why apply is not offered to grant on req, "" when it is.
func (s *Service) applyRefusal(e *model.Entity, req *store.Request, grant *access.Grant, executor string) string {
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
	case outcome(e, req) != ResultApproved:
		return "there is no approved review result for this proposal"
	case req.Proposal.DetailErased:
		return "the proposal's detail was erased"
	}
	if grant.Source != nil && len(grant.Source.ApplyTargets) > 0 && req.Proposal.Plan != nil {
		writes, err := planners.ParseFrozen(req.Proposal.Plan)
		if err != nil {
			return "the frozen plan cannot be read"
		}
		for _, wr := range writes {
			if !applyTarget(grant.Source, wr.Target.Entity) {
				return "the selected profile may not write " + wr.Target.Entity
			}
		}
	}
	return ""
}

func applyTarget(g *model.Grant, entity string) bool {
	for _, t := range g.ApplyTargets {
		if t.Entity == entity {
			return true
		}
	}
	return false
}

// apply writes the frozen plan of the submitted proposal named by the body,
// then the application receipt, in the caller's transaction.
func (s *Service) apply(ctx context.Context, w *store.Writer, c Call, e *model.Entity, req *store.Request, grant *access.Grant, in *actionBody) error {
	if why := s.applyRefusal(e, req, grant, c.Executor); why != "" {
		return problem.New(problem.PreconditionFailed, "apply is not offered: %s", why)
	}
	if *in.ProposalVersion != req.ProposalVersion || in.EffectDigest != req.Proposal.EffectDigest {
		return problem.New(problem.PreconditionFailed, "the proposal named by proposalVersion and effectDigest is not the current one")
	}
	writes, err := planners.ParseFrozen(req.Proposal.Plan)
	if err != nil {
		return err
	}
	created := map[string]string{}
	type result struct {
		Effect   string `json:"effect"`
		Entity   string `json:"entity"`
		RecordID string `json:"recordId"`
		Revision int64  `json:"revision"`
	}
	results := make([]result, 0, len(writes))
	for _, wr := range writes {
		target := s.pkg.EntityByID(wr.Target.Entity)
		if target == nil {
			return fmt.Errorf("records: frozen plan names unknown entity %q", wr.Target.Entity)
		}
		var rec *store.Record
		switch wr.Operation {
		case model.EffectCreate:
			stored, err := s.frozenValues(target, wr, map[string]any{}, created)
			if err != nil {
				return err
			}
			rid := uuid.NewString()
			j, err := s.journal(c, grant, target, rid, stored)
			if err != nil {
				return err
			}
			if rec, err = w.Create(ctx, target, rid, stored, j); err != nil {
				return err
			}
			created[wr.ID] = rid
		default:
			rid := wr.Target.RecordID
			if wr.Target.FromEffect != "" {
				rid = created[wr.Target.FromEffect]
			}
			cur, err := w.Lock(ctx, target, rid)
			if errors.Is(err, store.ErrNotFound) || (err == nil && cur.Lifecycle != "active") {
				return problem.New(problem.PreconditionFailed, "the target of effect %s no longer exists; revise the request", wr.ID)
			}
			if err != nil {
				return err
			}
			if wr.ExpectedRevision != 0 && cur.Revision != wr.ExpectedRevision {
				return problem.New(problem.PreconditionFailed, "the target of effect %s changed since the proposal was submitted; revise the request", wr.ID)
			}
			next := make(map[string]any, len(cur.Values))
			for k, v := range cur.Values {
				next[k] = v
			}
			if next, err = s.frozenValues(target, wr, next, created); err != nil {
				return err
			}
			j, err := s.journal(c, grant, target, rid, next)
			if err != nil {
				return err
			}
			if rec, err = w.Update(ctx, target, rid, cur.Revision, next, j); err != nil {
				return err
			}
		}
		results = append(results, result{Effect: wr.ID, Entity: target.ID, RecordID: rec.ID, Revision: rec.Revision})
	}
	resultsJSON, err := canonjson.Marshal(results)
	if err != nil {
		return err
	}
	app := &store.Application{
		ID: uuid.NewString(), ProposalVersion: req.ProposalVersion, EffectDigest: req.Proposal.EffectDigest,
		ApplierReference: grant.PrincipalReference, ApplierActor: in.ActorReference,
		Reason: in.Reason, ReasonPresent: in.Reason != nil, Results: resultsJSON,
	}
	if e.ChangeRequest.Retention.Mode != model.RetainAll {
		app.Reason = nil // kept only where retention keeps proposal detail
	}
	if err := w.ApplyRequest(ctx, e, req.RecordID, app); err != nil {
		return err
	}
	req.State, req.Application = store.RequestApplied, app
	return nil
}

// frozenValues applies a frozen write's set and clear to values (storage
// form), checking each value again with the field's rules.
func (s *Service) frozenValues(target *model.Entity, wr planners.Write, vals map[string]any, created map[string]string) (map[string]any, error) {
	for field, v := range wr.Set {
		f := target.Field(field)
		if f == nil {
			return nil, fmt.Errorf("records: frozen plan names unknown field %s.%s", target.ID, field)
		}
		wire := v.Value
		if v.FromEffect != "" {
			wire = created[v.FromEffect]
		}
		stored, err := s.codec.Decode(f, wire)
		if err != nil {
			return nil, problem.New(problem.PreconditionFailed, "effect %s: %s no longer fits the field; revise the request", wr.ID, field)
		}
		if stored == nil {
			delete(vals, field)
		} else {
			vals[field] = stored
		}
	}
	for _, field := range wr.Clear {
		delete(vals, field)
	}
	return vals, nil
}

// actionOutcome renders the action response: the request record's id,
// revision and snapshot, its request state, and the actor reference.
func (s *Service) actionOutcome(rec *store.Record, req *store.Request, actor string, rep Representation, snapshot string) (*store.Outcome, error) {
	doc := map[string]any{
		"id":             rec.ID,
		"revision":       rec.Revision,
		"snapshot":       snapshot,
		"request":        s.requestCore(req),
		"actorReference": actor,
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return &store.Outcome{
		Status: http.StatusOK,
		ETag:   s.keys.ETag(s.pkg.Revision, rec.Entity.ID, rec.ID, strconv.FormatInt(rec.Revision, 10), string(rep)),
		Body:   body,
	}, nil
}

// requestCore is the part of data.request every view shares: engineState,
// proposalVersion, effectDigest and application.
func (s *Service) requestCore(req *store.Request) map[string]any {
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
	view := s.requestCore(req)
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
		if owner && grantAllows(grant, model.OpSubmitRequest) {
			offer(ActionSubmit, nil)
		}
		if owner && grantAllows(grant, model.OpCancelRequest) {
			offer(ActionCancel, nil)
		}
	case store.RequestSubmitted:
		if grant.PrincipalReference != "" && s.applyRefusal(e, req, grant, "") == "" {
			offer(ActionApply, nil)
		}
		if owner && grantAllows(grant, model.OpReviseRequest) {
			if offered, rebase := reviseOffer(outcome(e, req)); offered {
				offer(ActionRevise, map[string]any{"rebase": rebase})
			}
		}
		if owner && grantAllows(grant, model.OpCancelRequest) {
			offer(ActionCancel, nil)
		}
	}
	view["actions"] = actions
	view["history"] = s.historyView(req, grant)
	return view
}

// applicationState is review.application.state.
func applicationState(e *model.Entity, req *store.Request) string {
	if req.State == store.RequestApplied {
		return "applied"
	}
	if req.State != store.RequestSubmitted {
		return "blocked"
	}
	switch outcome(e, req) {
	case "":
		return "awaitingReview"
	case ResultApproved:
		if e.ChangeRequest.Application.Mode == model.ApplyAutomatic {
			return "queued"
		}
		return "ready"
	case outcomeApprovedExpired:
		return "expired"
	}
	return "blocked"
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

// requestVisible reports whether the grant may see the request: a grant
// with requestVisibility "owner" shows only the caller's own requests.
func requestVisible(grant *access.Grant, req *store.Request) bool {
	if grant.Source == nil || grant.Source.RequestVisibility != "owner" {
		return true
	}
	return grant.PrincipalReference != "" && grant.PrincipalReference == req.OwnerReference
}

// lockDraft locks the workflow state of a request record about to be
// patched: only its owner may change it, and only while it is a draft.
func (s *Service) lockDraft(ctx context.Context, w *store.Writer, e *model.Entity, grant *access.Grant, id string) (*store.Request, error) {
	req, err := w.LockRequest(ctx, e, id)
	if err != nil {
		return nil, err
	}
	if !requestVisible(grant, req) {
		return nil, store.ErrNotFound
	}
	if req.OwnerReference != grant.PrincipalReference {
		return nil, problem.New(problem.PreconditionFailed, "only the principal that owns the request may change it")
	}
	if req.State != store.RequestDraft {
		return nil, problem.New(problem.PreconditionFailed, "only a draft can be changed; this request is %s (revise it first)", req.State)
	}
	return req, nil
}

// beforeAction does what a submit, or an apply under an external review
// authority, needs before its transaction: it reads the stored outcome of
// the key (a replay is answered at once) with the request and, for a
// submit, its record in one round trip, then runs the planner or fetches
// the authority's result. The transaction checks again that nothing moved.
func (s *Service) beforeAction(ctx context.Context, c Call, e *model.Entity, id, action, ifMatch string, grant *access.Grant, idem *store.Idempotency) (*Result, *planners.Plan, error) {
	stored, rec, req, err := s.store.ActionInputs(ctx, idem, e, id, action == ActionSubmit)
	switch {
	case errors.Is(err, store.ErrIdempotencyConflict):
		return nil, nil, problem.New(problem.IdempotencyConflict, "the Idempotency-Key was used before with a different request")
	case errors.Is(err, store.ErrOutcomeErased):
		return nil, nil, problem.New(problem.IdempotencyOutcomeErased, "the action under this Idempotency-Key happened; its answer was erased with the record's history")
	case err != nil && stored == nil && errors.Is(err, store.ErrNotFound):
		return nil, nil, problem.NotFound()
	case err != nil:
		return nil, nil, err
	case stored != nil:
		return &Result{Status: stored.Status, ETag: stored.ETag, Body: stored.Body, Replayed: true}, nil, nil
	}
	if action == ActionSubmit {
		plan, err := s.plan(ctx, grant, e, rec, req, ifMatch)
		return nil, plan, err
	}
	// The authority's result is fetched before the transaction (a network
	// call); the transaction then checks nothing moved.
	if why := s.applyRefusal(e, req, grant, c.Executor); why != "" {
		return nil, nil, problem.New(problem.PreconditionFailed, "apply is not offered: %s", why)
	}
	return nil, nil, s.checkEvidence(ctx, e, req)
}
