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

// Job kinds: the post-commit work of change requests. The kind strings are
// stored with the jobs in the database (and name the jobs' spans and
// metrics); never change them, or the jobs already queued stop running.
const (
	KindReviewSubmit   = "registrum.review.submit"
	KindReviewPoll     = "registrum.review.poll"
	KindRequestApply   = "registrum.request.apply"
	KindReviewWithdraw = "registrum.review.withdraw"
)

// RequestJob names one proposal of a request record: all a change-request
// job carries. Its JSON members are stored with the jobs; never rename them.
type RequestJob struct {
	Entity          string `json:"entity"`
	RecordID        string `json:"recordId"`
	ProposalVersion int64  `json:"proposalVersion"`
}

// jobOf names the proposal of a submission.
func jobOf(sub *store.Submission) RequestJob {
	return RequestJob{Entity: sub.Entity, RecordID: sub.RecordID, ProposalVersion: sub.ProposalVersion}
}

// submission reads the submission of the job's proposal.
func (j RequestJob) submission(ctx context.Context, st *store.Store) (*store.Submission, error) {
	return st.Submission(ctx, j.Entity, j.RecordID, j.ProposalVersion)
}

// ReviewSubmitArgs sends a proposal's submission to its review authority.
type ReviewSubmitArgs struct{ RequestJob }

// Kind implements river.JobArgs.
func (ReviewSubmitArgs) Kind() string { return KindReviewSubmit }

// ReviewPollArgs pulls the authority's result of a proposal.
type ReviewPollArgs struct{ RequestJob }

// Kind implements river.JobArgs.
func (ReviewPollArgs) Kind() string { return KindReviewPoll }

// ReviewWithdrawArgs tells the review authority that a proposal's
// submission is withdrawn (its request was cancelled while under review).
type ReviewWithdrawArgs struct{ RequestJob }

// Kind implements river.JobArgs.
func (ReviewWithdrawArgs) Kind() string { return KindReviewWithdraw }

// RequestApplyArgs applies an approved proposal by its executor.
type RequestApplyArgs struct{ RequestJob }

// Kind implements river.JobArgs.
func (RequestApplyArgs) Kind() string { return KindRequestApply }

// onePerProposal makes one job of a kind per proposal at a time (a job's
// arguments name the proposal).
var onePerProposal = &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}

type submitWorker struct {
	river.WorkerDefaults[ReviewSubmitArgs]
	ws *Workers
}

// Work sends the submission once: an accepted one only schedules its poll
// (a host that died after the authority accepted it finds it so).
func (w *submitWorker) Work(ctx context.Context, job *river.Job[ReviewSubmitArgs]) error {
	ws := w.ws
	sub, err := job.Args.submission(ctx, ws.store)
	if err != nil {
		return err
	}
	switch sub.State {
	case store.SubmissionFailed, store.SubmissionCancelled, store.SubmissionCancelling:
		// Failed, or withdrawn (a withdrawal before the send is settled
		// by the withdrawal job): nothing to send.
		return nil
	case store.SubmissionAccepted:
		return ws.store.Enqueue(ctx, ReviewPollArgs{RequestJob: jobOf(sub)}, onePerProposal)
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
		return ws.store.Enqueue(ctx, ReviewWithdrawArgs{RequestJob: jobOf(sub)}, onePerProposal)
	}
	return ws.store.Enqueue(ctx, ReviewPollArgs{RequestJob: jobOf(sub)}, onePerProposal)
}

type pollWorker struct {
	river.WorkerDefaults[ReviewPollArgs]
	ws *Workers
}

// Work pulls the result; until there is one it snoozes for the authority's
// poll interval. A result is stored only when it matches the submission
// exactly; an approved one of an automatic request schedules the apply.
func (w *pollWorker) Work(ctx context.Context, job *river.Job[ReviewPollArgs]) error {
	ws := w.ws
	sub, err := job.Args.submission(ctx, ws.store)
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
	queued, err := w.QueueAutoApplication(ctx, req.EntityID, req.RecordID, req.ProposalVersion)
	if err != nil || !queued {
		return err
	}
	req.AutoApplication = &store.AutoApplication{State: store.AutoQueued}
	j := RequestJob{Entity: req.EntityID, RecordID: req.RecordID, ProposalVersion: req.ProposalVersion}
	return w.Enqueue(ctx, RequestApplyArgs{RequestJob: j}, onePerProposal)
}

type withdrawWorker struct {
	river.WorkerDefaults[ReviewWithdrawArgs]
	ws *Workers
}

// Work tells the authority that a cancelled request's submission is
// withdrawn. A submission never accepted has nothing to withdraw (should
// its acceptance still arrive, the submit job records it and enqueues this
// job again); an accepted one is cancelled at the authority, retried with
// River's backoff until the authority answers or the recovery deadline
// passes (then an operator is needed).
func (w *withdrawWorker) Work(ctx context.Context, job *river.Job[ReviewWithdrawArgs]) error {
	ws := w.ws
	sub, err := job.Args.submission(ctx, ws.store)
	if err != nil {
		return err
	}
	if sub.State != store.SubmissionCancelling {
		return nil
	}
	if sub.AuthorityRequestID == "" {
		return ws.store.SubmissionWithdrawn(ctx, sub.Entity, sub.RecordID, sub.ProposalVersion)
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
	return ws.store.SubmissionWithdrawn(ctx, sub.Entity, sub.RecordID, sub.ProposalVersion)
}

type applyWorker struct {
	river.WorkerDefaults[RequestApplyArgs]
	ws *Workers
}

// Work applies an approved proposal as its executor: a token of the
// executor's own client, its access profile, and the apply action with a
// key that stays the same on every retry (a retry after a crash replays).
// The application is applying from the job's first start; a refusal (which
// retrying cannot change) blocks it for an operator, a passing failure
// leaves it applying while River retries.
func (w *applyWorker) Work(ctx context.Context, job *river.Job[RequestApplyArgs]) error {
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
	state, err := ws.store.StartAutoApplication(ctx, args.Entity, args.RecordID, args.ProposalVersion)
	if err != nil {
		return err
	}
	if state != store.AutoApplying {
		return nil // blocked: an operator decides
	}
	attention := func(code string) error {
		return ws.store.BlockAutoApplication(ctx, args.Entity, args.RecordID, args.ProposalVersion, code)
	}
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
	in := ApplyInput{ActorReference: "executor:" + x.id, ProposalVersion: args.ProposalVersion, EffectDigest: req.Proposal.EffectDigest}
	_, err = ws.requests.Act(ctx, call, e, args.RecordID, records.ActionApply, read.ETag, in.Input())
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
