package dev

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/registrum/registrum/cmd/registrum/internal/invocation"
	"github.com/registrum/registrum/examples/plugins/eicar-verifier/eicar"
	"github.com/registrum/registrum/issuer"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/sdk/tokensource"
)

// TourOptions configure a guided tour of a running dev system.
type TourOptions struct {
	// DataDir is the data folder of the running `registrum dev` (default
	// ./.registrum-dev).
	DataDir string
	// Step is the step the tour starts showing at (1-based; 0 is 1). The
	// steps before it run without output: they make the records it works on.
	Step int
	// NoPause runs every step without waiting for Enter between them, and
	// approves the reviewed request in the review desk itself.
	NoPause bool
	// Command is how the user invokes registrum (invocation.Command).
	Command string
	// In gives the Enter presses between steps; Out receives the tour.
	In  io.Reader
	Out io.Writer
	// Executable is the registrum binary the bulk-import step runs
	// (default: this process's own executable, the registrum that runs the
	// tour; a test running the tour in-process names the built binary).
	Executable string
	// Approve, when set, approves the reviewed request in the desk instead
	// of the tour's own form posts (the browser test drives Chromium with
	// it). It gets the desk's URL, the reviewer's password and the record.
	Approve func(ctx context.Context, deskURL, password, recordID string) error
}

// tourTokenMargin is how long before its expiry the tour replaces the token
// its commands carry, so that a printed command still works when pasted.
const tourTokenMargin = 3 * time.Minute

// tourWait bounds every wait of the tour: a scan, a review, a delivery.
const tourWait = 60 * time.Second

// bodyShown is how much of an answer's body the tour prints.
const bodyShown = 420

// tour is one run of the guided tour: what it found of the running dev,
// the values earlier steps produced, and where it prints.
type tour struct {
	ctx    context.Context
	o      TourOptions
	st     *runningState
	data   string
	base   string
	client *http.Client
	src    *tokensource.Source
	token  string
	// run makes the Idempotency-Keys and unique values of this run its own.
	run string
	// quiet is set while the steps before --step run.
	quiet bool
	// enter receives a value for each line read from In; closed at its end.
	enter chan struct{}
	// ids maps a placeholder ("<case id>") to the record the tour made.
	ids map[string]string
	// location and etag are the walkthrough record's; snapshot the patch's
	// data.snapshot token.
	location, etag, snapshot string
	// request is the change request the journey drafted.
	request string
}

// tourStep is one step: a title, what it shows, and its requests.
type tourStep struct {
	title string
	intro string
	run   func() error
}

