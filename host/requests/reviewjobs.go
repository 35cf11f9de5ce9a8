package requests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/sdk/tokensource"
	"github.com/registrum/registrum/store"
)

// Attention codes: why a request needs an operator (recovery.state
// operatorAttention).
const (
	AttentionSubmissionRefused   = "submission_refused"
	AttentionSubmissionUnmatched = "submission_unmatched"
	AttentionResultUnmatched     = "result_unmatched"
	AttentionExhausted           = "recovery_deadline_passed"
	AttentionExecutorMissing     = "executor_not_configured"
	AttentionApplyRefused        = "automatic_apply_refused"
	AttentionWithdrawalFailed    = "withdrawal_failed"
)

// Workers runs the change-request jobs of one host.
type Workers struct {
	store       *store.Store
	svc         *records.Service
	requests    *Service
	authorities *Authorities
	executors   map[string]*executor
	log         *slog.Logger
}

type executor struct {
	id     string
	cfg    *config.Executor
	tokens *tokensource.Source
}

// RegisterReviewWorkers returns the change-request workers and registers them in w.
func RegisterReviewWorkers(w *river.Workers, cfg *config.Config, st *store.Store, reqs *Service, a *Authorities, log *slog.Logger) (*Workers, error) {
	ws := &Workers{store: st, svc: reqs.records, requests: reqs, authorities: a, executors: map[string]*executor{}, log: log}
	for id, x := range cfg.Executors {
		ts, err := tokenSource(cfg, x.Client)
		if err != nil {
			return nil, fmt.Errorf("review: executor %s: %w", id, err)
		}
		ws.executors[id] = &executor{id: id, cfg: x, tokens: ts}
	}
	if err := river.AddWorkerSafely(w, &submitWorker{ws: ws}); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(w, &pollWorker{ws: ws}); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(w, &applyWorker{ws: ws}); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(w, &withdrawWorker{ws: ws}); err != nil {
		return nil, err
	}
	return ws, nil
}

// onePerProposal makes one job of a kind per proposal at a time (a job's
// arguments name the proposal).
var onePerProposal = &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}

type submitWorker struct {
	river.WorkerDefaults[store.ReviewSubmitArgs]
	ws *Workers
}

// Work sends the submission once: an accepted one only schedules its poll
// (a host that died after the authority accepted it finds it so).
func (w *submitWorker) Work(ctx context.Context, job *river.Job[store.ReviewSubmitArgs]) error {
	ws := w.ws
	sub, err := ws.store.Submission(ctx, job.Args.RequestJob)
	if err != nil {
		return err
	}
	switch sub.State {
	case store.SubmissionFailed, store.SubmissionCancelled, store.SubmissionCancelling:
		// Failed, or withdrawn (a withdrawal before the send is settled
		// by the withdrawal job): nothing to send.
		return nil
	case store.SubmissionAccepted:
		return ws.store.Enqueue(ctx, store.ReviewPollArgs{RequestJob: sub.RequestJob}, onePerProposal)
	}
	au, ok := ws.authorities.byID[sub.Authority]
	if !ok {
		return fmt.Errorf("review: authority %s is not configured on this host", sub.Authority)
	}
	acc, err := au.submit(ctx, sub)
	switch {
	case errors.Is(err, errRefused):
		sub.State, sub.Attention = store.SubmissionFailed, AttentionSubmissionRefused
		return ws.store.UpdateSubmission(ctx, sub)
	case err != nil:
		sub.State = store.SubmissionUncertain
		if time.Now().After(sub.RecoveryDeadline) {
			sub.State, sub.DeliveryState, sub.Attention = store.SubmissionFailed, store.DeliveryExhausted, AttentionExhausted
			return ws.store.UpdateSubmission(ctx, sub)
		}
		if uerr := ws.store.UpdateSubmission(ctx, sub); uerr != nil {
			return uerr
		}
		return err // River retries with backoff
	}
	var body struct {
		Subject Subject `json:"subject"`
	}
	_ = json.Unmarshal(sub.Body, &body)
	if acc.SubmissionDigest != sub.SubmissionDigest || acc.Subject != body.Subject || acc.Policy.ID != sub.PolicyID {
		sub.State, sub.Attention = store.SubmissionFailed, AttentionSubmissionUnmatched
		return ws.store.UpdateSubmission(ctx, sub)
	}
	sub.State, sub.AuthorityRequestID, sub.PolicyVersion, sub.PolicyDigest = store.SubmissionAccepted, acc.RequestID, acc.Policy.Version, acc.Policy.Digest
	if err := ws.store.UpdateSubmission(ctx, sub); err != nil {
		return err
	}
	if sub.State == store.SubmissionCancelling {
		// The request was cancelled while this submission was on its way:
		// the authority now holds a request to cancel.
		return ws.store.Enqueue(ctx, store.ReviewWithdrawArgs{RequestJob: sub.RequestJob}, onePerProposal)
	}
	return ws.store.Enqueue(ctx, store.ReviewPollArgs{RequestJob: sub.RequestJob}, onePerProposal)
}

