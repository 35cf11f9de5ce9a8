// Package requests is the record host's change-request workflow: a draft
// request record moves through submit (its planner runs and the plan is
// frozen), revise, cancel and apply (the frozen plan is written through the
// record kernel, host/records), under the review authority of its entity
// when it has one; and the attachment slots of a request with their
// uploads, removals and downloads. The records of request entities are
// created, patched and read through the kernel like other records; this
// room moves them through the workflow. It knows nothing of HTTP; refusals
// are problem.Error values.
package requests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/telemetry"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/planners"
	"github.com/registrum/registrum/store"
)

// ownerAction reports whether only the request's owner may do the action.
func ownerAction(action string) bool { return action != records.ActionApply }

// Act performs a change-request action (submit, revise, cancel, apply)
// on request record id of e, with in: the body the edge received
// (ReceivedBody) or an input built in Go (ApplyInput). It needs If-Match
// and an Idempotency-Key; its answer is the action response of the
// specification, not an envelope.
//
// The order of its checks is the contract: the grant (else the concealed
// not-found), the request's visibility and row boundary (else the
// concealed not-found), the validator, ownership and the action's offer
// (412, or 409 for a revise the review outcome refuses), and only then
// the input's members, so that a non-owner, a stale If-Match or an action
// not on offer is answered as such whatever the input holds.
func (s *Service) Act(ctx context.Context, c records.Call, e *model.Entity, id, action, ifMatch string, in ActionInput) (*records.Result, error) {
	op := records.ActionOperation(action)
	if op == "" || !e.IsRequestEntity() {
		return nil, problem.NotFound()
	}
	grant, err := s.records.Decide(ctx, c, op, e)
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
	binding, err := in.binding()
	if err != nil {
		return nil, err
	}
	idem, err := s.records.Idempotency(c, grant, "action", action, e.ID, id, ifMatch, string(binding))
	if err != nil {
		return nil, err
	}
	var pre *readBefore
	if action == records.ActionSubmit || (action == records.ActionApply && e.ChangeRequest.Review.Mode == model.ReviewAuthority) {
		// Work outside the transaction (a planner's run, the authority's
		// result) comes first: the replay of an action is answered before
		// it is done again.
		var res *records.Result
		if res, pre, err = s.beforeAction(ctx, c, e, id, action, ifMatch, grant, idem, in); res != nil || err != nil {
			return res, err
		}
	}
	if pre != nil && action == records.ActionSubmit && len(e.Attachments) == 0 {
		// A submit decides on the request as read before its planner ran:
		// its transaction locks the request only if it is still as read
		// (ExpectRequest) and writes in the same round trip. Slots are not
		// guarded that way (a verification verdict settles without a new
		// revision), so a request entity with slots takes the lock first.
		res, err := s.records.Write(ctx, e, idem, func(w *store.Writer) (*store.Outcome, error) {
			w.ExpectRequest(e, id, pre.rec.Revision, pre.req.State, pre.req.ProposalVersion)
			return s.decide(ctx, w, c, e, pre.rec, pre.req, grant, action, ifMatch, in, pre.plan)
		})
		if !errors.Is(err, store.ErrMoved) {
			return res, err
		}
		// The request moved while it was planned: it is judged again as
		// locked, as any other action is, and refused as it now stands.
	}
	var plan *planners.Plan
	if pre != nil {
		plan = pre.plan
	}
	// Other actions are decided in their transaction alone; its first round
	// trip takes the idempotency key (a replay is answered from there) and
	// locks the record with its workflow state.
	return s.records.Write(ctx, e, idem, func(w *store.Writer) (*store.Outcome, error) {
		cur, req, err := w.LockWithRequest(ctx, e, id)
		if err != nil {
			return nil, err
		}
		return s.decide(ctx, w, c, e, cur, req, grant, action, ifMatch, in, plan)
	})
}

