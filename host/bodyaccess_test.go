package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/storetest"
)

// concealEnv is a host of testdata/concealment: every kind of route that
// takes a body. The clerk's token satisfies the clerk and registrar
// profiles (district north), not the auditor's; the colleague is another
// principal under the clerk profile.
type concealEnv struct {
	clerk, colleague, anonymous caller
	pkg                         *model.Package
	dsn                         string
}

func startConcealment(t *testing.T) concealEnv {
	t.Helper()
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"offices:write"}, Claims: map[string]string{"district": "north"}}, addClient(t, `"offices:write"`))
	is.Setup.Clients = append(is.Setup.Clients, issuertest.DevClient{ID: "colleague", Profile: "standard",
		KeyFile: filepath.Join(filepath.Dir(is.Setup.ConfigPath), "client-keys", "colleague.jwk"), Audience: is.Setup.TokenURL})
	dsn := storetest.NewDatabase(t)
	h, srv := serve(t, deployment(t, "testdata/concealment", dsn, is.HostAuthentication()))
	return concealEnv{
		clerk:     caller{srv: srv, token: is.Token(t, issuertest.StandardClientID)},
		colleague: caller{srv: srv, token: is.Token(t, "colleague")},
		anonymous: caller{srv: srv},
		pkg:       h.Package(),
		dsn:       dsn,
	}
}

var traceIDMember = regexp.MustCompile(`"traceId":"[0-9a-f]{32}"`)

// concealedAnswer is an answer with its traceId blanked: status, media
// type and the problem document's exact bytes.
func concealedAnswer(status int, ctype string, body []byte) string {
	return fmt.Sprintf("%d %s %s", status, ctype, traceIDMember.ReplaceAll(body, []byte(`"traceId":""`)))
}

// bodyRoute is a route that takes a body: its valid body, the bound its
// body is held to and the headers a granted call needs.
type bodyRoute struct {
	name, method, path, ctype, valid string
	limit                            int
	hdr                              []string
}

// badBodies are the faulty bodies of a route: a wrong Content-Type, a
// declared length over the bound, malformed JSON.
func (r bodyRoute) bodies() []struct{ name, ctype, body string } {
	return []struct{ name, ctype, body string }{
		{"wrong content type", "text/csv", r.valid},
		{"oversized", r.ctype, r.valid + strings.Repeat(" ", r.limit+1)},
		{"malformed", r.ctype, `{"data":`},
		{"valid", r.ctype, r.valid},
	}
}