// Tour walks through a running dev system step by step: for each request
// it prints the curl command equivalent to what it sends, every value
// filled in, then the answer and what to notice in it.
func Tour(ctx context.Context, o TourOptions) error {
	if o.DataDir == "" {
		o.DataDir = ".registrum-dev"
	}
	if o.Command == "" {
		o.Command = "registrum"
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	data, err := filepath.Abs(o.DataDir)
	if err != nil {
		return fmt.Errorf("tour: %w", err)
	}
	st, err := findRunning(data, o.Command)
	if err != nil {
		return err
	}
	p, err := model.Load(filepath.Join(data, "package"))
	if err != nil {
		return fmt.Errorf("tour: the package registrum dev serves: %w", err)
	}
	key, err := tokensource.LoadKeyFile(st.KeyFile)
	if err != nil {
		return fmt.Errorf("tour: %w", err)
	}
	src, err := tokensource.New(tokensource.Config{TokenURL: st.TokenURL, ClientID: st.ClientID, Key: key, ExpiryMargin: tourTokenMargin})
	if err != nil {
		return fmt.Errorf("tour: %w", err)
	}
	runID := make([]byte, 4)
	rand.Read(runID)
	t := &tour{ctx: ctx, o: o, st: st, data: data, base: st.Host, client: &http.Client{Timeout: 30 * time.Second}, src: src,
		run: hex.EncodeToString(runID), ids: map[string]string{}}
	if resp, err := t.client.Get(t.base + "/"); err != nil {
		return fmt.Errorf("tour: registrum dev holds %s but its record host %s does not answer (%v): restart registrum dev", data, t.base, err)
	} else {
		resp.Body.Close()
	}
	steps := t.plan(p)
	if o.Step > len(steps) || o.Step < 0 {
		return fmt.Errorf("tour: --step %d: the tour of this project has steps 1 to %d", o.Step, len(steps))
	}
	if !o.NoPause && o.In != nil {
		t.enter = make(chan struct{})
		go func() {
			sc := bufio.NewScanner(o.In)
			for sc.Scan() {
				t.enter <- struct{}{}
			}
			close(t.enter)
		}()
	}
	w := o.Out
	first := max(o.Step, 1)
	if first > 1 {
		fmt.Fprintf(w, "Steps 1 to %d run first without output: they make the records step %d works on.\n\n", first-1, first)
	}
	for i, s := range steps {
		n := i + 1
		t.quiet = n < first
		if !t.quiet {
			fmt.Fprintf(w, "━━ Step %d of %d: %s\n\n", n, len(steps), s.title)
			if s.intro != "" {
				fmt.Fprintf(w, "%s\n\n", s.intro)
			}
		}
		if err := s.run(); err != nil {
			return fmt.Errorf("tour: step %d (%s): %w", n, s.title, err)
		}
		if !t.quiet && n < len(steps) {
			if err := t.pause(fmt.Sprintf("Press Enter for step %d (%s), Ctrl-C to stop.", n+1, steps[n].title)); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(w, "That is the tour. Every command above works as printed for the next few minutes (its token expires); docs/tour.md explains each step, and `%s` shows one again.\n", tourCommand(o.Command, data)+" --step N")
	return nil
}

// pause waits for Enter unless the tour runs without pauses.
func (t *tour) pause(prompt string) error {
	if t.enter == nil {
		fmt.Fprintln(t.o.Out)
		return nil
	}
	fmt.Fprintf(t.o.Out, "%s\n", prompt)
	select {
	case _, ok := <-t.enter:
		if !ok {
			t.enter = nil // no more input: go on without pauses
		}
	case <-t.ctx.Done():
		return t.ctx.Err()
	}
	fmt.Fprintln(t.o.Out)
	return nil
}

// say prints a line of the tour unless it runs quietly.
func (t *tour) say(format string, args ...any) {
	if !t.quiet {
		fmt.Fprintf(t.o.Out, format+"\n", args...)
	}
}

// plan lists the steps the package supports, in the order of the tour.
func (t *tour) plan(p *model.Package) []tourStep {
	walk := planWalkthrough(p)
	demo := planDemoClients(p, walk)
	usable := demo.Profiles[issuer.DevStandardClientID]
	journey := planRequestJourney(p, usable, demo.Claims)
	gis := planGIS(p, usable, demo.Claims)
	bulk := planIngest(p, t.st.ProjectDir, usable, demo.Claims)
	reviewed := planReviewedJourney(p, usable, demo.Claims, journey)
	fire := planFire(p, usable)

	steps := []tourStep{{title: "an access token", intro: "Every request below carries a bearer token of the standard demo client, obtained with a private-key-JWT client assertion (OAuth 2.0 client_credentials). This is the command that prints one:", run: t.tokenStep}}
	if walk != nil {
		steps = append(steps,
			tourStep{title: "create a record", intro: fmt.Sprintf("Create two %s records (profile %s), so that the list below has a second page. Each write carries an Idempotency-Key: sent again, it answers the same and writes nothing.", walk.Entity.ID, walk.Profile), run: func() error { return t.createStep(walk) }},
			tourStep{title: "patch under If-Match", intro: "Patch the record under its ETag: If-Match makes the write conditional on the revision you read.", run: func() error { return t.patchStep(walk) }},
			tourStep{title: "a filtered page and its cursor", intro: "List with a $filter, one record a page, then follow the page's nextCursor.", run: func() error { return t.pageStep(walk) }})
		if walk.Snapshot {
			steps = append(steps, tourStep{title: "a snapshot read", intro: "Read the collection as it was recorded just after the patch, through the patch's data.snapshot token: later writes do not show.", run: func() error { return t.snapshotStep(walk) }})
		}
	}
	if journey != nil {
		fresh := t.freshSetup(journey.Setup)
		steps = append(steps,
			tourStep{title: "a change request and its attachment", intro: journeyIntro(journey), run: func() error { return t.draftStep(journey, fresh) }},
			tourStep{title: "submit", intro: "Submit the request through the submit_request action its read offers (href and ifMatch): the plan is computed once and frozen with the attachments' manifest.", run: func() error { return t.submitStep(journey) }},
			tourStep{title: "apply", intro: "Apply the frozen plan through the apply_request action of a new read, naming its proposalVersion and effectDigest.", run: func() error { return t.applyStep(journey) }})
	}
	if reviewed != nil && t.st.Desk != "" {
		steps = append(steps, tourStep{title: "a reviewed request through the review desk", intro: reviewedIntro(reviewed), run: func() error { return t.reviewedStep(reviewed) }})
	}
	if journey != nil && journey.Action != nil {
		steps = append(steps, tourStep{title: "an immediate action", intro: fmt.Sprintf("Run the action %s (profile %s) in one call: first ask which records it would touch and the ifMatch of each, then invoke it naming them.", journey.Action.Action.ID, journey.Action.Profile), run: func() error { return t.actionStep(journey.Action) }})
	}
	if gis != nil {
		steps = append(steps, tourStep{title: "GeoJSON", intro: fmt.Sprintf("The spatial adapter /v1/gis serves %s records as GeoJSON (profile %s). Create one with a point, then read the features in a bounding box.", gis.Entity.ID, gis.Reader), run: func() error { return t.gisStep(gis) }})
	}
	if bulk != nil {
		steps = append(steps, tourStep{title: "bulk import", intro: fmt.Sprintf("Import %d %s records from %s through a resumable ingestion run: the file is cut into chunks of at most %d items that commit one by one; after Ctrl-C or a crash, the command it prints with --run goes on where it stopped.", bulk.Items, bulk.Entity.ID, t.relative(bulk.File), bulk.Entity.Batch.MaximumItems), run: func() error { return t.ingestStep(bulk) }})
	}
	if fire != nil && journey != nil && slicesContainsSetup(journey.Setup, fire.entity.ID) {
		steps = append(steps, tourStep{title: "a delivered webhook", intro: fmt.Sprintf("Hook %s sends a signed CloudEvent after commit when a %s record's %s changes. Change it, then watch the delivery arrive.", fire.hook.EventType, fire.entity.ID, fire.field.APIName), run: func() error { return t.webhookStep(fire) }})
	}
	return steps
}

func journeyIntro(j *RequestJourney) string {
	s := fmt.Sprintf("Change records through a change request: %s (profile %s), reviewed by no one, applied by you. First create the records it refers to, then draft it.", j.Entity.ID, j.Profile)
	if j.Slot != nil && j.Slot.Verification != nil {
		s += fmt.Sprintf(" Slot %s is scanned by the EICAR scanner dev runs: the anti-virus test string is rejected and blocks submit, a clean document is approved.", j.Slot.ID)
	}
	return s
}

func reviewedIntro(j *ReviewedJourney) string {
	cr := j.Entity.ChangeRequest
	return fmt.Sprintf("Request %s (profile %s) is reviewed by authority %s (policy %s): the review desk dev runs. Draft it, attach its document, submit it, approve it in the desk, then apply it (profile %s).",
		j.Entity.ID, j.Profile, cr.Review.Authority, cr.Review.PolicyID, j.ApplyProfile)
}

// relative returns path relative to the working folder when it is inside
// it, else as it is.
func (t *tour) relative(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, abs); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return abs
}

// tourRequest is one HTTP request of the tour, in the terms of its curl
// command.
type tourRequest struct {
	method string
	// path follows the host's base URL; it may hold a query.
	path string
	// query are -G --data-urlencode pairs, in order.
	query [][2]string
	// header are the headers besides Authorization, in order.
	header [][2]string
	body   string
	// binary sends the body with --data-binary (raw bytes) instead of -d.
	binary bool
	// anonymous sends no token.
	anonymous bool
}

// tourAnswer is an answer of the record host.
type tourAnswer struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the answer's body into v.
func (a *tourAnswer) json(v any) error {
	if err := json.Unmarshal(a.body, v); err != nil {
		return fmt.Errorf("the answer is not the JSON expected: %w: %s", err, trim(a.body))
	}
	return nil
}

// fill replaces the placeholders of records the tour made by their ids.
func (t *tour) fill(s string) string {
	for k, v := range t.ids {
		s = strings.ReplaceAll(s, k, v)
	}
	return s
}

// currentToken returns the token the commands carry, a fresh one when it
// nears its expiry (saying so).
func (t *tour) currentToken() (string, error) {
	tok, err := t.src.Token(t.ctx)
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	if t.token != "" && tok.AccessToken != t.token {
		t.say("(A fresh token: the one before expires within %v. The commands from here carry the new one.)\n", tourTokenMargin)
	}
	t.token = tok.AccessToken
	return t.token, nil
}

// curl is the curl command equivalent to r, every value in it.
func (t *tour) curl(r tourRequest, token string) string {
	q := invocation.ShellQuote
	parts := []string{"curl", "-sS", "-i"}
	if len(r.query) > 0 {
		parts = append(parts, "-G")
	}
	if r.method != http.MethodGet {
		parts = append(parts, "-X", r.method)
	}
	parts = append(parts, q(t.base+r.path))
	if !r.anonymous {
		parts = append(parts, "-H", q("Authorization: Bearer "+token))
	}
	for _, h := range r.header {
		parts = append(parts, "-H", q(h[0]+": "+h[1]))
	}
	for _, kv := range r.query {
		parts = append(parts, "--data-urlencode", q(kv[0]+"="+kv[1]))
	}
	if r.body != "" {
		flag := "-d"
		if r.binary {
			flag = "--data-binary"
		}
		parts = append(parts, flag, q(r.body))
	}
	return strings.Join(parts, " ")
}

// send performs r and returns the answer and the curl command equivalent
// to it, printing nothing.
func (t *tour) send(r tourRequest) (*tourAnswer, string, error) {
	token := ""
	if !r.anonymous {
		var err error
		if token, err = t.currentToken(); err != nil {
			return nil, "", err
		}
	}
	target := t.base + r.path
	if len(r.query) > 0 {
		var enc []string
		for _, kv := range r.query {
			enc = append(enc, url.QueryEscape(kv[0])+"="+url.QueryEscape(kv[1]))
		}
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + strings.Join(enc, "&")
	}
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(t.ctx, r.method, target, body)
	if err != nil {
		return nil, "", err
	}
	if !r.anonymous {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for _, h := range r.header {
		req.Header.Set(h[0], h[1])
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	return &tourAnswer{status: resp.StatusCode, header: resp.Header, body: b}, t.curl(r, token), nil
}

// show prints a command and its answer, then what to notice.
func (t *tour) show(line string, a *tourAnswer, notice string) {
	if t.quiet {
		return
	}
	w := t.o.Out
	fmt.Fprintf(w, "  %s\n\n", line)
	fmt.Fprintf(w, "  → %d %s\n", a.status, http.StatusText(a.status))
	for _, h := range []string{"Location", "ETag", "Idempotent-Replayed", "Content-Disposition"} {
		if v := a.header.Get(h); v != "" {
			fmt.Fprintf(w, "    %s: %s\n", h, v)
		}
	}
	if ct := a.header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		fmt.Fprintf(w, "    Content-Type: %s\n", ct)
	}
	if len(a.body) > 0 {
		fmt.Fprintf(w, "    %s\n", trim(a.body))
	}
	if notice != "" {
		fmt.Fprintf(w, "  Notice: %s\n", notice)
	}
	fmt.Fprintln(w)
}

// call performs r, prints it with its answer and notice, and checks that
// the answer has status want.
func (t *tour) call(r tourRequest, want int, notice string) (*tourAnswer, error) {
	a, line, err := t.send(r)
	if err != nil {
		return nil, err
	}
	t.show(line, a, notice)
	if a.status != want {
		return a, fmt.Errorf("%s %s answered %d, want %d: %s", r.method, r.path, a.status, want, trim(a.body))
	}
	return a, nil
}

// trim is an answer's body as the tour prints it: on one line, at most
// bodyShown bytes.
func trim(b []byte) string {
	var c bytes.Buffer
	if json.Compact(&c, b) == nil {
		b = c.Bytes()
	}
	s := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		if !unicode.IsPrint(r) {
			return '.'
		}
		return r
	}, string(b))
	if len(s) > bodyShown {
		cut := bodyShown
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = fmt.Sprintf("%s… (%d bytes)", s[:cut], len(b))
	}
	return s
}

func utf8Start(c byte) bool { return c&0xC0 != 0x80 }

// key is an Idempotency-Key of this run of the tour.
func (t *tour) key(what string) [2]string {
	return [2]string{"Idempotency-Key", "tour-" + t.run + "-" + what}
}

var jsonBody = [2]string{"Content-Type", "application/json"}

// tokenStep obtains the first token with the library `registrum token`
// uses, printing the command.
func (t *tour) tokenStep() error {
	q := invocation.ShellQuote
	t.say("  %s token --token-url %s --client-id %s --key %s\n", t.o.Command, q(t.st.TokenURL), q(t.st.ClientID), q(t.st.KeyFile))
	tok, err := t.src.Token(t.ctx)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	t.token = tok.AccessToken
	t.say("  → %s… (an ES256 at+jwt, valid until %s)", tok.AccessToken[:min(32, len(tok.AccessToken))], tok.Expiry.Local().Format("15:04:05"))
	t.say("  Notice: the token is short-lived; the tour puts it in every command below and replaces it when it nears its expiry. In your shell: export TOKEN=$(the command above).\n")
	return nil
}

// createStep creates the walkthrough's two records.
func (t *tour) createStep(w *Walkthrough) error {
	path := "/v1/records/" + w.Entity.Route + w.query()
	for i, body := range w.Create {
		notice := "201 and a Location naming the new record; its ETag is its revision, the precondition of the next write."
		if i == 1 {
			notice = "the same body, another Idempotency-Key: a second record."
		}
		a, err := t.call(tourRequest{method: http.MethodPost, path: path, header: [][2]string{jsonBody, t.key(fmt.Sprintf("create-%d", i+1))}, body: body}, http.StatusCreated, notice)
		if err != nil {
			return err
		}
		if i == 0 {
			t.location, t.etag = a.header.Get("Location"), a.header.Get("ETag")
		}
	}
	if t.location == "" || t.etag == "" {
		return errors.New("the create answered no Location or ETag")
	}
	return nil
}

// patchStep patches the first record under its ETag, then shows the same
// patch refused under the old one.
func (t *tour) patchStep(w *Walkthrough) error {
	patch := tourRequest{method: http.MethodPatch, path: t.location + w.query(),
		header: [][2]string{{"If-Match", t.etag}, {"Content-Type", "application/json-patch+json"}, t.key("patch")}, body: w.Patch}
	a, err := t.call(patch, http.StatusOK, "a new ETag (the next revision) and data.snapshot, a token to read the collection as of this write (step 5).")
	if err != nil {
		return err
	}
	var doc struct {
		Data struct {
			Snapshot string `json:"snapshot"`
		} `json:"data"`
	}
	if err := a.json(&doc); err != nil {
		return err
	}
	t.snapshot = doc.Data.Snapshot
	stale := patch
	stale.header = [][2]string{{"If-Match", t.etag}, {"Content-Type", "application/json-patch+json"}}
	t.etag = a.header.Get("ETag")
	_, err = t.call(stale, http.StatusPreconditionFailed, "the same patch under the ETag read before it is refused: someone (you) changed the record since; read it again and decide.")
	return err
}

// pageStep lists with the walkthrough's filter, one a page, and follows
// the cursor.
func (t *tour) pageStep(w *Walkthrough) error {
	path := "/v1/records/" + w.Entity.Route + w.query()
	a, err := t.call(tourRequest{method: http.MethodGet, path: path, query: [][2]string{{"$filter", w.Filter}, {"$top", "1"}}}, http.StatusOK,
		"one item, and pageInfo.nextCursor: an opaque cursor bound to this query.")
	if err != nil {
		return err
	}
	var page struct {
		PageInfo struct {
			NextCursor *string `json:"nextCursor"`
		} `json:"pageInfo"`
	}
	if err := a.json(&page); err != nil {
		return err
	}
	if page.PageInfo.NextCursor == nil {
		return fmt.Errorf("the first page has no nextCursor: %s", trim(a.body))
	}
	_, err = t.call(tourRequest{method: http.MethodGet, path: path, query: [][2]string{{"$skiptoken", *page.PageInfo.NextCursor}}}, http.StatusOK,
		"the next page: the cursor carries the filter and the order, so only $skiptoken is sent.")
	return err
}

// snapshotStep reads the collection as of the patch.
func (t *tour) snapshotStep(w *Walkthrough) error {
	if t.snapshot == "" {
		return errors.New("the patch answered no data.snapshot")
	}
	_, err := t.call(tourRequest{method: http.MethodGet, path: "/v1/records/" + w.Entity.Route + ":snapshot" + w.query(), query: [][2]string{{"snapshot", t.snapshot}}}, http.StatusOK,
		"the collection as recorded just after the patch, whatever was written since; the answer names the same snapshot.")
	return err
}

// freshSetup returns the setup records with this run's own values in their
// unique fields, so that the tour can run again on the same data.
func (t *tour) freshSetup(setup []*SetupRecord) []*SetupRecord {
	out := make([]*SetupRecord, len(setup))
	for i, rec := range setup {
		cp := *rec
		cp.Body, _ = freshBody(rec.Body, rec.Unique)
		out[i] = &cp
	}
	return out
}

// freshBody gives the unique string fields of a {"data": …} body new
// values (their last run of digits replaced by random digits), returning
// the body and the values replaced, old to new.
func freshBody(body string, unique []string) (string, map[string]string) {
	if len(unique) == 0 {
		return body, nil
	}
	var doc map[string]map[string]any
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&doc) != nil {
		return body, nil
	}
	changed := map[string]string{}
	for _, name := range unique {
		if v, ok := doc["data"][name].(string); ok {
			doc["data"][name] = freshValue(v)
			changed[v] = doc["data"][name].(string)
		}
	}
	return placeholderBody(doc["data"]), changed
}

