package client

import (
	"context"
	"net/http"
	"net/url"
)

// TargetCondition is a record a patch effect of an immediate action would
// touch, with the ifMatch an invocation names for it.
type TargetCondition struct {
	Entity   string `json:"entity"`
	RecordID string `json:"recordId"`
	IfMatch  string `json:"ifMatch"`
}

// ActionEffect is what one effect of an invocation wrote.
type ActionEffect struct {
	Entity   string `json:"entity"`
	RecordID string `json:"recordId"`
	Revision int64  `json:"revision"`
}

// Invocation is the answer of an immediate action.
type Invocation struct {
	// Action is the action id; ApplicationID names this invocation.
	Action        string `json:"action"`
	ApplicationID string `json:"applicationId"`
	// Results are what each effect wrote.
	Results []ActionEffect `json:"results"`
	// Replayed is true when an Idempotency-Key replayed a stored answer.
	Replayed bool `json:"-"`
}

func actionPath(action string) string { return "/v1/actions/" + url.PathEscape(action) }

// TargetConditions asks which records the patch effects of an immediate
// action would touch for input, keyed by effect id, each with its ifMatch.
func (c *Client) TargetConditions(ctx context.Context, action string, input any, opts ...CallOption) (map[string]TargetCondition, error) {
	o := options(opts)
	b, err := jsonBody(map[string]any{"input": input})
	if err != nil {
		return nil, err
	}
	// A read in POST form: it writes nothing, so it is retried like a read.
	r := &request{method: http.MethodPost, path: actionPath(action) + "/target-conditions", body: b, ctype: "application/json", idempotent: true}
	resp, err := c.do(ctx, r, o.profile)
	if err != nil {
		return nil, err
	}
	var out struct {
		Preconditions map[string]TargetCondition `json:"preconditions"`
	}
	return out.Preconditions, decode(resp, &out)
}

// Invoke applies an immediate action's effects in one transaction, under
// preconditions (the ifMatch of each patch effect's target, from
// TargetConditions), with an Idempotency-Key (fresh unless given; the host
// requires one). A target that changed since is refused with
// precondition.failed and nothing written.
func (c *Client) Invoke(ctx context.Context, action string, input any, preconditions map[string]TargetCondition, opts ...CallOption) (*Invocation, error) {
	o := options(opts)
	pre := make(map[string]map[string]string, len(preconditions))
	for id, tc := range preconditions {
		pre[id] = map[string]string{"ifMatch": tc.IfMatch}
	}
	b, err := jsonBody(map[string]any{"input": input, "preconditions": pre})
	if err != nil {
		return nil, err
	}
	r := &request{method: http.MethodPost, path: actionPath(action), body: b, ctype: "application/json"}
	c.write(r, o)
	resp, err := c.do(ctx, r, o.profile)
	if err != nil {
		return nil, err
	}
	var out Invocation
	if err := decode(resp, &out); err != nil {
		return nil, err
	}
	out.Replayed = resp.header.Get("Idempotent-Replayed") == "true"
	return &out, nil
}