// TestBodiesAreJudgedOnlyOnceAccessIsDecided: on every route that takes a
// body, a caller without a token, under a profile the token does not
// satisfy, or naming a record outside its boundary gets the answer of an
// unknown path (byte for byte but for traceId), whatever the body: a wrong
// Content-Type, a declared length over the bound, malformed JSON or a
// valid body. With access granted, each faulty body still gets its own
// 400 request.invalid.
func TestBodiesAreJudgedOnlyOnceAccessIsDecided(t *testing.T) {
	env := startConcealment(t)
	clerk := env.clerk
	officeLoc, officeTag := clerk.create(t, "offices", `{"name":"North","district":"north"}`)
	officeID := path.Base(officeLoc)
	southLoc, southTag := clerk.create(t, "offices", `{"name":"Moved","district":"north"}`)
	draftLoc, draftTag := clerk.create(t, "renames", `{"officeId":"`+officeID+`","name":"Renamed"}`)
	subLoc, subTag := clerk.create(t, "renames", `{"officeId":"`+officeID+`","name":"Renamed"}`)
	if code, b := clerk.act(t, subLoc+"/actions/submit", subTag, "submit-1", `{}`); code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}
	_, subTag = clerk.read(t, subLoc)
	runBody := func(profile string) string {
		b, _ := json.Marshal(map[string]any{"operation": "create", "profileId": profile, "packageRevision": env.pkg.Revision,
			"schemaFingerprint": env.pkg.SchemaFingerprint, "inputDigest": strings.Repeat("a", 64), "inputLength": 40, "itemCount": 1,
			"chunkCount": 1, "chunkAlgorithmVersion": "greedy-canonical-http-batch-v1"})
		return string(b)
	}
	resp, b := clerk.do(t, "POST", "/v1/records/offices/ingestion-runs", "application/json", runBody("clerk"))
	var run struct {
		RunID string `json:"runId"`
	}
	if json.Unmarshal(b, &run); resp.StatusCode != 201 || run.RunID == "" {
		t.Fatalf("open run: %d %s", resp.StatusCode, b)
	}
	// The second office leaves the clerk's district behind its back.
	conn, err := pgx.Connect(context.Background(), env.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `UPDATE registrum_data.e_office SET f_district = 'south' WHERE record_id = $1::uuid`, path.Base(southLoc)); err != nil {
		t.Fatal(err)
	}

	chunk := `{"chunkIndex":0,"items":[{"operation":"create","data":{"name":"A","district":"north"}}],"digest":"` + strings.Repeat("b", 64) + `","prefixDigest":"` + strings.Repeat("a", 64) + `"}`
	key := 0
	keyed := func(hdr ...string) []string {
		key++
		return append(hdr, "Idempotency-Key", fmt.Sprintf("k-%d", key))
	}
	routes := func() []bodyRoute {
		return []bodyRoute{
			{"create", "POST", "/v1/records/offices", "application/json", `{"data":{"name":"N","district":"north"}}`, 512, keyed()},
			{"patch", "PATCH", officeLoc, "application/json-patch+json", `[{"op":"replace","path":"/data/name","value":"P"}]`, 512, keyed("If-Match", officeTag)},
			{"batch", "POST", "/v1/records/offices:batch", "application/json", `{"items":[{"operation":"create","data":{"name":"B","district":"north"}}]}`, 1024, keyed()},
			{"open run", "POST", "/v1/records/offices/ingestion-runs", "application/json", runBody("clerk"), 4 << 10, nil},
			{"chunk", "POST", "/v1/records/offices/ingestion-runs/" + run.RunID + "/chunks", "application/json", chunk, 2*1024 + 64<<10, nil},
			{"submit", "POST", draftLoc + "/actions/submit", "application/json", `{}`, 64 << 10, keyed("If-Match", draftTag)},
			{"cancel", "POST", draftLoc + "/actions/cancel", "application/json", `{}`, 64 << 10, keyed("If-Match", draftTag)},
			{"revise", "POST", subLoc + "/actions/revise", "application/json", `{}`, 64 << 10, keyed("If-Match", subTag)},
			{"apply", "POST", subLoc + "/actions/apply", "application/json", `{"proposalVersion":1,"effectDigest":"sha256:` + strings.Repeat("0", 64) + `"}`, 64 << 10, keyed("If-Match", subTag)},
			{"upload", "PATCH", draftLoc + "/attachments/evidence", "text/plain", "evidence", 64, keyed("If-Match", draftTag)},
			{"invoke", "POST", "/v1/actions/rename-office", "application/json", `{"input":{"office":"` + officeID + `","name":"I"},"preconditions":{"rename":{"ifMatch":` + jsonString(officeTag) + `}}}`, 64 << 10, keyed()},
			{"target conditions", "POST", "/v1/actions/rename-office/target-conditions", "application/json", `{"input":{"office":"` + officeID + `","name":"I"}}`, 64 << 10, nil},
		}
	}

	unknown := func(c caller, method string) string {
		resp, b := c.do(t, method, "/v1/records/nowhere", "application/json", `{}`)
		return concealedAnswer(resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	want := unknown(env.anonymous, "POST")
	if !strings.HasPrefix(want, "404 application/problem+json ") || !strings.Contains(want, `"fieldPath":null`) {
		t.Fatalf("an unknown path answers %s", want)
	}
	if got := unknown(clerk, "PATCH"); got != want {
		t.Fatalf("unknown paths answer differently: %s, %s", got, want)
	}
	callers := []struct {
		name    string
		c       caller
		profile string
	}{
		{"no token", env.anonymous, ""},
		{"no token, named profile", env.anonymous, "clerk"},
		{"unsatisfied profile", clerk, "auditor"},
	}
	for _, who := range callers {
		for _, r := range routes() {
			for _, body := range r.bodies() {
				if r.name == "upload" && body.name == "malformed" {
					continue // an upload's bytes are not JSON
				}
				target := r.path
				if who.profile != "" {
					target += "?accessProfile=" + who.profile
				}
				resp, b := who.c.do(t, r.method, target, body.ctype, body.body, r.hdr...)
				if got := concealedAnswer(resp.StatusCode, resp.Header.Get("Content-Type"), b); got != want {
					t.Errorf("%s, %s, %s body: %s\nwant %s", who.name, r.name, body.name, got, want)
				}
			}
		}
	}
	// A removal's body, a record outside the boundary, a run of nobody's.
	for _, c := range []struct {
		name, method, path, ctype, body string
		c                               caller
		hdr                             []string
	}{
		{"remove with a body, no token", "DELETE", draftLoc + "/attachments/evidence", "text/plain", "x", env.anonymous, keyed("If-Match", draftTag)},
		{"remove with a body, unsatisfied profile", "DELETE", draftLoc + "/attachments/evidence?accessProfile=auditor", "text/plain", "x", clerk, keyed("If-Match", draftTag)},
		{"patch outside the boundary, wrong type", "PATCH", southLoc, "text/csv", "[]", clerk, keyed("If-Match", southTag)},
		{"patch outside the boundary, malformed", "PATCH", southLoc, "application/json-patch+json", "[", clerk, keyed("If-Match", southTag)},
		{"patch outside the boundary, oversized", "PATCH", southLoc, "application/json-patch+json", "[" + strings.Repeat(" ", 600) + "]", clerk, keyed("If-Match", southTag)},
		{"chunk of an unknown run, malformed", "POST", "/v1/records/offices/ingestion-runs/01890000-0000-7000-8000-000000000000/chunks", "application/json", "{", clerk, nil},
		{"chunk of an unknown run, wrong type", "POST", "/v1/records/offices/ingestion-runs/01890000-0000-7000-8000-000000000000/chunks", "text/csv", chunk, clerk, nil},
		{"action on an unknown request, malformed", "POST", "/v1/records/renames/01890000-0000-7000-8000-000000000000/actions/submit", "application/json", "{", clerk, keyed("If-Match", draftTag)},
		{"target conditions outside the boundary", "POST", "/v1/actions/rename-office/target-conditions", "application/json", `{"input":{"office":"` + path.Base(southLoc) + `","name":"I"}}`, clerk, nil},
	} {
		resp, b := c.c.do(t, c.method, c.path, c.ctype, c.body, c.hdr...)
		if got := concealedAnswer(resp.StatusCode, resp.Header.Get("Content-Type"), b); got != want {
			t.Errorf("%s: %s\nwant %s", c.name, got, want)
		}
	}

	// Granted: each faulty body gets its own 400, naming the body as a
	// whole (fieldPath "") when no member is at fault.
	for _, r := range routes() {
		for _, body := range r.bodies() {
			if body.name == "valid" || (r.name == "upload" && body.name == "malformed") {
				continue
			}
			resp, b := clerk.do(t, r.method, r.path, body.ctype, body.body, r.hdr...)
			var p struct {
				Code      string  `json:"code"`
				FieldPath *string `json:"fieldPath"`
			}
			json.Unmarshal(b, &p)
			if resp.StatusCode != 400 || p.Code != "request.invalid" {
				t.Errorf("granted %s, %s body: %d %s", r.name, body.name, resp.StatusCode, b)
			}
		}
	}
	resp, b = clerk.do(t, "DELETE", draftLoc+"/attachments/evidence", "text/plain", "x", keyed("If-Match", draftTag)...)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "request.invalid") {
		t.Errorf("granted removal with a body: %d %s", resp.StatusCode, b)
	}
	// Nothing moved: the draft is still a draft at the same revision, the
	// submitted request still submitted.
	if d, tag := clerk.read(t, draftLoc); d.Data.Request.EngineState != "draft" || tag != draftTag {
		t.Errorf("the refused calls changed the draft: %s %s", d.Data.Request.EngineState, tag)
	}
	if d, tag := clerk.read(t, subLoc); d.Data.Request.EngineState != "submitted" || tag != subTag {
		t.Errorf("the refused calls changed the submitted request: %s %s", d.Data.Request.EngineState, tag)
	}
}