// freshValue replaces the last run of digits of v by random digits, or
// appends some when it has none.
func freshValue(v string) string {
	end := strings.LastIndexFunc(v, unicode.IsDigit) + 1
	if end == 0 {
		return v + "-" + randomDigits(6)
	}
	start := end
	for start > 0 && unicode.IsDigit(rune(v[start-1])) {
		start--
	}
	return v[:start] + randomDigits(end-start) + v[end:]
}

func randomDigits(n int) string {
	var b strings.Builder
	for range n {
		d, _ := rand.Int(rand.Reader, big.NewInt(10))
		b.WriteString(d.String())
	}
	return b.String()
}

// createSetup creates the records a request refers to, keeping their ids.
func (t *tour) createSetup(setup []*SetupRecord) error {
	for _, rec := range setup {
		if _, done := t.ids[rec.Placeholder]; done {
			continue
		}
		a, err := t.call(tourRequest{method: http.MethodPost, path: "/v1/records/" + rec.Entity.Route + profileQuery(rec.Profile, rec.Default),
			header: [][2]string{jsonBody, t.key("create-" + rec.Entity.ID)}, body: t.fill(rec.Body)}, http.StatusCreated,
			fmt.Sprintf("data.recordIdentifier is the %s the later bodies name.", rec.Entity.ID))
		if err != nil {
			return err
		}
		var doc tourEnvelope
		if err := a.json(&doc); err != nil {
			return err
		}
		t.ids[rec.Placeholder] = doc.Data.RecordIdentifier
	}
	return nil
}

