package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

type devRun struct {
	cmd    *exec.Cmd
	output strings.Builder
	// stderr is complete once the process has been waited for.
	stderr strings.Builder
}

// startDev runs `registrum dev` from the repository root and waits for its
// next steps.
func startDev(t *testing.T, data string, args ...string) *devRun {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"dev", "--data", data, "--port", "0", "--issuer-port", "0", "--desk-port", "0", "--verifier-port", "0"}, args...)...)
	cmd.Dir = filepath.Join("..", "..")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &devRun{cmd: cmd}
	stderr := &r.stderr
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			r.output.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "Press Ctrl-C") {
				done <- nil
				io.Copy(io.Discard, stdout)
				return
			}
		}
		done <- io.ErrUnexpectedEOF
	}()
	select {
	case err := <-done:
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("registrum dev ended before it was ready:\n%s\n%s", r.output.String(), stderr.String())
		}
	case <-time.After(120 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("registrum dev not ready after 120s:\n%s\n%s", r.output.String(), stderr.String())
	}
	// A cluster dev had to put outside the data folder goes with the test.
	if dir := clusterDirOf(t, data); !strings.HasPrefix(dir, data+string(filepath.Separator)) {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	return r
}

// stop sends sig and checks that dev exits cleanly with no postgres left.
func (r *devRun) stop(t *testing.T, data string, sig syscall.Signal) {
	t.Helper()
	pid := postmasterPID(t, data)
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- r.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("registrum dev exited with %v after %v:\n%s", err, sig, r.stderr.String())
		}
	case <-time.After(60 * time.Second):
		r.cmd.Process.Kill()
		t.Fatalf("registrum dev did not stop after %v", sig)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("postmaster %d outlived registrum dev", pid)
	}
}