// TestRequestActionsNeedNoBodyMembers: a client that sends exactly what the
// specification names ({} for submit, revise and cancel; proposalVersion
// and effectDigest for apply) goes through the workflow; the host records
// the caller's principal reference as the actor when no actorReference is
// sent, and the one sent when it is. Access, the validator, ownership and
// the offered action are decided before the body's members: a
// non-owner's revise or cancel, a stale If-Match and an apply of a draft
// answer 412 with a body that would be refused.
func TestRequestActionsNeedNoBodyMembers(t *testing.T) {
	env := startConcealment(t)
	clerk, colleague := env.clerk, env.colleague
	officeLoc, _ := clerk.create(t, "offices", `{"name":"North","district":"north"}`)
	data := `{"officeId":"` + path.Base(officeLoc) + `","name":"Renamed"}`
	key := 0
	act := func(c caller, a *offered, body string) (int, actionResponse, []byte) {
		t.Helper()
		if a == nil {
			t.Fatalf("the action is not offered")
		}
		key++
		code, b := c.act(t, a.Href, a.IfMatch, fmt.Sprintf("k-%d", key), body)
		var res actionResponse
		json.Unmarshal(b, &res)
		return code, res, b
	}
	const invalid = `{"bogus":true}`

	// Submit with {}, then apply with exactly the proposal's binding.
	loc, _ := clerk.create(t, "relabels", data)
	d, _ := clerk.read(t, loc)
	code, sub, b := act(clerk, d.Data.Request.action("submit_request"), `{}`)
	if code != 200 || sub.Request.EngineState != "submitted" || sub.ActorReference == "" {
		t.Fatalf("submit {}: %d %s", code, b)
	}
	principal := sub.ActorReference
	d, _ = clerk.read(t, loc)
	ap := d.Data.Request.action("apply_request")
	code, res, b := act(clerk, ap, fmt.Sprintf(`{"proposalVersion":%d,"effectDigest":%q}`, ap.ProposalVersion, ap.EffectDigest))
	if code != 200 || res.Request.EngineState != "applied" || res.ActorReference != principal {
		t.Fatalf("apply with proposalVersion and effectDigest: %d %s (actor %q, the submit's %q)", code, b, res.ActorReference, principal)
	}
	if resp, b := clerk.do(t, "GET", officeLoc, "", ""); !strings.Contains(string(b), `"name":"Renamed"`) {
		t.Fatalf("the apply did not write its effect: %d %s", resp.StatusCode, b)
	}

	// Submit, revise with {} (the offered rebase), submit again, cancel with {}.
	loc, draftTag := clerk.create(t, "relabels", data)
	d, _ = clerk.read(t, loc)
	if code, _, b := act(clerk, d.Data.Request.action("submit_request"), `{"actorReference":"clerk-7"}`); code != 200 || !strings.Contains(string(b), `"actorReference":"clerk-7"`) {
		t.Fatalf("submit with an actorReference: %d %s", code, b)
	}
	d, _ = clerk.read(t, loc)
	rev := d.Data.Request.action("revise_request")
	if rev == nil || rev.Rebase == nil || !*rev.Rebase {
		t.Fatalf("revise is not offered with rebase true: %s", d.Data.Request.operations())
	}
	// Before the body: a non-owner's revise and cancel, a stale If-Match.
	for _, c := range []struct {
		name string
		who  caller
		a    *offered
	}{
		{"colleague's revise", colleague, rev},
		{"colleague's cancel", colleague, d.Data.Request.action("cancel_request")},
		{"stale If-Match", clerk, &offered{Href: rev.Href, IfMatch: draftTag}},
	} {
		if code, _, b := act(c.who, c.a, invalid); code != 412 || !strings.Contains(string(b), "precondition.failed") {
			t.Errorf("%s with an invalid body: %d %s", c.name, code, b)
		}
	}
	if code, _, b := act(clerk, rev, `{"rebase":false}`); code != 409 || !strings.Contains(string(b), "mutation.conflict") {
		t.Errorf("revise with the rebase not offered: %d %s", code, b)
	}
	if code, _, b := act(clerk, rev, `{"actorReference":""}`); code != 400 || !strings.Contains(string(b), `"fieldPath":"/actorReference"`) {
		t.Errorf("revise with an empty actorReference: %d %s", code, b)
	}
	code, res, b = act(clerk, rev, `{}`)
	if code != 200 || res.Request.EngineState != "draft" || res.Request.ProposalVersion != 2 || res.ActorReference != principal {
		t.Fatalf("revise {}: %d %s", code, b)
	}
	d, _ = clerk.read(t, loc)
	// An apply of a draft is not on offer, whatever its body.
	if code, _, b := act(clerk, &offered{Href: strings.Replace(d.Data.Request.action("submit_request").Href, "/submit", "/apply", 1), IfMatch: d.Data.Request.action("submit_request").IfMatch}, invalid); code != 412 {
		t.Errorf("apply of a draft with an invalid body: %d %s", code, b)
	}
	if code, _, b := act(clerk, d.Data.Request.action("submit_request"), `{}`); code != 200 {
		t.Fatalf("submit the revision {}: %d %s", code, b)
	}
	d, _ = clerk.read(t, loc)
	code, res, b = act(clerk, d.Data.Request.action("cancel_request"), `{}`)
	if code != 200 || res.Request.EngineState != "cancelled" || res.ActorReference != principal {
		t.Fatalf("cancel {}: %d %s", code, b)
	}

	// Another principal's actor is its own reference.
	loc, _ = colleague.create(t, "relabels", data)
	d, _ = colleague.read(t, loc)
	code, res, b = act(colleague, d.Data.Request.action("cancel_request"), `{}`)
	if code != 200 || res.ActorReference == "" || res.ActorReference == principal {
		t.Fatalf("the colleague's cancel {}: %d %s (the clerk's reference %q)", code, b, principal)
	}
}

