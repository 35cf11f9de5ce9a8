package records

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/store"
)

// Review result statuses an authority settles, and the read-side outcome of
// an approval whose availability passed.
const (
	ResultApproved         = "approved"
	ResultRejected         = "rejected"
	ResultChangesRequested = "changesRequested"
	ResultAnswered         = "answered"
	ResultCancelled        = "cancelled"
	ResultSuperseded       = "superseded"
	outcomeApprovedExpired = "approvedExpired"
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

// UseReview gives the service its review authorities.
func (s *Service) UseReview(a ReviewAuthorities) { s.review = a }

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
		RequestJob: store.RequestJob{Entity: e.ID, RecordID: rec.ID, ProposalVersion: req.ProposalVersion},
		Authority:  review.Authority, PolicyID: review.PolicyID,
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

// outcome is the review outcome of the request's current proposal as a
// read sees it: "" while none is settled; approvedExpired when an approval's
// availableUntil has passed by the database clock. Review mode none counts
// as approved once submitted.
func outcome(e *model.Entity, req *store.Request) string {
	if req.State != store.RequestSubmitted {
		return ""
	}
	if e.ChangeRequest.Review.Mode == model.ReviewNone {
		return ResultApproved
	}
	r := req.Result
	if r == nil {
		return ""
	}
	if r.Status == ResultApproved && r.AvailableUntil != nil && !r.AvailableUntil.After(req.DBNow) {
		return outcomeApprovedExpired
	}
	return r.Status
}

// reviseOffer says whether the outcome offers revise_request and with which
// rebase value (the outcome table of the specification).
func reviseOffer(outcome string) (offered, rebase bool) {
	switch outcome {
	case ResultRejected:
		return false, false
	case ResultApproved, ResultAnswered, ResultCancelled, ResultSuperseded:
		return true, true
	}
	return true, false // none yet, changesRequested, approvedExpired
}

// checkEvidence fetches the result of a submitted proposal from its
// authority and checks it is exact approved evidence that is still
// available by the service clock: apply is authoritative, whatever a read
// offered.
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
	case res.Status != ResultApproved:
		return problem.New(problem.PreconditionFailed, "apply is not offered: the review result is %s", res.Status)
	case res.AvailableUntil != nil && !res.AvailableUntil.After(time.Now()):
		return problem.New(problem.PreconditionFailed, "apply is not offered: the approval is no longer available")
	}
	return nil
}

// reviewView is data.request.review: the submission, the result, its
// delivery, the application and whether an operator is needed.
func reviewView(e *model.Entity, req *store.Request) map[string]any {
	cr := e.ChangeRequest
	view := map[string]any{
		"application": map[string]any{"mode": cr.Application.Mode, "state": applicationState(e, req)},
		"recovery":    map[string]any{"state": "none"},
	}
	if sub := req.Submission; sub != nil {
		s := map[string]any{"state": sub.State, "authority": sub.Authority, "submissionDigest": sub.SubmissionDigest}
		policy := map[string]any{"id": sub.PolicyID}
		if sub.AuthorityRequestID != "" {
			s["requestId"] = sub.AuthorityRequestID
		}
		if sub.PolicyVersion != "" {
			policy["version"] = sub.PolicyVersion
		}
		if sub.PolicyDigest != "" {
			policy["digest"] = sub.PolicyDigest
		}
		s["policy"] = policy
		view["submission"] = s
		view["delivery"] = map[string]any{"state": sub.DeliveryState}
		if sub.Attention != "" {
			view["recovery"] = map[string]any{"state": "operatorAttention", "code": sub.Attention}
		}
	}
	if r := req.Result; r != nil {
		res := map[string]any{"state": r.Status, "resultId": r.ResultID, "completedAt": r.CompletedAt.Format(time.RFC3339Nano)}
		if r.AvailableUntil != nil {
			res["availableUntil"] = r.AvailableUntil.Format(time.RFC3339Nano)
		}
		view["result"] = res
	}
	return view
}
