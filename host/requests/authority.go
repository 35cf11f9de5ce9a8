package requests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	case res.Status != records.ResultApproved:
		return problem.New(problem.PreconditionFailed, "apply is not offered: the review result is %s", res.Status)
	case res.AvailableUntil != nil && !res.AvailableUntil.After(time.Now()):
		return problem.New(problem.PreconditionFailed, "apply is not offered: the approval is no longer available")
	}
	return nil
}