// tourEnvelope is what the tour reads of a record envelope or an action's
// answer.
type tourEnvelope struct {
	Data struct {
		RecordIdentifier string         `json:"recordIdentifier"`
		DomainData       map[string]any `json:"domainData"`
		Request          *tourRequestState
	} `json:"data"`
	Request *tourRequestState `json:"request"`
	// etag is the read's ETag header: the validator of slot writes.
	etag string
}

// tourRequestState is a change request's state in a read.
type tourRequestState struct {
	EngineState  string `json:"engineState"`
	EffectDigest string `json:"effectDigest"`
	Review       *struct {
		Result *struct {
			State string `json:"state"`
		} `json:"result"`
	} `json:"review"`
	Actions []tourAction `json:"actions"`
}

// tourAction is an action a read offers.
type tourAction struct {
	Operation       string `json:"operation"`
	Href            string `json:"href"`
	IfMatch         string `json:"ifMatch"`
	ProposalVersion int64  `json:"proposalVersion"`
	EffectDigest    string `json:"effectDigest"`
}

// offered returns the offered action op of a request, nil when it is not.
func (s *tourRequestState) offered(op string) *tourAction {
	if s == nil {
		return nil
	}
	for i := range s.Actions {
		if s.Actions[i].Operation == op {
			return &s.Actions[i]
		}
	}
	return nil
}

