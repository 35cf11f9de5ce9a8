package records

import (
	"time"

	"github.com/registrum/registrum/model"
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

// ReviewOutcome is the review outcome of the request's current proposal as a
// read sees it: "" while none is settled; approvedExpired when an approval's
// availableUntil has passed by the database clock. Review mode none counts
// as approved once submitted.
func ReviewOutcome(e *model.Entity, req *store.Request) string {
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

// ReviseOffer says whether the outcome offers revise_request and with which
// rebase value (the outcome table of the specification).
func ReviseOffer(outcome string) (offered, rebase bool) {
	switch outcome {
	case ResultRejected:
		return false, false
	case ResultApproved, ResultAnswered, ResultCancelled, ResultSuperseded:
		return true, true
	}
	return true, false // none yet, changesRequested, approvedExpired
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
