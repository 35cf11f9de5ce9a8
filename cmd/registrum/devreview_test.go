package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// reviewedHeading starts the reviewed request journey in the next steps.
const reviewedHeading = "Change records through a reviewed request"

// deskStep is the printed step in the review desk: its URL and the file
// holding the reviewer's password.
var deskStep = regexp.MustCompile(`open (http://127\.0\.0\.1:\d+) in a browser, sign in with the password in (\S+), open the (\S+) request of record`)

// approver approves, in the review desk at deskURL, the review request of
// the request record recordID.
type approver func(t *testing.T, deskURL, password, recordID string)

// runReviewedJourney runs the printed reviewed journey (part of the next
// steps, after its heading): the draft, a read of its actions, submit, the
// desk's approval by approve, reads as the applier until the approval
// arrives, apply, and a read of the changed record.
func runReviewedJourney(t *testing.T, part string, subst map[string]string, approve approver) {
	t.Helper()
	do := func(what, line string, status int) journeyDoc {
		t.Helper()
		resp, b := runCurl(t, line, subst)
		var doc journeyDoc
		if resp.StatusCode != status || json.Unmarshal(b, &doc) != nil {
			t.Fatalf("the printed %s answered %d %s\n%s", what, resp.StatusCode, b, line)
		}
		return doc
	}
	m := deskStep.FindStringSubmatch(part)
	if m == nil {
		t.Fatalf("no review desk step in:\n%s", part)
	}
	deskURL, passwordFile := m[1], m[2]
	pw, err := os.ReadFile(passwordFile)
	if err != nil {
		t.Fatalf("the printed password file: %v", err)
	}
	password := strings.TrimSpace(string(pw))

	lines := printed(part, "curl ")
	n := len(lines)
	if n < 6 {
		t.Fatalf("want the reviewed journey's curl lines, got:\n%s", part)
	}
	setup, draft, read, submit, readApplier, apply, readChanged := lines[:n-6], lines[n-6], lines[n-5], lines[n-4], lines[n-3], lines[n-2], lines[n-1]
	for _, line := range setup {
		doc := do("setup create", line, http.StatusCreated)
		subst["<"+doc.Meta.EntityTypeIdentifier+" id>"] = doc.Data.RecordIdentifier
	}
	placeholder := regexp.MustCompile(`<[a-z-]+ id>`).FindString(read[strings.Index(read, "/v1/records/"):])
	created := do("draft", draft, http.StatusCreated)
	id := created.Data.RecordIdentifier
	subst[placeholder] = id
	var wanted map[string]any
	json.Unmarshal([]byte(regexp.MustCompile(`-d '(.*)'$`).FindStringSubmatch(draft)[1]), &struct {
		Data *map[string]any `json:"data"`
	}{&wanted})

	r := do("read of the draft", read, http.StatusOK).Data.Request
	if r == nil || r.EngineState != "draft" {
		t.Fatalf("the draft reads as %+v", r)
	}
	r.offer(t, "submit_request", subst)
	if sub := do("submit", submit, http.StatusOK); sub.Request == nil || sub.Request.EngineState != "submitted" {
		t.Fatalf("the printed submit answered %+v", sub)
	}
	var target struct {
		Data struct {
			DomainData      map[string]any `json:"domainData"`
			RequestPresence *struct {
				Pending []map[string]any `json:"pending"`
			} `json:"requestPresence"`
		} `json:"data"`
	}
	resp, b := runCurl(t, readChanged, subst)
	if json.Unmarshal(b, &target); resp.StatusCode != http.StatusOK || target.Data.RequestPresence == nil || len(target.Data.RequestPresence.Pending) != 1 {
		t.Fatalf("the changed record, read while the request is pending, answered %d %s", resp.StatusCode, b)
	}
	before := target.Data.DomainData

	approve(t, deskURL, password, id)

	// The host polls the desk; the approval makes apply_request offered.
	deadline := time.Now().Add(60 * time.Second)
	for {
		doc := do("read as the applier", readApplier, http.StatusOK)
		if a := doc.Data.Request; a != nil && offered(a, "apply_request") {
			a.offer(t, "apply_request", subst)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("apply_request was never offered after the desk's approval: %+v", doc.Data.Request)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if a := do("apply", apply, http.StatusOK); a.Request == nil || a.Request.EngineState != "applied" {
		t.Fatalf("the printed apply answered %+v", a)
	}
	after := do("read of the changed record", readChanged, http.StatusOK).Data.DomainData
	changed := false
	for k, v := range wanted {
		if cur, ok := after[k]; ok {
			if fmt.Sprint(cur) != fmt.Sprint(v) {
				t.Errorf("after apply %s is %v, want %v", k, cur, v)
			}
			changed = changed || fmt.Sprint(before[k]) != fmt.Sprint(v)
		}
	}
	if !changed {
		t.Fatalf("the apply changed nothing the request set: before %v, after %v", before, after)
	}
}

func offered(s *journeyState, op string) bool {
	for _, a := range s.Actions {
		if a.Operation == op {
			return true
		}
	}
	return false
}

var (
	csrfInput   = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	untilInput  = regexp.MustCompile(`name="availableUntil" type="datetime-local" value="([^"]+)"`)
	requestLink = regexp.MustCompile(`href="(/requests/rr_[0-9a-f]+)"`)
)

// approveOverHTTP signs in to the desk and approves with plain form posts,
// as a browser without JavaScript does.
func approveOverHTTP(t *testing.T, deskURL, password, recordID string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	page := func(resp *http.Response, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the desk answered %d at %s:\n%s", resp.StatusCode, resp.Request.URL, b)
		}
		return string(b)
	}
	login := page(c.Get(deskURL + "/login"))
	list := page(c.PostForm(deskURL+"/login", url.Values{"csrf": {csrfInput.FindStringSubmatch(login)[1]}, "password": {password}}))
	href := ""
	deadline := time.Now().Add(30 * time.Second)
	for href == "" {
		for _, row := range strings.Split(list, "<tr") {
			if m := requestLink.FindStringSubmatch(row); m != nil && strings.Contains(row, recordID) {
				href = m[1]
			}
		}
		if href == "" {
			if time.Now().After(deadline) {
				t.Fatalf("the desk never listed a request of %s:\n%s", recordID, list)
			}
			time.Sleep(200 * time.Millisecond)
			list = page(c.Get(deskURL + "/"))
		}
	}
	detail := page(c.Get(deskURL + href))
	done := page(c.PostForm(deskURL+href+"/decision", url.Values{"csrf": {csrfInput.FindStringSubmatch(detail)[1]}, "decision": {"approve"},
		"availableUntil": {untilInput.FindStringSubmatch(detail)[1]}}))
	if !strings.Contains(done, `<dd id="state">approved</dd>`) {
		t.Fatalf("the approval did not take:\n%s", done)
	}
}
