package host_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/registrum/registrum/host/hosttest"
)

// TestSubmitRacingAPatchAndAnotherSubmitLetsOneWin sends, for each of many
// drafts, two submits (their own keys) and a patch of the draft, all three
// naming the draft's first ETag, at once. Exactly one of them may win; the
// others are refused as the contract refuses a stale validator or a
// request that is no longer a draft (412), never a server error; and the
// request is left as the winner wrote it: submitted with the address it
// was planned with, or a draft with the patched address. A submit decides
// on the request as read before its planner ran, so this holds only if its
// transaction writes nothing when the request moved in between.
func TestSubmitRacingAPatchAndAnotherSubmitLetsOneWin(t *testing.T) {
	env := startRequests(t)
	owner := env.owner
	childLoc, _ := owner.create(t, "children", `{"name":"Bo"}`)
	childID := filepath.Base(childLoc)

	// send runs on the goroutines of the race: it returns what a test
	// failure would have said as the answer's body.
	send := func(method, path, ctype, body string, hdr ...string) (int, string) {
		resp, b, err := hosttest.Caller{URL: owner.srv.URL, Token: owner.token}.Send(method, path, ctype, body, hdr...)
		if err != nil {
			return 0, err.Error()
		}
		return resp.StatusCode, string(b)
	}
	wins := map[string]int{}
	for i := range 24 {
		loc, tag := owner.create(t, "contact-changes", fmt.Sprintf(`{"childId":%q,"address":"Elm %d"}`, childID, i))
		type answer struct {
			what string
			code int
			body string
		}
		answers := make([]answer, 3)
		var wg sync.WaitGroup
		for j, what := range []string{"submit a", "submit b", "patch"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := answer{what: what}
				if what == "patch" {
					a.code, a.body = send("PATCH", loc, "application/json-patch+json",
						fmt.Sprintf(`[{"op":"replace","path":"/data/address","value":"Oak %d"}]`, i), "If-Match", tag)
				} else {
					a.code, a.body = send("POST", loc+"/actions/submit", "application/json", `{"actorReference":"a"}`,
						"If-Match", tag, "Idempotency-Key", fmt.Sprintf("%s-%d", what, i))
				}
				answers[j] = a
			}()
		}
		wg.Wait()
		var won []string
		for _, a := range answers {
			switch {
			case a.code == 200:
				won = append(won, a.what)
			case a.code != 412:
				t.Fatalf("draft %d: %s answered %d %s, want 200 or 412", i, a.what, a.code, a.body)
			}
		}
		if len(won) != 1 {
			t.Fatalf("draft %d: %v won, want exactly one: %+v", i, won, answers)
		}
		got, _ := owner.read(t, loc)
		state, address := got.Data.Request.EngineState, got.Data.DomainData["address"]
		switch won[0] {
		case "patch":
			if state != "draft" || address != fmt.Sprintf("Oak %d", i) {
				t.Fatalf("draft %d: the patch won, and the request is %s with address %v", i, state, address)
			}
		default:
			if state != "submitted" || address != fmt.Sprintf("Elm %d", i) {
				t.Fatalf("draft %d: a submit won, and the request is %s with address %v", i, state, address)
			}
		}
		wins[strings.TrimSuffix(strings.TrimSuffix(won[0], " a"), " b")]++
	}
	t.Logf("winners: %v", wins)
}

// TestApplyRacingAnotherApplyAndACancelLetsOneWin sends, for each of many
// submitted requests, two applies (their own keys) and a cancel, all naming
// the ETag the apply offer carries, at once. Exactly one of the three wins,
// the others are refused (412), and the planned write lands at most once:
// the child carries the planned address only when an apply won. (An apply
// locks the request record and its workflow state before it decides, and
// its touch of the record expects the revision it read; the store's
// TestLockWithRequestReadsAndLocksBothRows holds the lock itself.)
func TestApplyRacingAnotherApplyAndACancelLetsOneWin(t *testing.T) {
	env := startRequests(t)
	owner := env.owner
	send := func(path, key, body, ifMatch string) (int, string) {
		resp, b, err := hosttest.Caller{URL: owner.srv.URL, Token: owner.token}.Send("POST", path, "application/json", body,
			"If-Match", ifMatch, "Idempotency-Key", key)
		if err != nil {
			return 0, err.Error()
		}
		return resp.StatusCode, string(b)
	}
	wins := map[string]int{}
	for i := range 16 {
		childLoc, _ := owner.create(t, "children", fmt.Sprintf(`{"name":"Cy %d"}`, i))
		loc, tag := owner.create(t, "contact-changes", fmt.Sprintf(`{"childId":%q,"address":"Elm %d"}`, filepath.Base(childLoc), i))
		if code, b := owner.act(t, loc+"/actions/submit", tag, fmt.Sprintf("submit-%d", i), `{"actorReference":"a"}`); code != 200 {
			t.Fatalf("submit %d: %d %s", i, code, b)
		}
		got, _ := owner.read(t, loc)
		ap := got.Data.Request.action("apply_request")
		if ap == nil {
			t.Fatalf("request %d: apply not offered: %+v", i, got.Data.Request)
		}
		apply := fmt.Sprintf(`{"actorReference":"a","proposalVersion":%d,"effectDigest":%q}`, ap.ProposalVersion, ap.EffectDigest)
		codes := make([]int, 3)
		bodies := make([]string, 3)
		whats := []string{"apply a", "apply b", "cancel"}
		var wg sync.WaitGroup
		for j, what := range whats {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if what == "cancel" {
					codes[j], bodies[j] = send(loc+"/actions/cancel", fmt.Sprintf("cancel-%d", i), `{"actorReference":"a"}`, ap.IfMatch)
				} else {
					codes[j], bodies[j] = send(ap.Href, fmt.Sprintf("%s-%d", what, i), apply, ap.IfMatch)
				}
			}()
		}
		wg.Wait()
		var won []string
		for j, code := range codes {
			switch {
			case code == 200:
				won = append(won, whats[j])
			case code != 412:
				t.Fatalf("request %d: %s answered %d %s, want 200 or 412", i, whats[j], code, bodies[j])
			}
		}
		if len(won) != 1 {
			t.Fatalf("request %d: %v won, want exactly one: %v %v", i, won, codes, bodies)
		}
		after, _ := owner.read(t, loc)
		_, cb := owner.do(t, "GET", childLoc, "", "")
		var child envelope
		if err := json.Unmarshal(cb, &child); err != nil {
			t.Fatalf("child %d: %v %s", i, err, cb)
		}
		state, address := after.Data.Request.EngineState, child.Data.DomainData["address"]
		if won[0] == "cancel" {
			if state != "cancelled" || address == fmt.Sprintf("Elm %d", i) {
				t.Fatalf("request %d: the cancel won, and the request is %s with the child's address %v", i, state, address)
			}
		} else if state != "applied" || address != fmt.Sprintf("Elm %d", i) {
			t.Fatalf("request %d: an apply won, and the request is %s with the child's address %v", i, state, address)
		}
		wins[strings.TrimSuffix(strings.TrimSuffix(won[0], " a"), " b")]++
	}
	t.Logf("winners: %v", wins)
}