// decide does an action in its transaction on the request record cur and
// its workflow state req, locked by w: it checks them (admitAction),
// judges the body, writes the action's rows and the touch of the request
// record, and renders the action response.
func (s *Service) decide(ctx context.Context, w *store.Writer, c records.Call, e *model.Entity, cur *store.Record, req *store.Request, grant *access.Grant, action, ifMatch string, in ActionInput, plan *planners.Plan) (*store.Outcome, error) {
	op := records.ActionOperation(action)
	if err := s.admitAction(e, cur, req, grant, action, ifMatch, c.Executor); err != nil {
		return nil, err
	}
	body, err := in.judge(action, grant.PrincipalReference)
	if err != nil {
		return nil, err
	}
	if action == records.ActionRevise && body.Rebase == nil {
		// No rebase sent: the one the offered revise_request carries.
		_, rebase := records.ReviseOffer(records.ReviewOutcome(e, req))
		body.Rebase = &rebase
	}
	id := cur.ID
	fromState := req.State
	// The stage the request was at before the action (a revise clears
	// the result it came from).
	stage := reviewStage(req)
	switch action {
	case records.ActionSubmit:
		err = s.submit(ctx, w, e, cur, req, plan, grant, body)
	case records.ActionCancel:
		wasSubmitted := req.State == store.RequestSubmitted
		err = w.SetRequestState(ctx, e, id, store.RequestCancelled, req.ProposalVersion)
		req.State = store.RequestCancelled
		if err == nil && wasSubmitted && e.ChangeRequest.Review.Mode == model.ReviewAuthority {
			err = s.withdraw(ctx, w, e, req)
		}
	case records.ActionRevise:
		err = s.revise(ctx, w, e, req, body)
	case records.ActionApply:
		err = s.apply(ctx, w, c, e, req, grant, body)
	}
	if err != nil {
		return nil, err
	}
	rec, err := s.touch(ctx, w, c, grant, e, cur, op)
	if err != nil {
		return nil, err
	}
	// req now holds the state the action wrote.
	lc := &store.Lifecycle{Transition: action, FromState: fromState, ToState: req.State, ProposalVersion: req.ProposalVersion, Stage: stage}
	if req.Proposal != nil {
		lc.EffectDigest = req.Proposal.EffectDigest
	}
	if err := w.Capture(ctx, store.Change{Entity: e, Trigger: model.TriggerRequestLifecycle, After: rec, Lifecycle: lc}); err != nil {
		return nil, err
	}
	out := &store.Outcome{}
	return out, s.records.WriteSnapshotAtCommit(ctx, w, func(tok string) error {
		o, err := s.actionOutcome(rec, req, body.ActorReference, c.Representation, tok)
		if err == nil {
			*out = *o
		}
		return err
	})
}

// touch writes the new revision of the request record cur that an action
// or a slot change makes, journaled as op, and returns the record as
// touched.
func (s *Service) touch(ctx context.Context, w *store.Writer, c records.Call, grant *access.Grant, e *model.Entity, cur *store.Record, op string) (*store.Record, error) {
	j, err := s.records.Journal(c, grant, e, cur.ID, cur.Values)
	if err != nil {
		return nil, err
	}
	return w.Touch(ctx, e, cur, cur.Revision, op, j)
}

// admitAction checks, on the request record and its workflow state as
// read (before the transaction) or locked (in it), what an action needs
// before its body is judged: a request the caller may see inside the
// row boundary (else the concealed not-found, as on a read, never a 412
// that would confirm it exists), a current If-Match, the owner for an
// owner's action, and the action on offer in the request's state.
func (s *Service) admitAction(e *model.Entity, rec *store.Record, req *store.Request, grant *access.Grant, action, ifMatch, executor string) error {
	if !records.RequestVisible(grant, req) {
		return problem.NotFound()
	}
	if err := s.records.CheckLocked(rec, grant, ifMatch); err != nil {
		return err
	}
	if ownerAction(action) && req.OwnerReference != grant.PrincipalReference {
		return problem.New(problem.PreconditionFailed, "only the principal that owns the request may %s it", action)
	}
	switch action {
	case records.ActionSubmit:
		if req.State != store.RequestDraft {
			return problem.New(problem.PreconditionFailed, "only a draft can be submitted; this request is %s", req.State)
		}
	case records.ActionCancel:
		if req.State != store.RequestDraft && req.State != store.RequestSubmitted {
			return problem.New(problem.PreconditionFailed, "a %s request cannot be cancelled", req.State)
		}
	case records.ActionRevise:
		if req.State != store.RequestSubmitted {
			return problem.New(problem.PreconditionFailed, "only a submitted request can be revised; this request is %s", req.State)
		}
		if offered, _ := records.ReviseOffer(records.ReviewOutcome(e, req)); !offered {
			return problem.New(problem.MutationConflict, "the review outcome does not offer a revision")
		}
	case records.ActionApply:
		if why := s.records.ApplyRefusal(e, req, grant, executor); why != "" {
			return problem.New(problem.PreconditionFailed, "apply is not offered: %s", why)
		}
	}
	return nil
}

