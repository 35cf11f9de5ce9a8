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

// reviewView is data.request.review: the submission, the result (with the
// stage the authority reported), its delivery (receivedAt once stored), the
// application and whether an operator is needed (a submission's, or the
// automatic application's).
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
		delivery := map[string]any{"state": sub.DeliveryState}
		if r := req.Result; r != nil {
			delivery["receivedAt"] = r.ReceivedAt.Format(time.RFC3339Nano)
		}
		view["delivery"] = delivery
		if sub.Attention != "" {
			view["recovery"] = map[string]any{"state": "operatorAttention", "code": sub.Attention}
		}
	}
	if a := req.AutoApplication; a != nil && a.Attention != "" && req.State == store.RequestSubmitted {
		view["recovery"] = map[string]any{"state": "operatorAttention", "code": a.Attention}
	}
	if r := req.Result; r != nil {
		res := map[string]any{"state": r.Status, "resultId": r.ResultID, "completedAt": r.CompletedAt.Format(time.RFC3339Nano)}
		if r.AvailableUntil != nil {
			res["availableUntil"] = r.AvailableUntil.Format(time.RFC3339Nano)
		}
		if r.Stage != "" {
			res["stage"] = r.Stage
		}
		view["result"] = res
	}
	return view
}

// applicationState is review.application.state, for the current proposal
// (docs/decisions/change-requests.md, "Review application states"):
// applied once applied; blocked for a draft or cancelled request; for a
// submitted one, applying while the executor's apply runs (whatever the
// clock says since), else expired when an approval's availableUntil passed
// by the database clock (also over queued and blocked), else blocked when
// an automatic apply was refused, awaitingReview without a result, ready
// (manual) or queued (automatic) when approved, blocked for any other
// result.
func applicationState(e *model.Entity, req *store.Request) string {
	if req.State == store.RequestApplied {
		return "applied"
	}
	if req.State != store.RequestSubmitted {
		return "blocked"
	}
	auto := req.AutoApplication
	if auto != nil && auto.State == store.AutoApplying {
		return "applying"
	}
	outcome := ReviewOutcome(e, req)
	switch {
	case outcome == outcomeApprovedExpired:
		return "expired"
	case auto != nil && auto.State == store.AutoBlocked:
		return "blocked"
	case outcome == "":
		return "awaitingReview"
	case outcome == ResultApproved && e.ChangeRequest.Application.Mode == model.ApplyAutomatic:
		return "queued"
	case outcome == ResultApproved:
		return "ready"
	}
	return "blocked"
}