type pollWorker struct {
	river.WorkerDefaults[store.ReviewPollArgs]
	ws *Workers
}

// Work pulls the result; until there is one it snoozes for the authority's
// poll interval. A result is stored only when it matches the submission
// exactly; an approved one of an automatic request schedules the apply.
func (w *pollWorker) Work(ctx context.Context, job *river.Job[store.ReviewPollArgs]) error {
	ws := w.ws
	sub, err := ws.store.Submission(ctx, job.Args.RequestJob)
	if err != nil {
		return err
	}
	if sub.AuthorityRequestID == "" || sub.DeliveryState != store.DeliveryPolling ||
		sub.State == store.SubmissionCancelling || sub.State == store.SubmissionCancelled {
		return nil
	}
	au, ok := ws.authorities.byID[sub.Authority]
	if !ok {
		return fmt.Errorf("review: authority %s is not configured on this host", sub.Authority)
	}
	res, err := ws.authorities.Result(ctx, sub.Authority, sub.AuthorityRequestID)
	if err != nil {
		return err
	}
	if res == nil {
		if time.Now().After(sub.RecoveryDeadline) {
			sub.DeliveryState, sub.Attention = store.DeliveryExhausted, AttentionExhausted
			return ws.store.UpdateSubmission(ctx, sub)
		}
		return river.JobSnooze(time.Duration(au.cfg.PollSeconds) * time.Second)
	}
	if !res.Matches(sub) {
		sub.DeliveryState, sub.Attention = store.DeliveryUnmatched, AttentionResultUnmatched
		return ws.store.UpdateSubmission(ctx, sub)
	}
	e := ws.svc.Package().EntityByID(sub.Entity)
	if e == nil || e.ChangeRequest == nil {
		return nil
	}
	// Stored with its lifecycle event and, for an approval applied
	// automatically, the executor's apply job: in one transaction.
	return ws.requests.storeResult(ctx, e, sub, res)
}

// queueAutoApply queues, in w's transaction, the automatic application of
// req's current proposal by its executor: the row that reports it queued
// and the apply job, once per proposal (a second call does nothing).
func queueAutoApply(ctx context.Context, w *store.Writer, req *store.Request) error {
	j := store.RequestJob{Entity: req.EntityID, RecordID: req.RecordID, ProposalVersion: req.ProposalVersion}
	queued, err := w.QueueAutoApplication(ctx, j)
	if err != nil || !queued {
		return err
	}
	req.AutoApplication = &store.AutoApplication{State: store.AutoQueued}
	return w.Enqueue(ctx, store.RequestApplyArgs{RequestJob: j}, onePerProposal)
}

type withdrawWorker struct {
	river.WorkerDefaults[store.ReviewWithdrawArgs]
	ws *Workers
}