func postmasterPID(t *testing.T, data string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(clusterDirOf(t, data), "data", "postmaster.pid"))
	if err != nil {
		t.Fatalf("no postmaster.pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// shellWords splits a printed command line as a POSIX shell would for the
// quoting the next steps use: single quotes, double quotes with \$ and \".
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			if c == '"' {
				quote = 0
			} else if c == '\\' && i+1 < len(line) && strings.ContainsRune(`$"\`, rune(line[i+1])) {
				i++
				cur.WriteByte(line[i])
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// runCurl performs a printed curl line with Go's client, after substituting
// $TOKEN and the placeholders.
func runCurl(t *testing.T, line string, subst map[string]string) (*http.Response, []byte) {
	t.Helper()
	for k, v := range subst {
		line = strings.ReplaceAll(line, k, v)
	}
	args := shellWords(strings.TrimSpace(line))
	if args[0] != "curl" {
		t.Fatalf("not a curl line: %s", line)
	}
	method, target, body := "GET", "", ""
	header := http.Header{}
	get := false
	form := url.Values{}
	for i := 1; i < len(args); i++ {
		switch args[i] {
		case "-sS", "-i":
		case "-G":
			get = true
		case "-X":
			i++
			method = args[i]
		case "-H":
			i++
			k, v, _ := strings.Cut(args[i], ": ")
			header.Add(k, v)
		case "-d", "--data-binary":
			i++
			body = args[i]
		case "--data-urlencode":
			i++
			k, v, _ := strings.Cut(args[i], "=")
			form.Add(k, v)
		default:
			target = args[i]
		}
	}
	if get && len(form) > 0 {
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + form.Encode()
	}
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// printed returns the lines of the next steps that start with prefix.
func printed(out, prefix string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return lines
}

func TestDevServesTheExampleKeepsRecordsAndLeavesNoPostgres(t *testing.T) {
	root, err := os.MkdirTemp("", "rgdev")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	data := filepath.Join(root, "data")

	run := startDev(t, data)
	out, reviewedPart, found := strings.Cut(run.output.String(), reviewedHeading)
	if !found {
		t.Fatalf("no reviewed request journey in:\n%s", run.output.String())
	}

	// The printed token command works.
	subst := map[string]string{"$TOKEN": printedToken(t, run, out)}

	// The events step comes last, after the reviewed journey.
	reviewedPart, events, ok := strings.Cut(reviewedPart, "\nEvents:")
	if !ok {
		t.Fatalf("no events step in:\n%s", run.output.String())
	}
	curls := printed(out, "curl ")
	if len(curls) < 5+13+3 {
		t.Fatalf("want 5 curl lines (create, patch, list, next page, snapshot), then the change-request journey, then the spatial adapter step, got:\n%s", out)
	}
	// Create, twice.
	var location, etag string
	for i := 0; i < 2; i++ {
		resp, b := runCurl(t, curls[0], subst)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("the printed create answered %d %s", resp.StatusCode, b)
		}
		location, etag = resp.Header.Get("Location"), resp.Header.Get("ETag")
	}
	subst["<Location>"], subst["<ETag>"] = location, etag
	resp, b := runCurl(t, curls[1], subst)
	var patched struct {
		Data struct {
			Snapshot string `json:"snapshot"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &patched) != nil || patched.Data.Snapshot == "" {
		t.Fatalf("the printed patch answered %d %s", resp.StatusCode, b)
	}
	subst["<data.snapshot>"] = patched.Data.Snapshot
	resp, b = runCurl(t, curls[2], subst)
	var page struct {
		Items    []json.RawMessage `json:"items"`
		PageInfo struct {
			NextCursor *string `json:"nextCursor"`
		} `json:"pageInfo"`
	}
	json.Unmarshal(b, &page)
	if resp.StatusCode != 200 || len(page.Items) != 1 || page.PageInfo.NextCursor == nil {
		t.Fatalf("the printed list answered %d %s", resp.StatusCode, b)
	}
	subst["<nextCursor>"] = *page.PageInfo.NextCursor
	resp, b = runCurl(t, curls[3], subst)
	json.Unmarshal(b, &page)
	if resp.StatusCode != 200 || len(page.Items) != 1 {
		t.Fatalf("the printed next page answered %d %s", resp.StatusCode, b)
	}
	// The snapshot just after the patch: both records, the patched one at
	// revision 2, and the patch's own token.
	resp, b = runCurl(t, curls[4], subst)
	var snap struct {
		Items []struct {
			RecordIdentifier   string `json:"recordIdentifier"`
			RevisionIdentifier string `json:"revisionIdentifier"`
		} `json:"items"`
		Snapshot string `json:"snapshot"`
	}
	json.Unmarshal(b, &snap)
	if resp.StatusCode != 200 || len(snap.Items) != 2 || snap.Snapshot != patched.Data.Snapshot {
		t.Fatalf("the printed snapshot read answered %d %s", resp.StatusCode, b)
	}
	for _, it := range snap.Items {
		if strings.HasSuffix(location, "/"+it.RecordIdentifier) && it.RevisionIdentifier != "2" {
			t.Fatalf("the snapshot shows the patched record at revision %s: %s", it.RevisionIdentifier, b)
		}
	}
	runJourney(t, curls[5:len(curls)-3], subst)
	runGIS(t, curls[len(curls)-3:], subst)
	runPrintedIngest(t, out, subst["$TOKEN"])
	runReviewedJourney(t, reviewedPart, subst, approveOverHTTP)
	runEvents(t, events, subst)
	run.stop(t, data, syscall.SIGTERM)

	// A second start finds the record created before.
	run = startDev(t, data)
	subst["$TOKEN"] = printedToken(t, run, run.output.String())
	curls = printed(run.output.String(), "curl ")
	base := regexp.MustCompile(`https?://127\.0\.0\.1:\d+`).FindString(curls[0])
	resp, b = runCurl(t, fmt.Sprintf(`curl -sS '%s%s%s' -H "Authorization: Bearer $TOKEN"`, base, location, profileQuery(curls[0])), subst)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after a restart the record answers %d %s", resp.StatusCode, b)
	}
	run.stop(t, data, syscall.SIGINT)
}