// read reads a record: printed with notice when shown, else only sent.
func (t *tour) read(path string, shown bool, notice string) (*tourEnvelope, error) {
	r := tourRequest{method: http.MethodGet, path: path}
	var a *tourAnswer
	var err error
	if shown {
		a, err = t.call(r, http.StatusOK, notice)
	} else {
		var line string
		if a, line, err = t.send(r); err == nil && a.status != http.StatusOK {
			t.show(line, a, "")
			err = fmt.Errorf("GET %s answered %d", path, a.status)
		}
	}
	if err != nil {
		return nil, err
	}
	var doc tourEnvelope
	if err := a.json(&doc); err != nil {
		return nil, err
	}
	doc.etag = a.header.Get("ETag")
	return &doc, nil
}

// readUntil reads a record until done holds of it, then prints that read
// once with notice.
func (t *tour) readUntil(path, what string, done func(*tourEnvelope) bool, notice string) (*tourEnvelope, error) {
	deadline := time.Now().Add(tourWait)
	for n := 1; ; n++ {
		a, line, err := t.send(tourRequest{method: http.MethodGet, path: path})
		if err != nil {
			return nil, err
		}
		var doc tourEnvelope
		if a.status == http.StatusOK && a.json(&doc) == nil && done(&doc) {
			doc.etag = a.header.Get("ETag")
			if n > 1 {
				notice = fmt.Sprintf("(read %d times until %s) %s", n, what, notice)
			}
			t.show(line, a, notice)
			return &doc, nil
		}
		if a.status != http.StatusOK || time.Now().After(deadline) {
			t.show(line, a, "")
			return nil, fmt.Errorf("waited %v for %s", tourWait, what)
		}
		select {
		case <-t.ctx.Done():
			return nil, t.ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// slotStatus is the verificationStatus of slot in a read.
func slotStatus(doc *tourEnvelope, slot string) string {
	m, _ := doc.Data.DomainData[slot].(map[string]any)
	s, _ := m["verificationStatus"].(string)
	return s
}

// actionBody is the body of a submit_request: nothing is required (an
// actorReference naming who acts is optional; the host records the caller).
func actionBody() string {
	return `{}`
}

// draftStep creates the setup records and the draft, then fills its slot:
// the EICAR test string first when the slot is scanned.
func (t *tour) draftStep(j *RequestJourney, setup []*SetupRecord) error {
	if err := t.createSetup(setup); err != nil {
		return err
	}
	e, q := j.Entity, profileQuery(j.Profile, j.Default)
	a, err := t.call(tourRequest{method: http.MethodPost, path: "/v1/records/" + e.Route + q, header: [][2]string{jsonBody, t.key("draft")}, body: t.fill(j.Draft)}, http.StatusCreated,
		"the request is a record too: a draft, editable until it is submitted.")
	if err != nil {
		return err
	}
	var doc tourEnvelope
	if err := a.json(&doc); err != nil {
		return err
	}
	t.request = doc.Data.RecordIdentifier
	path := "/v1/records/" + e.Route + "/" + t.request + q
	d, err := t.read(path, true, "data.request.actions lists what you may do now, each with its href and ifMatch.")
	if err != nil {
		return err
	}
	if j.Slot == nil {
		return nil
	}
	slot := j.Slot
	slotPath := "/v1/records/" + e.Route + "/" + t.request + "/attachments/" + slot.ID + q
	attach := func(content, key string, d *tourEnvelope, notice string) error {
		if d.etag == "" {
			return fmt.Errorf("the read of the draft has no ETag")
		}
		_, err := t.call(tourRequest{method: http.MethodPatch, path: slotPath, header: [][2]string{{"If-Match", d.etag}, t.key(key), {"Content-Type", j.SlotType}}, body: content, binary: true}, http.StatusOK, notice)
		return err
	}
	if v := slot.Verification; v != nil {
		if err := attach(string(eicar.Signature()), "attach-eicar", d, fmt.Sprintf("the EICAR anti-virus test string, attached under the draft's ETag; domainData.%s.verificationStatus is pending until the scanner (verifier %s) answers.", slot.ID, v.Verifier)); err != nil {
			return err
		}
		d, err = t.readUntil(path, "the scanner rejects it", func(d *tourEnvelope) bool { return slotStatus(d, slot.ID) == "rejected" },
			fmt.Sprintf("domainData.%s.verificationStatus is rejected, and data.request.actions no longer offers submit_request: a slot holding rejected content blocks it.", slot.ID))
		if err != nil {
			return err
		}
		if sub := d.Data.Request.offered(model.OpSubmitRequest); sub != nil {
			return fmt.Errorf("submit_request is offered while slot %s holds rejected content", slot.ID)
		}
		submit := "/v1/records/" + e.Route + "/" + t.request + "/actions/submit" + q
		if _, err := t.call(tourRequest{method: http.MethodPost, path: submit, header: [][2]string{{"If-Match", d.etag}, t.key("submit-eicar"), jsonBody}, body: actionBody()}, http.StatusPreconditionFailed,
			"412 precondition.failed: sent anyway, the submit is refused, as the missing offer said."); err != nil {
			return err
		}
	}
	if err := attach(journeyAttachment, "attach", d, "the clean document replaces it, at the request's next revision."); err != nil {
		return err
	}
	if slot.Verification != nil {
		if _, err := t.readUntil(path, "the scanner approves it", func(d *tourEnvelope) bool { return slotStatus(d, slot.ID) == "approved" },
			fmt.Sprintf("domainData.%s.verificationStatus is approved: only now may it be downloaded and the request submitted.", slot.ID)); err != nil {
			return err
		}
	}
	_, err = t.call(tourRequest{method: http.MethodGet, path: "/v1/records/" + e.Route + "/" + t.request + "/attachments/" + slot.ID + withQuery(q, "proposalVersion=1")}, http.StatusOK,
		"the verified bytes back, as an attachment.")
	return err
}

// submitStep submits the journey's request and reads the record it changes.
func (t *tour) submitStep(j *RequestJourney) error {
	e, q := j.Entity, profileQuery(j.Profile, j.Default)
	path := "/v1/records/" + e.Route + "/" + t.request + q
	d, err := t.read(path, true, "submit_request is offered: its href and ifMatch are the next command's.")
	if err != nil {
		return err
	}
	sub := d.Data.Request.offered(model.OpSubmitRequest)
	if sub == nil {
		return fmt.Errorf("the draft offers no submit_request: %+v", d.Data.Request)
	}
	if _, err := t.call(tourRequest{method: http.MethodPost, path: sub.Href, header: [][2]string{{"If-Match", sub.IfMatch}, t.key("submit"), jsonBody}, body: actionBody()}, http.StatusOK,
		"request.engineState is submitted and request.effectDigest names the frozen plan; the same Idempotency-Key replays this answer."); err != nil {
		return err
	}
	if rec := j.Changed; rec != nil {
		_, err = t.read("/v1/records/"+rec.Entity.Route+"/"+t.ids[rec.Placeholder]+profileQuery(rec.Profile, rec.Default), true,
			fmt.Sprintf("the %s the request will change: data.requestPresence names the pending request.", rec.Entity.ID))
	}
	return err
}

// applyStep applies the journey's request and reads the changed record.
func (t *tour) applyStep(j *RequestJourney) error {
	e, q := j.Entity, profileQuery(j.Profile, j.Default)
	d, err := t.read("/v1/records/"+e.Route+"/"+t.request+q, true, "apply_request is offered with the proposalVersion and effectDigest it must name.")
	if err != nil {
		return err
	}
	if err := t.apply(d.Data.Request, "apply"); err != nil {
		return err
	}
	if rec := j.Changed; rec != nil {
		_, err = t.read("/v1/records/"+rec.Entity.Route+"/"+t.ids[rec.Placeholder]+profileQuery(rec.Profile, rec.Default), true,
			fmt.Sprintf("the %s as the plan changed it.", rec.Entity.ID))
	}
	return err
}

// apply applies a request through the apply_request action r offers.
func (t *tour) apply(r *tourRequestState, key string) error {
	ap := r.offered(model.OpApplyRequest)
	if ap == nil {
		return fmt.Errorf("apply_request is not offered: %+v", r)
	}
	body := fmt.Sprintf(`{"proposalVersion":%d,"effectDigest":%q}`, ap.ProposalVersion, ap.EffectDigest)
	_, err := t.call(tourRequest{method: http.MethodPost, path: ap.Href, header: [][2]string{{"If-Match", ap.IfMatch}, t.key(key), jsonBody}, body: body}, http.StatusOK,
		"request.engineState is applied: every effect was written in one transaction.")
	return err
}

// reviewedStep runs the reviewed journey: draft, attach, submit, the
// desk's approval, apply, and the record it changed or created.
func (t *tour) reviewedStep(j *ReviewedJourney) error {
	setup := t.freshSetup(j.Setup)
	if err := t.createSetup(setup); err != nil {
		return err
	}
	draft, changed := freshBody(j.Draft, j.Unique)
	e, q, aq := j.Entity, profileQuery(j.Profile, j.Default), profileQuery(j.ApplyProfile, j.ApplyDefault)
	a, err := t.call(tourRequest{method: http.MethodPost, path: "/v1/records/" + e.Route + q, header: [][2]string{jsonBody, t.key("draft-" + e.ID)}, body: t.fill(draft)}, http.StatusCreated,
		"a draft of the reviewed request.")
	if err != nil {
		return err
	}
	var doc tourEnvelope
	if err := a.json(&doc); err != nil {
		return err
	}
	id := doc.Data.RecordIdentifier
	path := "/v1/records/" + e.Route + "/" + id + q
	readNotice := "submit_request is offered."
	if s := j.Slot; s != nil {
		readNotice = fmt.Sprintf("submit_request is not offered while the required %s is empty; the ETag is the attachment's If-Match.", s.ID)
	}
	d, err := t.read(path, true, readNotice)
	if err != nil {
		return err
	}
	if s := j.Slot; s != nil {
		if d.etag == "" {
			return fmt.Errorf("the read of the draft has no ETag")
		}
		if _, err := t.call(tourRequest{method: http.MethodPatch, path: "/v1/records/" + e.Route + "/" + id + "/attachments/" + s.ID + q,
			header: [][2]string{{"If-Match", d.etag}, t.key("attach-" + e.ID), {"Content-Type", j.SlotType}}, body: reviewedAttachment, binary: true}, http.StatusOK,
			fmt.Sprintf("the required %s, attached under the draft's ETag; the request is at a new revision.", s.ID)); err != nil {
			return err
		}
		if d, err = t.read(path, true, "submit_request is offered now, under the new revision's ifMatch."); err != nil {
			return err
		}
	}
	sub := d.Data.Request.offered(model.OpSubmitRequest)
	if sub == nil {
		return fmt.Errorf("the draft offers no submit_request: %+v", d.Data.Request)
	}
	if _, err := t.call(tourRequest{method: http.MethodPost, path: sub.Href, header: [][2]string{{"If-Match", sub.IfMatch}, t.key("submit-" + e.ID), jsonBody}, body: actionBody()}, http.StatusOK,
		"submitted: the record host sends the frozen proposal, with its attachments' manifest, to the review desk."); err != nil {
		return err
	}
	applierPath := "/v1/records/" + e.Route + "/" + id + aq
	if err := t.review(e, id, applierPath); err != nil {
		return err
	}
	ready, err := t.readUntil(applierPath, "the host sees the approval", func(d *tourEnvelope) bool { return d.Data.Request.offered(model.OpApplyRequest) != nil },
		fmt.Sprintf("read as its applier (profile %s): data.request.review.result.state is approved, and apply_request is offered.", j.ApplyProfile))
	if err != nil {
		return err
	}
	if err := t.apply(ready.Data.Request, "apply-"+e.ID); err != nil {
		return err
	}
	if rec := j.Changed; rec != nil {
		_, err = t.read("/v1/records/"+rec.Entity.Route+"/"+t.ids[rec.Placeholder]+profileQuery(rec.Profile, rec.Default), true,
			fmt.Sprintf("the %s the request changed.", rec.Entity.ID))
		return err
	}
	if f := j.Find; f != nil {
		filter := f.Filter
		for old, fresh := range changed {
			filter = strings.ReplaceAll(filter, "'"+strings.ReplaceAll(old, "'", "''")+"'", "'"+strings.ReplaceAll(fresh, "'", "''")+"'")
		}
		notice := fmt.Sprintf("the %s the request created.", f.Entity.ID)
		if why := notCarried(j.Entity, f.Entity); why != "" {
			notice += " " + why
		}
		_, err = t.call(tourRequest{method: http.MethodGet, path: "/v1/records/" + f.Entity.Route + profileQuery(f.Profile, f.Default), query: [][2]string{{"$filter", filter}}}, http.StatusOK, notice)
	}
	return err
}

// notCarried says, in one sentence or two, what a plan cannot write into
// the record created from request entity req: a reference of created back
// to the request (no value source of an effect or a planner yields the
// request's own record id), and, for declarative effects, one record per
// item of a list the request holds (each effect writes one record).
// Empty when neither applies.
func notCarried(req, created *model.Entity) string {
	var why []string
	for _, f := range created.Fields {
		if f.Type == model.TypeReference && f.Target == req.ID {
			why = append(why, fmt.Sprintf("Its %s stays empty: a plan takes its values from the request's fields, literals and earlier creates, never from the request's own record id, so nothing can point back at the %s.", f.APIName, req.ID))
			break
		}
	}
	if cr := req.ChangeRequest; cr != nil && cr.Planner == nil {
		for _, f := range req.Fields {
			var schema struct {
				Type string `json:"type"`
			}
			if f.Type == model.TypeStructured && json.Unmarshal(f.Schema, &schema) == nil && schema.Type == "array" {
				why = append(why, fmt.Sprintf("Nor is a record made per item of %s: each declared effect writes one record; that takes a planner (docs/authoring.md).", f.APIName))
				break
			}
		}
	}
	return strings.Join(why, " ")
}

// review has the submitted request approved in the review desk: by the
// tour itself when it runs without pauses (or the user asks it to), else by
// the user in a browser while the tour reads the request as its applier
// (applierPath) until the host has seen the approval.
func (t *tour) review(e *model.Entity, id, applierPath string) error {
	if t.quiet || t.enter == nil {
		t.say("The tour approves it in the review desk %s itself, as a reviewer would: it signs in with the password in %s, opens the %s request of record %s and presses Approve.\n", t.st.Desk, t.st.PasswordFile, e.ID, id)
		if t.o.Approve != nil {
			pw, err := os.ReadFile(t.st.PasswordFile)
			if err != nil {
				return fmt.Errorf("review desk: %w", err)
			}
			return t.o.Approve(t.ctx, t.st.Desk, strings.TrimSpace(string(pw)), id)
		}
		return approveInDesk(t.ctx, t.client, t.st.Desk, t.st.PasswordFile, id)
	}
	t.say("Now approve it as the reviewer: open %s in a browser, sign in with the password in %s, open the %s request of record %s, and press Approve.", t.st.Desk, t.st.PasswordFile, e.ID, id)
	t.say("The tour goes on once the host sees the approval; press Enter to have the tour approve it for you instead.\n")
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case _, ok := <-t.enter:
			if !ok {
				t.enter = nil
			}
			return approveInDesk(t.ctx, t.client, t.st.Desk, t.st.PasswordFile, id)
		case <-tick.C:
			a, _, err := t.send(tourRequest{method: http.MethodGet, path: applierPath})
			if err != nil {
				return err
			}
			var doc tourEnvelope
			if a.status == http.StatusOK && a.json(&doc) == nil && doc.Data.Request.offered(model.OpApplyRequest) != nil {
				return nil
			}
		case <-t.ctx.Done():
			return t.ctx.Err()
		}
	}
}

// actionStep asks an action's target-conditions and invokes it under them.
func (t *tour) actionStep(st *ActionStep) error {
	a, q := st.Action, profileQuery(st.Profile, st.Default)
	in := t.fill(placeholderJSON(map[string]any{"input": st.Input}))
	ans, err := t.call(tourRequest{method: http.MethodPost, path: "/v1/actions/" + a.ID + "/target-conditions" + q, header: [][2]string{jsonBody}, body: in}, http.StatusOK,
		fmt.Sprintf("preconditions.%s.ifMatch is the revision of the record effect %s would change.", st.Effect, st.Effect))
	if err != nil {
		return err
	}
	var tc struct {
		Preconditions map[string]struct {
			IfMatch string `json:"ifMatch"`
		} `json:"preconditions"`
	}
	if err := ans.json(&tc); err != nil {
		return err
	}
	pre, ok := tc.Preconditions[st.Effect]
	if !ok {
		return fmt.Errorf("target-conditions names no effect %s: %s", st.Effect, trim(ans.body))
	}
	var body map[string]any
	json.Unmarshal([]byte(in), &body)
	body["preconditions"] = map[string]any{st.Effect: map[string]any{"ifMatch": pre.IfMatch}}
	_, err = t.call(tourRequest{method: http.MethodPost, path: "/v1/actions/" + a.ID + q, header: [][2]string{t.key(a.ID), jsonBody}, body: placeholderJSON(body)}, http.StatusOK,
		"results lists each record written, at its new revision; had one changed since the target-conditions read, the answer would be 412 and nothing written.")
	return err
}

// gisStep creates a record with a point and reads it back as GeoJSON.
func (t *tour) gisStep(s *GISStep) error {
	rec := t.freshSetup([]*SetupRecord{s.Create})[0]
	if _, err := t.call(tourRequest{method: http.MethodPost, path: "/v1/records/" + s.Entity.Route + profileQuery(rec.Profile, rec.Default), header: [][2]string{jsonBody, t.key("create-point")}, body: t.fill(rec.Body)}, http.StatusCreated,
		fmt.Sprintf("%s is a GeoJSON Point, longitude then latitude.", s.Entity.Field(s.Entity.GeoJSON.GeometryField).APIName)); err != nil {
		return err
	}
	q := profileQuery(s.Reader, s.ReaderDefault)
	if _, err := t.call(tourRequest{method: http.MethodGet, path: "/v1/gis/collections" + q, anonymous: s.Anonymous}, http.StatusOK,
		"the spatial collections this profile may read."); err != nil {
		return err
	}
	_, err := t.call(tourRequest{method: http.MethodGet, path: "/v1/gis/collections/" + s.Entity.Route + "/items" + q, anonymous: s.Anonymous, query: [][2]string{{"bbox", s.BBox}, {"limit", "100"}}}, http.StatusOK,
		"application/geo+json: a FeatureCollection of the points inside the box (west,south,east,north in CRS84 degrees); a next link pages on.")
	return err
}

// ingestStep runs `registrum ingest` on the project's file.
func (t *tour) ingestStep(s *IngestStep) error {
	args := []string{"ingest", "--url", t.base, "--route", s.Entity.Route, "--profile", s.Profile,
		"--client-id", t.st.ClientID, "--key", t.st.KeyFile, "--token-url", t.st.TokenURL, t.relative(s.File)}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = invocation.ShellQuote(a)
	}
	t.say("  %s %s\n", t.o.Command, strings.Join(quoted, " "))
	exe := t.o.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(t.ctx, exe, args...)
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > 6 {
		lines = lines[len(lines)-6:]
	}
	for _, l := range lines {
		t.say("    %s", trim([]byte(l)))
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		t.say("  Notice: each chunk committed atomically, its receipt kept by the host; the command takes its own token with the client's key (--client-id, --key).\n")
		return nil
	case errors.As(err, &ee) && len(s.Unique) > 0 && strings.Contains(string(out), "refused line 1 "):
		t.say("  Notice: %s is unique and an earlier run imported this file: the new run is refused at its first line and writes nothing. Rows are never skipped.\n", strings.Join(s.Unique, ", "))
		return nil
	}
	return fmt.Errorf("%s ingest: %v\n%s", t.o.Command, err, out)
}

