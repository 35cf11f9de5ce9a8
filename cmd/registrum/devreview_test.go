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
// steps, after its heading) line by line: setup creates, the draft, reads of
// its actions, the attachment upload, submit, the desk's approval by
// approve before the first read as the applier (repeated until apply is
// offered), apply, and the read or filtered list that shows the record the
// request changed or created.
func runReviewedJourney(t *testing.T, part string, subst map[string]string, approve approver) {
	t.Helper()
	// The events step follows the reviewed journey.
	part, _, _ = strings.Cut(part, "\nEvents:")
	do := func(what, line string, status int) (journeyDoc, []byte) {
		t.Helper()
		resp, b := runCurl(t, line, subst)
		var doc journeyDoc
		if resp.StatusCode != status || json.Unmarshal(b, &doc) != nil {
			t.Fatalf("the printed %s answered %d %s\n%s", what, resp.StatusCode, b, line)
		}
		return doc, b
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

	setupPart, steps, found := strings.Cut(part, "Draft the request")
	if !found {
		t.Fatalf("no draft in:\n%s", part)
	}
	for _, line := range printed(setupPart, "curl ") {
		doc, _ := do("setup create", line, http.StatusCreated)
		subst["<"+doc.Meta.EntityTypeIdentifier+" id>"] = doc.Data.RecordIdentifier
	}
	lines := printed(steps, "curl ")
	draft := lines[0]
	placeholder := regexp.MustCompile(`<[a-z-]+ id>`).FindString(lines[1])
	doc, _ := do("draft", draft, http.StatusCreated)
	id := doc.Data.RecordIdentifier
	subst[placeholder] = id
	var wanted map[string]any
	json.Unmarshal([]byte(regexp.MustCompile(`-d '(.*)'$`).FindStringSubmatch(draft)[1]), &struct {
		Data *map[string]any `json:"data"`
	}{&wanted})

	var submitted, approved, applied, attached, checked bool
	for _, line := range lines[1:] {
		switch {
		case strings.Contains(line, "-X PATCH"):
			// The upload answers the request with the slot filled.
			_, b := do("attachment upload", line, http.StatusOK)
			if !strings.Contains(string(b), `"sha256"`) {
				t.Fatalf("the upload's answer names no SHA-256: %s", b)
			}
			attached = true
		case strings.Contains(line, "<submit_request href>"):
			sub, _ := do("submit", line, http.StatusOK)
			if sub.Request == nil || sub.Request.EngineState != "submitted" {
				t.Fatalf("the printed submit answered %+v", sub)
			}
			submitted = true
		case strings.Contains(line, "<apply_request href>"):
			a, _ := do("apply", line, http.StatusOK)
			if a.Request == nil || a.Request.EngineState != "applied" {
				t.Fatalf("the printed apply answered %+v", a)
			}
			applied = true
		case applied && strings.Contains(line, " -G "):
			// The record the request created, found by a filter.
			_, b := do("list of the created record", line, http.StatusOK)
			var page struct {
				Items []struct {
					DomainData map[string]any `json:"domainData"`
				} `json:"items"`
			}
			if json.Unmarshal(b, &page); len(page.Items) != 1 {
				t.Fatalf("the printed list finds %d records: %s", len(page.Items), b)
			}
			checkChanged(t, wanted, page.Items[0].DomainData)
			checked = true
		case applied:
			d, _ := do("read of the changed record", line, http.StatusOK)
			checkChanged(t, wanted, d.Data.DomainData)
			checked = true
		case !submitted:
			r, _ := do("read of the draft", line, http.StatusOK)
			if r.Data.Request == nil || r.Data.Request.EngineState != "draft" {
				t.Fatalf("the draft reads as %+v", r.Data.Request)
			}
			r.Data.Request.offer(t, "submit_request", subst)
		default:
			// Read as the applier: the desk approves first; the host polls
			// it, then offers apply_request.
			if !approved {
				approve(t, deskURL, password, id)
				approved = true
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				d, _ := do("read as the applier", line, http.StatusOK)
				if a := d.Data.Request; a != nil && offered(a, "apply_request") {
					a.offer(t, "apply_request", subst)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("apply_request was never offered after the desk's approval: %+v", d.Data.Request)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	if !submitted || !approved || !applied || !checked {
		t.Fatalf("the reviewed journey missed a step (submitted %v, approved %v, applied %v, checked %v):\n%s", submitted, approved, applied, checked, part)
	}
	if strings.Contains(part, "attachments/") != attached {
		t.Fatalf("the printed attachment step was not run")
	}
}

// checkChanged checks that every value the draft set and the record holds
// under the same name is the draft's.
func checkChanged(t *testing.T, wanted, got map[string]any) {
	t.Helper()
	same := 0
	for k, v := range wanted {
		if cur, ok := got[k]; ok {
			if fmt.Sprint(cur) != fmt.Sprint(v) {
				t.Errorf("after apply %s is %v, want %v", k, cur, v)
			}
			same++
		}
	}
	if same == 0 {
		t.Fatalf("the record after apply shares nothing with the request: %v", got)
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