// printedToken runs the printed `export TOKEN=$(registrum token …)` command.
func printedToken(t *testing.T, run *devRun, out string) string {
	t.Helper()
	exportLine := printed(out, "export TOKEN=$(")
	if len(exportLine) != 1 {
		run.cmd.Process.Kill()
		t.Fatalf("no token export line in:\n%s", out)
	}
	tokenCmd := shellWords(strings.TrimSuffix(strings.TrimPrefix(exportLine[0], "export TOKEN=$("), ")"))
	tok, err := exec.Command(binary, tokenCmd[1:]...).Output()
	if err != nil || strings.Count(strings.TrimSpace(string(tok)), ".") != 2 {
		run.cmd.Process.Kill()
		t.Fatalf("the printed token command failed: %v %s", err, tok)
	}
	return strings.TrimSpace(string(tok))
}

// profileQuery returns the ?accessProfile=… of a printed URL, or "".
func profileQuery(curl string) string {
	if m := regexp.MustCompile(`\?accessProfile=[^' ]+`).FindString(curl); m != "" {
		return m
	}
	return ""
}

// journeyDoc is what the journey's answers are read for: an envelope (with
// meta and data.request) or an action answer (request at the top).
type journeyDoc struct {
	Data struct {
		RecordIdentifier string         `json:"recordIdentifier"`
		DomainData       map[string]any `json:"domainData"`
		Request          *journeyState  `json:"request"`
	} `json:"data"`
	Meta struct {
		EntityTypeIdentifier string `json:"entityTypeIdentifier"`
	} `json:"meta"`
	Request        *journeyState `json:"request"`
	ActorReference string        `json:"actorReference"`
}

type journeyState struct {
	EngineState  string `json:"engineState"`
	EffectDigest string `json:"effectDigest"`
	Actions      []struct {
		Operation       string `json:"operation"`
		Href            string `json:"href"`
		IfMatch         string `json:"ifMatch"`
		ProposalVersion int64  `json:"proposalVersion"`
		EffectDigest    string `json:"effectDigest"`
	} `json:"actions"`
}

// offer puts the placeholders of the offered action op into subst.
func (s *journeyState) offer(t *testing.T, op string, subst map[string]string) {
	t.Helper()
	for _, a := range s.Actions {
		if a.Operation == op {
			subst["<"+op+" href>"], subst["<"+op+" ifMatch>"] = a.Href, a.IfMatch
			subst["<"+op+" proposalVersion>"], subst["<"+op+" effectDigest>"] = strconv.FormatInt(a.ProposalVersion, 10), a.EffectDigest
			return
		}
	}
	t.Fatalf("%s is not offered: %+v", op, s.Actions)
}