// fireStep is how the tour fires a url hook: a patch of field on a record
// of entity through profile, the record being the one the journey made.
type fireStep struct {
	entity  *model.Entity
	hook    *model.Hook
	field   *model.Field
	profile *model.Profile
}

// planFire picks the first url hook fired by a change of a field a usable
// profile may patch.
func planFire(p *model.Package, usable []string) *fireStep {
	for _, e := range p.Entities {
		for _, h := range e.Hooks {
			if h.Handler == nil || h.Handler.Kind != model.HandlerURL || h.Trigger != model.TriggerPatched || h.When == nil || len(h.When.Changed) == 0 {
				continue
			}
			f := e.Field(h.When.Changed[0])
			if f == nil {
				continue
			}
			for _, pr := range p.Profiles {
				g := pr.Grant(e.ID)
				if pr.Anonymous || g == nil || !g.Allows(model.OpPatch) || !g.Allows(model.OpGet) || !g.CanWrite(f.ID) || !containsString(usable, pr.ID) {
					continue
				}
				return &fireStep{entity: e, hook: h, field: f, profile: pr}
			}
		}
	}
	return nil
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// webhookStep changes the hook's field on the journey's record and waits
// for the example receiver to log the verified delivery.
func (t *tour) webhookStep(f *fireStep) error {
	placeholder := "<" + f.entity.ID + " id>"
	id, ok := t.ids[placeholder]
	if !ok {
		return fmt.Errorf("no %s record was made before this step", f.entity.ID)
	}
	path := "/v1/records/" + f.entity.Route + "/" + id + profileQuery(f.profile.ID, f.profile.Default)
	a, err := t.call(tourRequest{method: http.MethodGet, path: path}, http.StatusOK, "its ETag is the next patch's If-Match.")
	if err != nil {
		return err
	}
	var doc tourEnvelope
	if err := a.json(&doc); err != nil {
		return err
	}
	value, ok := changedValue(f.field, doc.Data.DomainData[f.field.APIName])
	if !ok {
		return fmt.Errorf("no other value of %s to patch to", f.field.APIName)
	}
	val, _ := json.Marshal(value)
	var before int64
	if fi, err := os.Stat(t.st.ReceiverLog); err == nil {
		before = fi.Size()
	}
	patch := fmt.Sprintf(`[{"op":"replace","path":"/data/%s","value":%s}]`, f.field.APIName, val)
	if _, err := t.call(tourRequest{method: http.MethodPatch, path: path, header: [][2]string{{"If-Match", a.header.Get("ETag")}, {"Content-Type", "application/json-patch+json"}, t.key("fire")}, body: patch}, http.StatusOK,
		fmt.Sprintf("%s changed: the host delivers %s after the commit, signed, retried until the receiver answers.", f.field.APIName, f.hook.EventType)); err != nil {
		return err
	}
	if t.st.ReceiverLog == "" {
		t.say("dev delivers to your own destinations (--event-destinations): look there for %s.\n", f.hook.EventType)
		return nil
	}
	deadline := time.Now().Add(tourWait)
	for {
		got, _ := readFrom(t.st.ReceiverLog, before)
		if strings.Contains(got, "verified "+f.hook.EventType) {
			t.say("The example receiver (examples/webhookreceiver) verified it with sdk/webhook; its log, %s:", t.st.ReceiverLog)
			for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
				t.say("    %s", trim([]byte(l)))
			}
			t.say("  Notice: `tail -f %s` shows every delivery; `%s deliveries list --config %s` lists their states.\n", t.st.ReceiverLog, t.o.Command, filepath.Join(t.data, "registrum.yaml"))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no verified %s in %s after %v", f.hook.EventType, t.st.ReceiverLog, tourWait)
		}
		select {
		case <-t.ctx.Done():
			return t.ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// changedValue is a sample value of f other than current.
func changedValue(f *model.Field, current any) (any, bool) {
	if f.Type == model.TypeCode {
		for _, v := range f.Values {
			if v != current {
				return v, true
			}
		}
		return nil, false
	}
	for variant := range 3 {
		if v, ok := sampleValue(f, variant); ok && fmt.Sprint(v) != fmt.Sprint(current) {
			return v, true
		}
	}
	return nil, false
}

// readFrom returns what the file holds after offset.
func readFrom(path string, offset int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(f)
	return string(b), err
}

// slicesContainsSetup reports whether setup creates a record of entity.
func slicesContainsSetup(setup []*SetupRecord, entity string) bool {
	for _, rec := range setup {
		if rec.Entity.ID == entity {
			return true
		}
	}
	return false
}
