package requests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/store"
)

// Subject names what a submission asks the authority to review: one
// proposal of one request record of this registry, by its effect digest.
type Subject struct {
	Source  string `json:"source"`
	Type    string `json:"type"`
	ID      string `json:"id"`
	Version int64  `json:"version"`
	Digest  string `json:"digest"`
}

// Policy is the review policy an authority applied.
type Policy struct {
	ID      string `json:"id"`
	Version string `json:"version,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// AuthorityResult is a review result as the authority answers it.
type AuthorityResult struct {
	ResultID         string     `json:"resultId"`
	RequestID        string     `json:"requestId"`
	Subject          Subject    `json:"subject"`
	Policy           Policy     `json:"policy"`
	SubmissionDigest string     `json:"submissionDigest"`
	Status           string     `json:"status"`
	CompletedAt      time.Time  `json:"completedAt"`
	AvailableUntil   *time.Time `json:"availableUntil,omitempty"`
	// Stage is the review stage the authority reports the result settled
	// in (one of the entity's review.stages), "" when it names none.
	Stage string `json:"stage,omitempty"`
	// Raw is the document as received.
	Raw []byte `json:"-"`
}

// ReviewAuthorities are the external review authorities this host talks to.
type ReviewAuthorities interface {
	// Producer returns this registry's producer id with the authority and
	// how long a submission may take to settle; ok is false when the
	// authority is not configured on this host.
	Producer(authority string) (producerID string, recovery time.Duration, ok bool)
	// Result fetches the result the authority settled for its request
	// requestID; nil (and no error) while there is none.
	Result(ctx context.Context, authority, requestID string) (*AuthorityResult, error)
}

// Matches reports whether a result answers exactly the stored submission:
// the same authority request, subject, policy and submission digest.
func (r *AuthorityResult) Matches(sub *store.Submission) bool {
	var body struct {
		Subject Subject `json:"subject"`
	}
	if err := json.Unmarshal(sub.Body, &body); err != nil {
		return false
	}
	return r.RequestID == sub.AuthorityRequestID && r.Subject == body.Subject && r.Policy.ID == sub.PolicyID &&
		(sub.PolicyVersion == "" || r.Policy.Version == sub.PolicyVersion) && (sub.PolicyDigest == "" || r.Policy.Digest == sub.PolicyDigest) &&
		r.SubmissionDigest == sub.SubmissionDigest
}

// submission builds the submission of a frozen proposal: the exact body to
// send and the digest the authority must echo.
func (s *Service) submission(e *model.Entity, rec *store.Record, req *store.Request, effectDigest, actor string) (*store.Submission, error) {
	review := e.ChangeRequest.Review
	producer, recovery, ok := s.reviewProducer(review.Authority)
	if !ok {
		return nil, problem.New(problem.ServiceUnavailable, "the review authority %s is not configured on this host", review.Authority)
	}
	snapshot := map[string]any{}
	for _, f := range e.Fields {
		if v := rec.Values[f.ID]; v != nil {
			snapshot[f.ID] = values.Encode(f, v)
		}
	}
	body := map[string]any{
		"kind":               review.PolicyID,
		"subject":            Subject{Source: producer, Type: e.ID, ID: rec.ID, Version: req.ProposalVersion, Digest: effectDigest},
		"requesterReference": actor,
		"context":            map[string]any{"strategy": "submitted", "snapshot": snapshot},
	}
	if len(req.Proposal.Attachments) > 0 {
		// The frozen slot manifest is part of what the authority reviews.
		body["context"].(map[string]any)["attachments"] = json.RawMessage(req.Proposal.Attachments)
	}
	b, err := canonjson.Marshal(body)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return &store.Submission{
		Entity: e.ID, RecordID: rec.ID, ProposalVersion: req.ProposalVersion,
		Authority: review.Authority, PolicyID: review.PolicyID,
		Body: b, SubmissionDigest: "sha256:" + hex.EncodeToString(sum[:]),
		RecoveryDeadline: time.Now().Add(recovery),
	}, nil
}

func (s *Service) reviewProducer(authority string) (string, time.Duration, bool) {
	if s.review == nil {
		return "", 0, false
	}
	return s.review.Producer(authority)
}

// checkEvidence fetches the result of a submitted proposal from its
// authority, stores it when it answers the submission exactly (as the
// poller would: the first stored result is kept), and checks it is approved
// evidence still available by the service clock: apply is authoritative,
// whatever a read offered, and needs no poller to have stored the result
// first. It runs before the apply's transaction, with the authority's own
// network budget; the transaction decides again on the stored result with
// the service clock (evidenceRefusal) under its locks.
func (s *Service) checkEvidence(ctx context.Context, e *model.Entity, req *store.Request) error {
	if e.ChangeRequest.Review.Mode == model.ReviewNone {
		return nil
	}
	sub := req.Submission
	if sub == nil || sub.AuthorityRequestID == "" || s.review == nil {
		return problem.New(problem.PreconditionFailed, "apply is not offered: the review authority holds no submission of this proposal")
	}
	res, err := s.review.Result(ctx, sub.Authority, sub.AuthorityRequestID)
	if err != nil {
		return &problem.Error{Code: problem.ServiceUnavailable, Detail: "the review authority did not answer; try again", Cause: err}
	}
	switch {
	case res == nil:
		return problem.New(problem.PreconditionFailed, "apply is not offered: the review authority has settled no result")
	case !res.Matches(sub):
		return problem.New(problem.PreconditionFailed, "apply is not offered: the authority's result does not match the submission")
	}
	if err := s.storeResult(ctx, e, sub, res); err != nil {
		return err
	}
	switch {
	case res.Status != records.ResultApproved:
		return problem.New(problem.PreconditionFailed, "apply is not offered: the review result is %s", res.Status)
	case res.AvailableUntil != nil && !res.AvailableUntil.After(time.Now()):
		return problem.New(problem.PreconditionFailed, "apply is not offered: the approval is no longer available")
	}
	return nil
}

// evidenceRefusal reports why the stored review evidence of req does not
// allow apply by the service clock now, "" when it does: under review mode
// none nothing is needed; under an authority the result of the current
// proposal must be stored, approved, and available after now. Apply decides
// with it once it has fetched and stored the authority's result (apply is
// authoritative); reads decide with records.ReviewOutcome and the database clock.
func evidenceRefusal(e *model.Entity, req *store.Request, now time.Time) string {
	if e.ChangeRequest.Review.Mode == model.ReviewNone {
		return ""
	}
	r := req.Result
	switch {
	case r == nil:
		return "the review authority has settled no result"
	case r.Status != records.ResultApproved:
		return "the review result is " + r.Status
	case r.AvailableUntil != nil && !r.AvailableUntil.After(now):
		return "the approval is no longer available"
	}
	return ""
}

// reviewStage is the review stage the authority reported with the result
// of req's current proposal, "" when none is known: lifecycle events carry
// it as their stage.
func reviewStage(req *store.Request) string {
	if req.Result == nil {
		return ""
	}
	return req.Result.Stage
}

// TransitionReview is the lifecycle transition of a review result the
// authority settled for a submitted proposal: the request stays submitted,
// and the event carries the stage the authority reported.
const TransitionReview = "review"

// storeResult keeps a result that matches sub exactly, in one transaction
// with what follows from it when this call is the one that stores it and
// the proposal is still the request's current, submitted one: the review
// lifecycle event (transition review, submitted to submitted, with the
// authority's stage), and for an approval under automatic application the
// executor's apply job. The poller and apply both store results through
// it, so each result has exactly one of each.
func (s *Service) storeResult(ctx context.Context, e *model.Entity, sub *store.Submission, res *AuthorityResult) error {
	_, _, err := s.store.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		rec, req, err := w.LockWithRequest(ctx, e, sub.RecordID)
		if err != nil {
			return nil, err
		}
		stored, err := w.StoreResult(ctx, sub.Entity, sub.RecordID, sub.ProposalVersion, &store.ReviewResult{
			ResultID: res.ResultID, Status: res.Status, CompletedAt: res.CompletedAt, AvailableUntil: res.AvailableUntil, Stage: res.Stage, Body: res.Raw,
		})
		if err != nil || !stored || req.State != store.RequestSubmitted || req.ProposalVersion != sub.ProposalVersion {
			return &store.Outcome{}, err
		}
		lc := &store.Lifecycle{Transition: TransitionReview, FromState: req.State, ToState: req.State, ProposalVersion: req.ProposalVersion, Stage: res.Stage}
		if req.Proposal != nil {
			lc.EffectDigest = req.Proposal.EffectDigest
		}
		if err := w.Capture(ctx, store.Change{Entity: e, Trigger: model.TriggerRequestLifecycle, After: rec, Lifecycle: lc}); err != nil {
			return nil, err
		}
		if res.Status == records.ResultApproved && e.ChangeRequest.Application.Mode == model.ApplyAutomatic {
			if err := queueAutoApply(ctx, w, req); err != nil {
				return nil, err
			}
		}
		return &store.Outcome{}, nil
	})
	if err != nil {
		return fmt.Errorf("review: store the result of %s/%s: %w", e.ID, sub.RecordID, err)
	}
	return nil
}

// checkManifest binds the attachments to what apply writes: the slots of
// the proposal being applied must still give the manifest frozen at submit
// (every slot's hash, size, media type and verification). Under review mode
// none nothing else binds them; under an authority they are also part of
// the reviewed submission. A slot erased, replaced or re-verified since
// refuses the apply.
func checkManifest(e *model.Entity, req *store.Request) error {
	if len(e.Attachments) == 0 {
		return nil
	}
	if req.Proposal == nil || len(req.Proposal.Attachments) == 0 {
		return nil // a proposal frozen before manifests were bound
	}
	now, err := attachmentManifest(e, req)
	if err != nil {
		return problem.New(problem.PreconditionFailed, "the attachments of the proposal no longer match the manifest frozen at submit; revise the request")
	}
	// The database keeps the frozen manifest as jsonb, which writes it
	// back in its own layout: compare canonical forms.
	frozen, err := canonjson.Transform(req.Proposal.Attachments)
	if err != nil {
		return fmt.Errorf("requests: frozen attachment manifest of %s: %w", req.RecordID, err)
	}
	if !bytes.Equal(now, frozen) {
		return problem.New(problem.PreconditionFailed, "the attachments of the proposal no longer match the manifest frozen at submit; revise the request")
	}
	return nil
}
