package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tourSteps are the titles of the tour of the example, in order.
var tourSteps = []string{"an access token", "create a record", "patch under If-Match", "a filtered page and its cursor", "a snapshot read",
	"a change request and its attachment", "submit", "apply", "a reviewed request through the review desk", "an immediate action",
	"GeoJSON", "bulk import", "a delivered webhook"}

// tourLimit bounds one run of the tour, far above what it needs (seconds).
const tourLimit = 3 * time.Minute

// TestTour is the end-to-end test of `registrum dev`: without dev the tour
// says how to start it; against dev, `registrum tour --no-pause` runs
// every step of the example with the status each one must answer; then
// every command the tour printed runs as printed through sh and answers
// the same status (writes replay under their Idempotency-Key). dev's own
// printout is a summary naming the tour with the binary as invoked, and
// after a restart the record the tour created is still there.
func TestTour(t *testing.T) {
	root, err := os.MkdirTemp("", "rgtour")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	data := filepath.Join(root, "data")
	repo := filepath.Join("..", "..")

	// Without dev: a clear message naming how to start it.
	out, err := tourRun(t, repo, "tour", "--data", data)
	if err == nil || !strings.Contains(out, "registrum dev is not running") || !strings.Contains(out, binary+" dev --data "+data) {
		t.Fatalf("the tour without dev: %v\n%s", err, out)
	}

	run := startDev(t, data)
	summary := run.output.String()
	if strings.Contains(summary, "curl ") || !strings.Contains(summary, "  "+binary+" tour --data "+data+"\n") || !strings.Contains(summary, "docs/tour.md") {
		t.Fatalf("dev prints no short summary naming the tour as invoked:\n%s", summary)
	}
	printedToken(t, run, summary)

	// --step beyond the last step names the range.
	if out, err := tourRun(t, repo, "tour", "--data", data, "--no-pause", "--step", "99"); err == nil || !strings.Contains(out, "steps 1 to "+strconv.Itoa(len(tourSteps))) {
		t.Fatalf("tour --step 99: %v\n%s", err, out)
	}

	out, err = tourRun(t, repo, "tour", "--data", data, "--no-pause")
	if err != nil {
		t.Fatalf("the tour failed: %v\n%s", err, out)
	}
	for i, title := range tourSteps {
		if want := "━━ Step " + strconv.Itoa(i+1) + " of " + strconv.Itoa(len(tourSteps)) + ": " + title + "\n"; !strings.Contains(out, want) {
			t.Errorf("the tour lacks %q", want)
		}
	}
	calls := tourCalls(t, out)
	// What each step must answer, in order: the refusals the tour shows
	// are part of it.
	want := []int{201, 201, 200, 412, 200, 200, 200, // create ×2, patch, stale patch, page, next page, snapshot
		201, 201, 201, 200, 200, 200, 412, 200, 200, 200, // case, child, draft, read, EICAR, rejected, submit refused, clean, approved, download
		200, 200, 200, 200, 200, 200, // submit: read, submit, changed; apply: read, apply, changed
		201, 200, 200, 200, 200, 200, 200, 200, // reviewed: draft, read, attach, read, submit, applier read, apply, find
		200, 200, // action: target-conditions, invoke
		201, 200, 200, // GeoJSON: create, collections, items
		200, 200} // webhook: read, patch
	var got []int
	for _, c := range calls {
		got = append(got, c.status)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the tour's statuses are %v, want %v:\n%s", got, want, out)
	}
	// The created case cannot point back at its application, nor can one
	// child be made per listed child: the tour says why, in one notice.
	if !regexp.MustCompile(`(?m)^  Notice: the case the request created\. Its application stays empty: .*never from the request's own record id.* Nor is a record made per item of children: .*planner`).MatchString(out) {
		t.Errorf("the reviewed step does not say why the case holds no application and no child is made:\n%s", out)
	}
	if !strings.Contains(out, "verified case-status-changed-v1") || !strings.Contains(out, "complete: 250 items in 3 chunks") {
		t.Fatalf("the tour shows no delivered webhook or no complete import:\n%s", out)
	}

	// Every printed command, as printed, through sh. An attachment upload
	// sent again after its request was submitted is refused (412): the
	// request is no longer a draft, whatever its Idempotency-Key.
	for _, c := range calls {
		status := c.status
		if strings.Contains(c.line, "-X PATCH") && strings.Contains(c.line, "/attachments/") {
			status = http.StatusPreconditionFailed
		}
		if strings.Contains(c.line, "$TOKEN") || regexp.MustCompile(`<[a-z ._-]+>`).MatchString(c.line) {
			t.Errorf("a placeholder is left in %s", c.line)
		}
		res, err := shell(t, repo, c.line+` -o /dev/null -w '%{http_code}'`)
		if err != nil || strings.TrimSpace(res) != strconv.Itoa(status) {
			t.Errorf("through sh, %s\nanswered %q (%v), want %d (the tour got %d)", c.line, res, err, status, c.status)
		}
	}
	tokenLine := printed(out, binary+" token ")
	if len(tokenLine) != 1 {
		t.Fatalf("no token command in the tour:\n%s", out)
	}
	if tok, err := shell(t, repo, tokenLine[0]); err != nil || strings.Count(strings.TrimSpace(tok), ".") != 2 {
		t.Fatalf("the printed token command: %v %s", err, tok)
	}
	// The import ran once: through sh again, its first line is refused.
	ingestLine := printed(out, binary+" ingest ")
	if len(ingestLine) == 0 {
		t.Fatalf("no ingest command in the tour:\n%s", out)
	}
	if res, err := shell(t, repo, ingestLine[0]); err == nil || !strings.Contains(res, "refused line 1 of examples/childsupport/ingest/cases.jsonl") {
		t.Fatalf("the printed ingest command, again: %v\n%s", err, res)
	}

	// The tour runs again on the same data, its unique values its own.
	if out, err := tourRun(t, repo, "tour", "--data", data, "--no-pause", "--step", "12"); err != nil ||
		!strings.Contains(out, "an earlier run imported this file") || strings.Contains(out, "Step 11 of") {
		t.Fatalf("the tour again from step 12: %v\n%s", err, out)
	}

	// After a restart, the first record the tour created is there.
	location := regexp.MustCompile(`(?m)^    Location: (\S+)$`).FindStringSubmatch(out)
	run.stop(t, data, syscall.SIGTERM)
	if location == nil {
		t.Fatalf("no Location in the tour:\n%s", out)
	}
	run = startDev(t, data)
	defer run.stop(t, data, syscall.SIGINT)
	token := printedToken(t, run, run.output.String())
	host := regexp.MustCompile(`record host\s+(http://127\.0\.0\.1:\d+)`).FindStringSubmatch(run.output.String())
	req, _ := http.NewRequest(http.MethodGet, host[1]+location[1]+"?accessProfile=caseworker", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after a restart the record the tour created answers %d", resp.StatusCode)
	}
}

// tourCall is one curl command the tour printed and the status it got.
type tourCall struct {
	line   string
	status int
}

// tourCalls returns the curl commands of a tour's output, each with the
// status the tour printed under it.
func tourCalls(t *testing.T, out string) []tourCall {
	t.Helper()
	var calls []tourCall
	lines := strings.Split(out, "\n")
	status := regexp.MustCompile(`^  → (\d{3}) `)
	for i, l := range lines {
		if !strings.HasPrefix(l, "  curl ") {
			continue
		}
		for j := i + 1; j < len(lines) && j < i+4; j++ {
			if m := status.FindStringSubmatch(lines[j]); m != nil {
				n, _ := strconv.Atoi(m[1])
				calls = append(calls, tourCall{line: strings.TrimSpace(l), status: n})
				break
			}
		}
	}
	return calls
}

// tourRun runs the binary in dir under tourLimit, returning its output.
func tourRun(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), tourLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%v did not end within %v:\n%s", args, tourLimit, out)
	}
	return string(out), err
}

// shell runs a command line through sh -c in dir, under tourLimit.
func shell(t *testing.T, dir, line string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), tourLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}
