package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Proposal is one retained proposal of a change request: an item of
// data.request.history.
type Proposal struct {
	ProposalVersion int64  `json:"proposalVersion"`
	EffectDigest    string `json:"effectDigest"`
	// Planner is "declarative" or the planner engine.
	Planner      string    `json:"planner"`
	ModuleDigest string    `json:"moduleDigest,omitempty"`
	SubmittedAt  time.Time `json:"submittedAt"`
	// DetailErased is true once an operator erased the proposal's payload;
	// Writes is then absent.
	DetailErased bool `json:"detailErased"`
	// Writes are the proposal's frozen writes, narrowed to what the
	// profile reads.
	Writes json.RawMessage `json:"writes,omitempty"`
	// Outcome is the review outcome, where the profile discloses review_state.
	Outcome string `json:"outcome,omitempty"`
}

// HistoryPage is one page of a change request's retained history.
type HistoryPage struct {
	Items []Proposal `json:"items"`
	// NextAfterProposalVersion continues the history (nil on the last
	// page); a page can be short (a byte budget) and still have a next one.
	NextAfterProposalVersion *int64 `json:"nextAfterProposalVersion"`
}

// HistoryPage decodes data.request.history of a change request read; nil
// when the read carried none.
func (r *Request) HistoryPage() (*HistoryPage, error) {
	if r == nil || len(r.History) == 0 || string(r.History) == "null" {
		return nil, nil
	}
	var h HistoryPage
	if err := json.Unmarshal(r.History, &h); err != nil {
		return nil, fmt.Errorf("client: data.request.history: %w", err)
	}
	return &h, nil
}

// historyPage reads the change request id of route with
// requestHistoryAfterProposalVersion after (0: the first page).
func (c *Client) historyPage(ctx context.Context, route, id string, after int64, o call) (*HistoryPage, error) {
	r := &request{method: http.MethodGet, path: itemPath(route, id)}
	if after > 0 {
		r.query = url.Values{"requestHistoryAfterProposalVersion": {strconv.FormatInt(after, 10)}}
	}
	resp, err := c.do(ctx, r, o.profile)
	if err != nil {
		return nil, err
	}
	rec, err := recordOf(resp)
	if err != nil {
		return nil, err
	}
	if rec.Request == nil {
		return nil, fmt.Errorf("client: %s/%s is not a change request", route, id)
	}
	h, err := rec.Request.HistoryPage()
	if err != nil {
		return nil, err
	}
	if h == nil {
		return &HistoryPage{}, nil
	}
	return h, nil
}

// RequestHistory iterates over the retained proposals of the change
// request id of route, oldest first: it reads the request, then follows
// data.request.history.nextAfterProposalVersion with the same access
// profile (requestHistoryAfterProposalVersion) until it is null. It stops
// at the first error, which it yields; a cursor that does not move forward
// is an error, so the iteration always ends.
func (c *Client) RequestHistory(ctx context.Context, route, id string, opts ...CallOption) iter.Seq2[Proposal, error] {
	o := options(opts)
	return func(yield func(Proposal, error) bool) {
		var after int64
		for {
			h, err := c.historyPage(ctx, route, id, after, o)
			if err != nil {
				yield(Proposal{}, err)
				return
			}
			for _, p := range h.Items {
				if !yield(p, nil) {
					return
				}
			}
			if h.NextAfterProposalVersion == nil {
				return
			}
			if *h.NextAfterProposalVersion <= after {
				yield(Proposal{}, fmt.Errorf("client: the history of %s/%s continues after %d, not after %d", route, id, *h.NextAfterProposalVersion, after))
				return
			}
			after = *h.NextAfterProposalVersion
		}
	}
}
