package requests

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/strictjson"
)

// Bounds of action bodies.
const (
	// MaxActorReferenceBytes bounds actorReference.
	MaxActorReferenceBytes = 256
	// MaxReasonCharacters bounds an apply's reason (Unicode characters).
	MaxReasonCharacters = 4096
)

// ActionInput is what a change-request action (Service.Act) acts on: the
// body the edge received (ReceivedBody), or an input built in Go
// (ApplyInput.Input). Either is judged at the same point of the action,
// only once the caller's grant, the request's visibility and row
// boundary, If-Match, ownership and the action's offer are decided, and by
// the same rules. The zero value is an empty body.
type ActionInput struct {
	body  records.Body
	apply *ApplyInput
}

// ReceivedBody returns the input of an action's body as the edge received
// it, not yet judged: the room parses it once access is decided.
func ReceivedBody(b records.Body) ActionInput { return ActionInput{body: b} }

// ApplyInput is an apply built in Go, without a JSON body: the automatic
// application's executor names the proposal it applies. Its fields are the
// members of an apply body and obey the same rules as a parsed body's:
// ActorReference 1 to MaxActorReferenceBytes bytes of UTF-8 without
// control characters ("" for none: the caller's principal reference is
// recorded, as for a body without actorReference), ProposalVersion a
// positive integer, EffectDigest not empty, Reason (nil for none) at most
// MaxReasonCharacters characters without NUL.
type ApplyInput struct {
	// ActorReference is the actor recorded with the apply, "" for the
	// caller's principal reference.
	ActorReference string
	// ProposalVersion and EffectDigest name the proposal applied: the one
	// the read that offered apply showed.
	ProposalVersion int64
	EffectDigest    string
	// Reason is the apply's reason, nil for none.
	Reason *string
}

// Input returns a as the input of an apply.
func (a ApplyInput) Input() ActionInput { return ActionInput{apply: &a} }

// binding returns what the action's idempotency binding covers: the body
// as received, or, for an ApplyInput, the canonical JSON of the apply body
// carrying its members (what the executor sent as a body before it built
// an ApplyInput, so that the key of an application queued then still
// replays). Computing it judges nothing.
func (in ActionInput) binding() ([]byte, error) {
	a := in.apply
	if a == nil {
		return in.body.Received(), nil
	}
	body := map[string]any{"effectDigest": a.EffectDigest, "proposalVersion": a.ProposalVersion}
	if a.ActorReference != "" {
		body["actorReference"] = a.ActorReference
	}
	if a.Reason != nil {
		body["reason"] = *a.Reason
	}
	b, err := canonjson.Marshal(body)
	if err != nil {
		return nil, problem.New(problem.RequestInvalid, "the apply's members cannot be written as JSON (a string that is not UTF-8)")
	}
	return b, nil
}

// judge returns the action's input as the action uses it, principal being
// the caller's keyed principal reference. Call it only once access, the
// request's visibility, If-Match, ownership and the action's offer are
// decided.
func (in ActionInput) judge(action, principal string) (*actionBody, error) {
	a := in.apply
	if a == nil {
		return parseActionBody(action, in.body, principal)
	}
	if action != records.ActionApply {
		return nil, problem.New(problem.RequestInvalid, "an apply's input was given to a %s", action)
	}
	out := &actionBody{ActorReference: principal}
	if a.ActorReference != "" {
		if err := checkActorReference(a.ActorReference); err != nil {
			return nil, err
		}
		out.ActorReference = a.ActorReference
	}
	if err := checkProposal(a.ProposalVersion, a.EffectDigest); err != nil {
		return nil, err
	}
	version := a.ProposalVersion
	out.ProposalVersion, out.EffectDigest = &version, a.EffectDigest
	if a.Reason != nil {
		if err := checkReason(*a.Reason); err != nil {
			return nil, err
		}
		reason := *a.Reason
		out.Reason = &reason
	}
	return out, nil
}

// actionBody is a judged action input.
type actionBody struct {
	// ActorReference is the actor recorded with the action and returned
	// in its response: the body's actorReference, else the caller's keyed
	// principal reference.
	ActorReference string
	// Rebase is a revise's rebase: the body's, else the value the offered
	// revise_request carries (set by Act once the request is locked).
	Rebase          *bool
	ProposalVersion *int64
	EffectDigest    string
	Reason          *string
}