// runJourney runs the printed change-request journey: the setup creates,
// the draft, a read of its actions, submit (and its replay), a new read,
// apply, and a read of the changed record, checking each answer.
func runJourney(t *testing.T, lines []string, subst map[string]string) {
	t.Helper()
	do := func(what string, line string, status int) journeyDoc {
		t.Helper()
		resp, b := runCurl(t, line, subst)
		var doc journeyDoc
		if resp.StatusCode != status || json.Unmarshal(b, &doc) != nil {
			t.Fatalf("the printed %s answered %d %s\n%s", what, resp.StatusCode, b, line)
		}
		return doc
	}
	n := len(lines)
	setup, draft, read := lines[:n-13], lines[n-13], lines[n-12]
	eicarAttach, eicarRead, eicarSubmit, attach, readApproved := lines[n-11], lines[n-10], lines[n-9], lines[n-8], lines[n-7]
	download, submit, apply, readChanged := lines[n-6], lines[n-5], lines[n-4], lines[n-3]
	if eicarRead != read || readApproved != read {
		t.Fatalf("the printed verification reads are not the request's read:\n%s\n%s", eicarRead, readApproved)
	}
	conditions, invoke := lines[n-2], lines[n-1]
	for _, line := range setup {
		doc := do("setup create", line, http.StatusCreated)
		subst["<"+doc.Meta.EntityTypeIdentifier+" id>"] = doc.Data.RecordIdentifier
	}
	if subst["<case id>"] == "" || subst["<child id>"] == "" {
		t.Fatalf("the journey's setup made %v, want a case and a child", subst)
	}
	subst["<request id>"] = do("draft", draft, http.StatusCreated).Data.RecordIdentifier

	r := do("read of the draft", read, http.StatusOK).Data.Request
	if r == nil || r.EngineState != "draft" {
		t.Fatalf("the draft reads as %+v", r)
	}
	r.offer(t, "submit_request", subst)
	// The slot is verified by the scanner dev runs: read until the status
	// settles (pending first).
	settle := func(want string) *journeyState {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			doc := do("read of the draft while its attachment is scanned", read, http.StatusOK)
			slot, _ := doc.Data.DomainData["supporting-document"].(map[string]any)
			status, _ := slot["verificationStatus"].(string)
			if status == want {
				return doc.Data.Request
			}
			if status != "pending" || time.Now().After(deadline) {
				t.Fatalf("the attachment's verificationStatus is %q, want %s: %+v", status, want, doc.Data.DomainData)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// The EICAR test string: rejected, and submit refused with 412.
	ev := do("attach of the EICAR test string", eicarAttach, http.StatusOK)
	if slot, _ := ev.Data.DomainData["supporting-document"].(map[string]any); slot == nil || slot["verificationStatus"] != "pending" {
		t.Fatalf("the printed EICAR attach answered %+v", ev.Data.DomainData)
	}
	settle("rejected").offer(t, "submit_request", subst)
	if resp, b := runCurl(t, eicarSubmit, subst); resp.StatusCode != http.StatusPreconditionFailed || !strings.Contains(string(b), "precondition.failed") {
		t.Fatalf("the printed submit of a rejected attachment answered %d %s", resp.StatusCode, b)
	}
	// The attach step: the slot filled from the bytes sent, the request at a
	// new revision, scanned and approved; the download answers the same bytes.
	att := do("attach", attach, http.StatusOK)
	slot, _ := att.Data.DomainData["supporting-document"].(map[string]any)
	if slot == nil || slot["verificationStatus"] != "pending" || slot["contentType"] != "text/plain" {
		t.Fatalf("the printed attach answered %+v", att.Data.DomainData)
	}
	settle("approved")
	body := regexp.MustCompile(`--data-binary '([^']*)'`).FindStringSubmatch(attach)[1]
	if resp, b := runCurl(t, download, subst); resp.StatusCode != http.StatusOK || string(b) != body || resp.Header.Get("Content-Disposition") == "" {
		t.Fatalf("the printed download answered %d %q", resp.StatusCode, b)
	}
	do("read of the draft with its attachment", read, http.StatusOK).Data.Request.offer(t, "submit_request", subst)
	resp, first := runCurl(t, submit, subst)
	var sub journeyDoc
	if json.Unmarshal(first, &sub); resp.StatusCode != http.StatusOK || sub.Request == nil || sub.Request.EngineState != "submitted" ||
		!strings.HasPrefix(sub.Request.EffectDigest, "sha256:") || sub.ActorReference != "dev-walkthrough" {
		t.Fatalf("the printed submit answered %d %s", resp.StatusCode, first)
	}
	if resp, again := runCurl(t, submit, subst); resp.StatusCode != http.StatusOK || string(again) != string(first) {
		t.Fatalf("the printed submit, repeated, answered %d %s; want the first answer replayed", resp.StatusCode, again)
	}

	// Pending, the request shows on the record it changes.
	var target struct {
		Data struct {
			RequestPresence *struct {
				Pending []map[string]any `json:"pending"`
			} `json:"requestPresence"`
		} `json:"data"`
	}
	resp, b := runCurl(t, readChanged, subst)
	if json.Unmarshal(b, &target); resp.StatusCode != http.StatusOK || target.Data.RequestPresence == nil ||
		len(target.Data.RequestPresence.Pending) != 1 || target.Data.RequestPresence.Pending[0]["recordIdentifier"] != subst["<request id>"] {
		t.Fatalf("the changed record, read while the request is pending, answered %d %s", resp.StatusCode, b)
	}

	r = do("read of the submitted request", read, http.StatusOK).Data.Request
	r.offer(t, "apply_request", subst)
	if subst["<apply_request effectDigest>"] != sub.Request.EffectDigest {
		t.Fatalf("apply offered for %s, submit froze %s", subst["<apply_request effectDigest>"], sub.Request.EffectDigest)
	}
	if a := do("apply", apply, http.StatusOK); a.Request == nil || a.Request.EngineState != "applied" {
		t.Fatalf("the printed apply answered %+v", a)
	}

	// The planner's effects: the child patched (its phone without dashes),
	// a guardian created and linked.
	child := do("read of the changed record", readChanged, http.StatusOK).Data.DomainData
	if child["address"] != "example-1" || child["phone"] != "example1" || child["caseNotes"] != "example-1" || child["guardianId"] == nil {
		t.Fatalf("the child after apply: %v", child)
	}
	base := regexp.MustCompile(`https?://127\.0\.0\.1:\d+`).FindString(readChanged)
	guardian := do("read of the guardian", fmt.Sprintf(`curl -sS '%s/v1/records/guardians/%s%s' -H "Authorization: Bearer $TOKEN"`, base, child["guardianId"], profileQuery(readChanged)), http.StatusOK)
	if guardian.Data.DomainData["name"] != "example" {
		t.Fatalf("the guardian the request created: %v", guardian.Data.DomainData)
	}
	runAction(t, conditions, invoke, subst)
}

// runAction runs the printed immediate action: target-conditions, then the
// invocation under the ifMatch it gave (twice: the replay answers the same).
func runAction(t *testing.T, conditions, invoke string, subst map[string]string) {
	t.Helper()
	resp, b := runCurl(t, conditions, subst)
	var tc struct {
		Preconditions map[string]struct {
			Entity, RecordID, IfMatch string
		} `json:"preconditions"`
	}
	if json.Unmarshal(b, &tc); resp.StatusCode != http.StatusOK || len(tc.Preconditions) != 1 {
		t.Fatalf("the printed target-conditions answered %d %s", resp.StatusCode, b)
	}
	for effect, p := range tc.Preconditions {
		q, _ := json.Marshal(p.IfMatch)
		subst["<"+effect+" ifMatch JSON>"] = string(q)
	}
	resp, first := runCurl(t, invoke, subst)
	var res struct {
		Action  string `json:"action"`
		Results []struct {
			Entity   string `json:"entity"`
			RecordID string `json:"recordId"`
			Revision int64  `json:"revision"`
		} `json:"results"`
	}
	if json.Unmarshal(first, &res); resp.StatusCode != http.StatusOK || len(res.Results) != 1 || res.Results[0].Revision < 2 {
		t.Fatalf("the printed invocation answered %d %s\n%s", resp.StatusCode, first, invoke)
	}
	if resp, again := runCurl(t, invoke, subst); resp.StatusCode != http.StatusOK || string(again) != string(first) {
		t.Fatalf("the printed invocation, repeated, answered %d %s", resp.StatusCode, again)
	}
}

// runGIS runs the printed spatial adapter step: the create of a record with
// a point, the collections and the features in the box, read without a
// token; the feature created is in the box.
func runGIS(t *testing.T, lines []string, subst map[string]string) {
	t.Helper()
	create, collections, items := lines[0], lines[1], lines[2]
	if !strings.Contains(collections, "/v1/gis/collections") || !strings.Contains(items, "/v1/gis/collections/") || strings.Contains(items, "TOKEN") {
		t.Fatalf("the spatial step is not last, or reads with a token:\n%s", strings.Join(lines, "\n"))
	}
	resp, b := runCurl(t, create, subst)
	var rec struct {
		Data struct {
			RecordIdentifier string `json:"recordIdentifier"`
		} `json:"data"`
	}
	if json.Unmarshal(b, &rec); resp.StatusCode != http.StatusCreated {
		t.Fatalf("the printed create of a point answered %d %s", resp.StatusCode, b)
	}
	if resp, b := runCurl(t, collections, subst); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"itemType":"feature"`) {
		t.Fatalf("the printed collections read answered %d %s", resp.StatusCode, b)
	}
	resp, b = runCurl(t, items, subst)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/geo+json" ||
		!strings.Contains(string(b), `"id":"`+rec.Data.RecordIdentifier+`"`) {
		t.Fatalf("the printed items read answered %d %s", resp.StatusCode, b)
	}
}

// runPrintedIngest runs the printed bulk import from where dev started: it
// completes; run again, it is refused at its first line by uniqueness.
func runPrintedIngest(t *testing.T, out, token string) {
	t.Helper()
	lines := printed(out, "REGISTRUM_TOKEN=$TOKEN ")
	if len(lines) != 1 || !strings.Contains(lines[0], " ingest --url ") {
		t.Fatalf("no printed ingest command in:\n%s", out)
	}
	words := shellWords(strings.TrimPrefix(strings.TrimSpace(lines[0]), "REGISTRUM_TOKEN=$TOKEN "))
	for i := range 2 {
		cmd := exec.Command(binary, words[1:]...)
		cmd.Dir = filepath.Join("..", "..")
		cmd.Env = append(os.Environ(), "REGISTRUM_TOKEN="+token)
		res, err := cmd.CombinedOutput()
		switch {
		case i == 0 && (err != nil || !strings.Contains(string(res), "complete: 250 items in 3 chunks")):
			t.Fatalf("the printed ingest command: %v\n%s", err, res)
		case i == 1 && (err == nil || !strings.Contains(string(res), "refused line 1 of examples/childsupport/ingest/cases.jsonl") || !strings.Contains(string(res), "successor run")):
			t.Fatalf("the printed ingest command, again: %v\n%s", err, res)
		}
	}
}

// runEvents fires the printed events step: the patch of the case the
// journey created changes its status, and the example receiver's log (as
// printed) shows the verified delivery.
func runEvents(t *testing.T, out string, subst map[string]string) {
	t.Helper()
	patch := printed(out, "curl ")
	tail := printed(out, "tail -f ")
	if len(patch) != 1 || len(tail) != 1 {
		t.Fatalf("the events step prints one patch and the receiver log:\n%s", out)
	}
	target := regexp.MustCompile(`'(https?://[^']+)'`).FindStringSubmatch(patch[0])[1]
	for k, v := range subst {
		target = strings.ReplaceAll(target, k, v)
	}
	resp, b := runCurl(t, `curl -sS '`+target+`' -H "Authorization: Bearer $TOKEN"`, subst)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("read the case: %d %s", resp.StatusCode, b)
	}
	subst["<its ETag>"] = resp.Header.Get("ETag")
	if resp, b := runCurl(t, patch[0], subst); resp.StatusCode != http.StatusOK {
		t.Fatalf("the printed events patch answered %d %s", resp.StatusCode, b)
	}
	logPath := strings.TrimPrefix(tail[0], "tail -f ")
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), "verified case-status-changed-v1") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver log %s shows no verified delivery:\n%s", logPath, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