// TestAnIdempotencyKeyIsBoundToTheAccessProfile: the same principal, key
// and body under another accessProfile is another request (409
// idempotency.conflict), never the first answer replayed under a profile
// that may read less; under the first profile it is replayed.
func TestAnIdempotencyKeyIsBoundToTheAccessProfile(t *testing.T) {
	env := startConcealment(t)
	clerk := env.clerk
	body := `{"data":{"name":"Keyed","district":"north"}}`
	resp, first := clerk.do(t, "POST", "/v1/records/offices", "application/json", body, "Idempotency-Key", "office-1")
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, first)
	}
	resp, b := clerk.do(t, "POST", "/v1/records/offices?accessProfile=registrar", "application/json", body, "Idempotency-Key", "office-1")
	if resp.StatusCode != 409 || !strings.Contains(string(b), "idempotency.conflict") {
		t.Errorf("the same key and body under another profile: %d %s", resp.StatusCode, b)
	}
	resp, b = clerk.do(t, "POST", "/v1/records/offices?accessProfile=clerk", "application/json", body, "Idempotency-Key", "office-1")
	if resp.StatusCode != 201 || resp.Header.Get("Idempotent-Replayed") != "true" || string(b) != string(first) {
		t.Errorf("the same key and body under the same profile, named: %d %s", resp.StatusCode, b)
	}

	officeLoc, _ := clerk.create(t, "offices", `{"name":"North","district":"north"}`)
	loc, _ := clerk.create(t, "renames", `{"officeId":"`+path.Base(officeLoc)+`","name":"Renamed"}`)
	d, _ := clerk.read(t, loc)
	submit := d.Data.Request.action("submit_request")
	if code, b := clerk.act(t, submit.Href, submit.IfMatch, "submit-1", `{}`); code != 200 {
		t.Fatalf("submit: %d %s", code, b)
	}
	other := strings.Replace(submit.Href, "accessProfile=clerk", "accessProfile=registrar", 1)
	if other == submit.Href {
		t.Fatalf("the offered href names no clerk profile: %s", submit.Href)
	}
	if code, b := clerk.act(t, other, submit.IfMatch, "submit-1", `{}`); code != 409 || !strings.Contains(string(b), "idempotency.conflict") {
		t.Errorf("the same submit under another profile: %d %s", code, b)
	}
	if code, b := clerk.act(t, submit.Href, submit.IfMatch, "submit-1", `{}`); code != 200 {
		t.Errorf("the same submit replayed: %d %s", code, b)
	}
	// Cancel takes its key in the transaction: the same binding holds there.
	d, _ = clerk.read(t, loc)
	cancel := d.Data.Request.action("cancel_request")
	if code, b := clerk.act(t, cancel.Href, cancel.IfMatch, "cancel-1", `{}`); code != 200 {
		t.Fatalf("cancel: %d %s", code, b)
	}
	other = strings.Replace(cancel.Href, "accessProfile=clerk", "accessProfile=registrar", 1)
	if code, b := clerk.act(t, other, cancel.IfMatch, "cancel-1", `{}`); code != 409 || !strings.Contains(string(b), "idempotency.conflict") {
		t.Errorf("the same cancel under another profile: %d %s", code, b)
	}
}