// parseActionBody judges an action body, once the caller's access to the
// request and the action's offer are decided: a JSON object whose members
// are those of the action. The specification names no member of submit,
// revise or cancel; each body may carry an actorReference, recorded with
// the action (principal, the caller's keyed principal reference, when it
// is absent), a revise its rebase (the offered value when absent), and an
// apply names the proposal with proposalVersion and effectDigest and may
// give a reason. The members' values obey the rules an ApplyInput obeys
// (checkActorReference, checkProposal, checkReason).
func parseActionBody(action string, in records.Body, principal string) (*actionBody, error) {
	body, err := in.Bytes()
	if err != nil {
		return nil, err
	}
	top, err := records.ActionBodyObject(body, "the body must be a JSON object")
	if err != nil {
		return nil, err
	}
	allowed := map[string]bool{"actorReference": true}
	switch action {
	case records.ActionRevise:
		allowed["rebase"] = true
	case records.ActionApply:
		allowed["proposalVersion"], allowed["effectDigest"], allowed["reason"] = true, true, true
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if !allowed[k] {
			return nil, problem.At(problem.RequestInvalid, strictjson.Pointer(k), "unknown member %q: not a member of a %s body", k, action)
		}
	}
	out := &actionBody{ActorReference: principal}
	if raw, present := top["actorReference"]; present {
		actor, ok := raw.(string)
		if !ok {
			return nil, problem.At(problem.RequestInvalid, "/actorReference", "actorReference, when sent, is a string naming who acts")
		}
		if err := checkActorReference(actor); err != nil {
			return nil, err
		}
		out.ActorReference = actor
	}
	if raw, present := top["rebase"]; present && action == records.ActionRevise {
		b, ok := raw.(bool)
		if !ok {
			return nil, problem.At(problem.RequestInvalid, "/rebase", "rebase, when sent, is true or false, as the offered revise_request says")
		}
		out.Rebase = &b
	}
	if action == records.ActionApply {
		n, isNumber := top["proposalVersion"].(json.Number)
		v, err := strconv.ParseInt(string(n), 10, 64)
		if !isNumber || err != nil {
			v = 0 // not a positive integer: refused as one
		}
		d, _ := top["effectDigest"].(string)
		if err := checkProposal(v, d); err != nil {
			return nil, err
		}
		out.ProposalVersion, out.EffectDigest = &v, d
		if raw, present := top["reason"]; present {
			r, ok := raw.(string)
			if !ok {
				return nil, problem.At(problem.RequestInvalid, "/reason", "reason must be a string")
			}
			if err := checkReason(r); err != nil {
				return nil, err
			}
			out.Reason = &r
		}
	}
	return out, nil
}

// checkActorReference holds an actorReference to its rules: 1 to
// MaxActorReferenceBytes bytes of UTF-8 without control characters.
func checkActorReference(actor string) error {
	switch {
	case actor == "" || len(actor) > MaxActorReferenceBytes:
		return problem.At(problem.RequestInvalid, "/actorReference", "actorReference must have 1 to %d bytes", MaxActorReferenceBytes)
	case !utf8.ValidString(actor) || containsControl(actor):
		return problem.At(problem.RequestInvalid, "/actorReference", "actorReference must not contain control characters")
	}
	return nil
}

// checkProposal holds an apply's naming of its proposal to its rules: a
// proposalVersion that is a positive integer and an effectDigest that is
// not empty.
func checkProposal(version int64, digest string) error {
	if version < 1 {
		return problem.At(problem.RequestInvalid, "/proposalVersion", "proposalVersion is required: the positive integer of the read that offered apply")
	}
	if digest == "" {
		return problem.At(problem.RequestInvalid, "/effectDigest", "effectDigest is required: the digest of the read that offered apply")
	}
	return nil
}

// checkReason holds an apply's reason to its rules: at most
// MaxReasonCharacters characters, no NUL.
func checkReason(r string) error {
	switch {
	case utf8.RuneCountInString(r) > MaxReasonCharacters:
		return problem.At(problem.RequestInvalid, "/reason", "reason must have at most %d characters", MaxReasonCharacters)
	case containsNUL(r):
		return problem.At(problem.RequestInvalid, "/reason", "reason must not contain NUL characters")
	}
	return nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

func containsControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}