// plan runs the planner of a draft on the request record as it is now read,
// outside any transaction; the submit transaction then checks that nothing
// moved since.
func (s *Service) plan(ctx context.Context, grant *access.Grant, e *model.Entity, rec *store.Record, req *store.Request, ifMatch string) (*planners.Plan, error) {
	if rec.Lifecycle != "active" || !grant.Admits(rec.Values) {
		return nil, problem.NotFound()
	}
	if !s.records.Matches(ifMatch, rec) {
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
	pctx, span := telemetry.StartSpan(ctx, "planner "+e.ID)
	p, err := s.planners.For(e).Plan(pctx, planners.Input{RequestID: rec.ID, ProposalVersion: req.ProposalVersion, Fields: fields})
	telemetry.Fail(span, err)
	span.End()
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
		// No review: the proposal is approved as submitted. An automatic
		// one is applied by its executor's job, queued here, once, through
		// the same apply action and guards as a person's apply.
		if e.ChangeRequest.Application.Mode == model.ApplyAutomatic {
			return queueAutoApply(ctx, w, req)
		}
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
	return w.Enqueue(ctx, ReviewSubmitArgs{RequestJob: jobOf(sub)}, nil)
}

// withdraw marks the submission of a cancelled (or revised) request's
// proposal cancelling while the authority may still hold it unsettled, and enqueues
// the job that tells the authority (never a network call in the
// transaction).
func (s *Service) withdraw(ctx context.Context, w *store.Writer, e *model.Entity, req *store.Request) error {
	moved, err := w.WithdrawSubmission(ctx, e.ID, req.RecordID, req.ProposalVersion)
	if err != nil || !moved {
		return err
	}
	if req.Submission != nil {
		req.Submission.State = store.SubmissionCancelling
	}
	return w.Enqueue(ctx, ReviewWithdrawArgs{RequestJob: RequestJob{Entity: e.ID, RecordID: req.RecordID, ProposalVersion: req.ProposalVersion}}, nil)
}

// revise moves a submitted request back to a draft of the next proposal
// version, when the review outcome offers it with this rebase value.
func (s *Service) revise(ctx context.Context, w *store.Writer, e *model.Entity, req *store.Request, in *actionBody) error {
	if req.State != store.RequestSubmitted {
		return problem.New(problem.PreconditionFailed, "only a submitted request can be revised; this request is %s", req.State)
	}
	if offered, rebase := records.ReviseOffer(records.ReviewOutcome(e, req)); !offered || *in.Rebase != rebase {
		return problem.New(problem.MutationConflict, "the review outcome does not offer a revision with rebase %t", *in.Rebase)
	}
	if e.ChangeRequest.Review.Mode == model.ReviewAuthority {
		// The authority's review of the replaced proposal, if unsettled,
		// is withdrawn.
		if err := s.withdraw(ctx, w, e, req); err != nil {
			return err
		}
	}
	// The replaced proposal keeps, in the request's history, which kind of
	// revision replaced it.
	as := store.RevisedAsRevision
	if *in.Rebase {
		as = store.RevisedAsRebase
	}
	if err := w.MarkRevised(ctx, e, req.RecordID, req.ProposalVersion, as); err != nil {
		return err
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
	req.State, req.ProposalVersion, req.Proposal, req.Submission, req.Result, req.AutoApplication = store.RequestDraft, req.ProposalVersion+1, nil, nil, nil, nil
	return nil
}

// apply writes the frozen plan of the submitted proposal named by the body,
// then the application receipt, in the caller's transaction. The review
// evidence is the result apply fetched and stored before the transaction
// (checkEvidence), decided again under the lock with the service clock:
// apply is authoritative, whatever a read offered. The proposal's
// attachment slots must still be those of the manifest frozen at submit.
func (s *Service) apply(ctx context.Context, w *store.Writer, c records.Call, e *model.Entity, req *store.Request, grant *access.Grant, in *actionBody) error {
	if why := s.records.ApplyRefusal(e, req, grant, c.Executor); why != "" {
		return problem.New(problem.PreconditionFailed, "apply is not offered: %s", why)
	}
	if *in.ProposalVersion != req.ProposalVersion || in.EffectDigest != req.Proposal.EffectDigest {
		return problem.New(problem.PreconditionFailed, "the proposal named by proposalVersion and effectDigest is not the current one")
	}
	if why := evidenceRefusal(e, req, w.Now()); why != "" {
		return problem.New(problem.PreconditionFailed, "apply is not offered: %s", why)
	}
	if err := checkManifest(e, req); err != nil {
		return err
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
			return fmt.Errorf("requests: frozen plan names unknown entity %q", wr.Target.Entity)
		}
		var rec *store.Record
		switch wr.Operation {
		case model.EffectCreate:
			stored, err := s.frozenValues(target, wr, map[string]any{}, created)
			if err != nil {
				return err
			}
			rid := uuid.NewString()
			j, err := s.records.Journal(c, grant, target, rid, stored)
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
			j, err := s.records.Journal(c, grant, target, rid, next)
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
			return nil, fmt.Errorf("requests: frozen plan names unknown field %s.%s", target.ID, field)
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
func (s *Service) actionOutcome(rec *store.Record, req *store.Request, actor string, rep records.Representation, snapshot string) (*store.Outcome, error) {
	doc := map[string]any{
		"id":             rec.ID,
		"revision":       rec.Revision,
		"snapshot":       snapshot,
		"request":        s.records.RequestCore(req),
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

// readBefore is what an action read and decided before its transaction:
// the request record and its workflow state, and a submit's plan.
type readBefore struct {
	rec  *store.Record
	req  *store.Request
	plan *planners.Plan
}

// beforeAction does what a submit, or an apply under an external review
// authority, needs before its transaction: it reads the stored outcome of
// the key (a replay is answered at once) with the request and its record
// in one round trip, checks them as the transaction will (admitAction),
// judges the input, then runs the planner or fetches the authority's
// result. The transaction checks again that nothing moved.
func (s *Service) beforeAction(ctx context.Context, c records.Call, e *model.Entity, id, action, ifMatch string, grant *access.Grant, idem *store.Idempotency, in ActionInput) (*records.Result, *readBefore, error) {
	stored, rec, req, err := s.store.ActionInputs(ctx, idem, e, id, action == records.ActionSubmit)
	switch {
	case err != nil && (stored == nil || !errors.Is(err, store.ErrNotFound)):
		return nil, nil, records.StoreRefusal(err)
	case err != nil:
		return nil, nil, err
	case stored != nil:
		return &records.Result{Status: stored.Status, ETag: stored.ETag, Body: stored.Body, Replayed: true}, nil, nil
	}
	if err := s.admitAction(e, rec, req, grant, action, ifMatch, c.Executor); err != nil {
		return nil, nil, err
	}
	if _, err := in.judge(action, grant.PrincipalReference); err != nil {
		return nil, nil, err
	}
	if action == records.ActionSubmit {
		plan, err := s.plan(ctx, grant, e, rec, req, ifMatch)
		if err != nil {
			return nil, nil, err
		}
		return nil, &readBefore{rec: rec, req: req, plan: plan}, nil
	}
	// The authority's result is fetched before the transaction (a network
	// call); the transaction then checks nothing moved.
	return nil, &readBefore{rec: rec, req: req}, s.checkEvidence(ctx, e, req)
}

// Options configure the change-request workflow.
type Options struct {
	// Records is the record kernel the workflow reads and writes through.
	// Required.
	Records *records.Service
	// Planners plan the submissions of request entities. Default none: a
	// submit of a request entity without a planner is refused.
	Planners *planners.Set
	// Review talks to the external review authorities of reviewed request
	// entities. Default none: a submission waits for no authority, and an
	// apply that needs one is refused.
	Review ReviewAuthorities
	// Content keeps attachment content. Default the database
	// (the kernel store's Content()).
	Content store.ContentStore
}

// Service serves the change-request workflow of one package.
type Service struct {
	records  *records.Service
	pkg      *model.Package
	store    *store.Store
	keys     records.Keys
	codec    *values.Codec
	planners *planners.Set
	review   ReviewAuthorities
	content  store.ContentStore
}

// New returns the change-request workflow over o.Records.
func New(o Options) (*Service, error) {
	if o.Records == nil {
		return nil, errors.New("requests: Options.Records is required")
	}
	k := o.Records
	content := o.Content
	if content == nil {
		content = k.Store().Content()
	}
	return &Service{records: k, pkg: k.Package(), store: k.Store(), keys: k.Keys(), codec: k.Codec(),
		planners: o.Planners, review: o.Review, content: content}, nil
}

// FrozenPlans reads frozen plans for the record kernel
// (records.FrozenPlans) with the planners' reader.
type FrozenPlans struct{}

// TargetEntities returns the entity each write of a frozen plan targets,
// in write order.
func (FrozenPlans) TargetEntities(frozen []byte) ([]string, error) {
	return planners.FrozenTargets(frozen)
}