// Work tells the authority that a cancelled request's submission is
// withdrawn. A submission never accepted has nothing to withdraw (should
// its acceptance still arrive, the submit job records it and enqueues this
// job again); an accepted one is cancelled at the authority, retried with
// River's backoff until the authority answers or the recovery deadline
// passes (then an operator is needed).
func (w *withdrawWorker) Work(ctx context.Context, job *river.Job[store.ReviewWithdrawArgs]) error {
	ws := w.ws
	sub, err := ws.store.Submission(ctx, job.Args.RequestJob)
	if err != nil {
		return err
	}
	if sub.State != store.SubmissionCancelling {
		return nil
	}
	if sub.AuthorityRequestID == "" {
		return ws.store.SubmissionWithdrawn(ctx, sub.RequestJob)
	}
	au, ok := ws.authorities.byID[sub.Authority]
	if !ok {
		return fmt.Errorf("review: authority %s is not configured on this host", sub.Authority)
	}
	if err := au.withdraw(ctx, sub); err != nil {
		if time.Now().After(sub.RecoveryDeadline) {
			sub.Attention = AttentionWithdrawalFailed
			return ws.store.UpdateSubmission(ctx, sub)
		}
		return err // River retries with backoff
	}
	return ws.store.SubmissionWithdrawn(ctx, sub.RequestJob)
}

type applyWorker struct {
	river.WorkerDefaults[store.RequestApplyArgs]
	ws *Workers
}

// Work applies an approved proposal as its executor: a token of the
// executor's own client, its access profile, and the apply action with a
// key that stays the same on every retry (a retry after a crash replays).
// The application is applying from the job's first start; a refusal (which
// retrying cannot change) blocks it for an operator, a passing failure
// leaves it applying while River retries.
func (w *applyWorker) Work(ctx context.Context, job *river.Job[store.RequestApplyArgs]) error {
	ws := w.ws
	args := job.Args.RequestJob
	e := ws.svc.Package().EntityByID(args.Entity)
	if e == nil || e.ChangeRequest == nil {
		return nil
	}
	req, err := ws.store.Request(ctx, e, args.RecordID)
	if err != nil {
		return err
	}
	if req.State != store.RequestSubmitted || req.Proposal == nil || req.ProposalVersion != args.ProposalVersion {
		return nil // done, or another proposal is current
	}
	state, err := ws.store.StartAutoApplication(ctx, args)
	if err != nil {
		return err
	}
	if state != store.AutoApplying {
		return nil // blocked: an operator decides
	}
	attention := func(code string) error { return ws.store.BlockAutoApplication(ctx, args, code) }
	x, ok := ws.executors[e.ChangeRequest.Application.Executor]
	if !ok {
		return attention(AttentionExecutorMissing)
	}
	tok, err := x.tokens.Token(ctx)
	if err != nil {
		return err
	}
	call := records.Call{TraceID: records.TraceIDOf(ctx), Bearer: tok.AccessToken, Profile: x.cfg.AccessProfile, Representation: records.JSON,
		IdempotencyKey: fmt.Sprintf("registrum-automatic-apply:%s:%s:%d", args.Entity, args.RecordID, args.ProposalVersion), Executor: x.id}
	read, err := ws.svc.Get(ctx, call, e, args.RecordID)
	if err != nil {
		return classify(err, attention)
	}
	body, _ := json.Marshal(map[string]any{"actorReference": "executor:" + x.id, "proposalVersion": args.ProposalVersion, "effectDigest": req.Proposal.EffectDigest})
	_, err = ws.requests.Act(ctx, call, e, args.RecordID, records.ActionApply, read.ETag, body)
	if err != nil {
		return classify(err, attention)
	}
	return nil
}

// classify turns an apply refusal into operator attention (it will not
// change by retrying) and leaves other errors to River's retries.
func classify(err error, attention func(string) error) error {
	var pe *problem.Error
	if errors.As(err, &pe) && pe.Code != problem.ServiceUnavailable && pe.Code != problem.Internal {
		return attention(AttentionApplyRefused)
	}
	return err
}
