package requests

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/internal/canonjson"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// An apply built in Go is judged by the rules of a parsed body: for each
// input, the ApplyInput and the JSON body carrying the same members give
// the same judged input, or the same refusal (code, member and detail).
func TestATypedApplyObeysTheRulesOfAParsedBody(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name string
		in   ApplyInput
		body string
		ok   bool
	}{
		{"an apply without an actor", ApplyInput{ProposalVersion: 2, EffectDigest: testDigest},
			`{"proposalVersion":2,"effectDigest":"` + testDigest + `"}`, true},
		{"an executor's apply", ApplyInput{ActorReference: "executor:desk-1", ProposalVersion: 1, EffectDigest: testDigest},
			`{"actorReference":"executor:desk-1","proposalVersion":1,"effectDigest":"` + testDigest + `"}`, true},
		{"an actor of the largest length", ApplyInput{ActorReference: strings.Repeat("a", MaxActorReferenceBytes), ProposalVersion: 1, EffectDigest: testDigest},
			`{"actorReference":"` + strings.Repeat("a", MaxActorReferenceBytes) + `","proposalVersion":1,"effectDigest":"` + testDigest + `"}`, true},
		{"an actor one byte too long", ApplyInput{ActorReference: strings.Repeat("a", MaxActorReferenceBytes+1), ProposalVersion: 1, EffectDigest: testDigest},
			`{"actorReference":"` + strings.Repeat("a", MaxActorReferenceBytes+1) + `","proposalVersion":1,"effectDigest":"` + testDigest + `"}`, false},
		{"an actor with a control character", ApplyInput{ActorReference: "clerk\n17", ProposalVersion: 1, EffectDigest: testDigest},
			`{"actorReference":"clerk\n17","proposalVersion":1,"effectDigest":"` + testDigest + `"}`, false},
		{"an actor with DEL", ApplyInput{ActorReference: "clerk\u007f", ProposalVersion: 1, EffectDigest: testDigest},
			`{"actorReference":"clerk\u007f","proposalVersion":1,"effectDigest":"` + testDigest + `"}`, false},
		{"proposal version zero", ApplyInput{ProposalVersion: 0, EffectDigest: testDigest},
			`{"proposalVersion":0,"effectDigest":"` + testDigest + `"}`, false},
		{"a negative proposal version", ApplyInput{ProposalVersion: -3, EffectDigest: testDigest},
			`{"proposalVersion":-3,"effectDigest":"` + testDigest + `"}`, false},
		{"no effect digest", ApplyInput{ProposalVersion: 1},
			`{"proposalVersion":1}`, false},
		{"a reason of the largest length", ApplyInput{ProposalVersion: 1, EffectDigest: testDigest, Reason: str(strings.Repeat("é", MaxReasonCharacters))},
			`{"proposalVersion":1,"effectDigest":"` + testDigest + `","reason":"` + strings.Repeat("é", MaxReasonCharacters) + `"}`, true},
		{"a reason one character too long", ApplyInput{ProposalVersion: 1, EffectDigest: testDigest, Reason: str(strings.Repeat("é", MaxReasonCharacters+1))},
			`{"proposalVersion":1,"effectDigest":"` + testDigest + `","reason":"` + strings.Repeat("é", MaxReasonCharacters+1) + `"}`, false},
		{"a reason with NUL", ApplyInput{ProposalVersion: 1, EffectDigest: testDigest, Reason: str("a\x00b")},
			`{"proposalVersion":1,"effectDigest":"` + testDigest + `","reason":"a\u0000b"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typed, typedErr := tc.in.Input().judge(records.ActionApply, "principal-ref")
			parsed, parsedErr := ReceivedBody(records.BodyOf([]byte(tc.body))).judge(records.ActionApply, "principal-ref")
			if (typedErr == nil) != tc.ok || (parsedErr == nil) != tc.ok {
				t.Fatalf("typed: %v; parsed: %v; want accepted %t", typedErr, parsedErr, tc.ok)
			}
			if !tc.ok {
				var pt, pp *problem.Error
				if !errors.As(typedErr, &pt) || !errors.As(parsedErr, &pp) {
					t.Fatalf("not problems: typed %v, parsed %v", typedErr, parsedErr)
				}
				if pt.Code != problem.RequestInvalid || pt.Code != pp.Code || pt.Detail != pp.Detail || *pt.FieldPath != *pp.FieldPath {
					t.Fatalf("typed refusal %s %s %q, parsed refusal %s %s %q", pt.Code, *pt.FieldPath, pt.Detail, pp.Code, *pp.FieldPath, pp.Detail)
				}
				return
			}
			if !reflect.DeepEqual(typed, parsed) {
				t.Fatalf("typed %+v, parsed %+v", typed, parsed)
			}
			if tc.in.ActorReference == "" && typed.ActorReference != "principal-ref" {
				t.Fatalf("an apply without an actor records %q, not the caller's principal reference", typed.ActorReference)
			}
		})
	}
}

// An apply's input is only an apply's: given to another action it is
// refused, never read as that action's input.
func TestAnApplyInputIsRefusedForAnotherAction(t *testing.T) {
	in := ApplyInput{ProposalVersion: 1, EffectDigest: testDigest}.Input()
	for _, action := range []string{records.ActionSubmit, records.ActionRevise, records.ActionCancel} {
		_, err := in.judge(action, "p")
		var pe *problem.Error
		if !errors.As(err, &pe) || pe.Code != problem.RequestInvalid {
			t.Fatalf("%s with an apply's input: %v", action, err)
		}
	}
}

// The idempotency binding of an apply built in Go covers the bytes of the
// apply body with its members (canonical JSON): the body the executor sent
// before it built an ApplyInput, so the key of an application queued by
// that release replays instead of conflicting. A received body binds as
// received.
func TestAnApplyInputBindsAsTheBodyTheExecutorSent(t *testing.T) {
	in := ApplyInput{ActorReference: "executor:desk-1", ProposalVersion: 12, EffectDigest: testDigest}
	sent, err := json.Marshal(map[string]any{"actorReference": "executor:desk-1", "proposalVersion": int64(12), "effectDigest": testDigest})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := in.Input().binding(); string(got) != string(sent) {
		t.Fatalf("binding %s, the executor's body was %s", got, sent)
	}
	reason := "a \"quoted\" reason\n"
	in.ActorReference, in.Reason = "", &reason
	want, err := canonjson.Marshal(map[string]any{"proposalVersion": 12, "effectDigest": testDigest, "reason": reason})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := in.Input().binding(); string(got) != string(want) {
		t.Fatalf("binding %s, want %s", got, want)
	}
	received := []byte(`{ "proposalVersion": 12 }`)
	if got, _ := ReceivedBody(records.BodyOf(received)).binding(); string(got) != string(received) {
		t.Fatalf("a received body binds as %s", got)
	}
}
