package desk

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"sort"
	"strconv"
	"time"
)

//go:embed templates/*.html templates/desk.css
var templateFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
}).ParseFS(templateFS, "templates/*.html"))

// maximumFormBytes bounds a posted form.
const maximumFormBytes = 16 << 10

// untilLayout is the form's approval end (an HTML datetime-local, in UTC).
const untilLayout = "2006-01-02T15:04"

// view is what a page template renders; every value is escaped by
// html/template where it is written.
type view struct {
	Title    string
	CSRF     string
	Reviewer bool
	Error    string
	// The list page.
	Requests []listItem
	// The request page.
	Request      *requestView
	Until        string
	MinUntil     string
	MaxUntil     string
	Attachments  []Attachment
	AttachNote   string
	PolicyTitles map[string]string
}

type listItem struct {
	ID, Type, Record, Requester, Policy, State string
	Version                                    int64
	ReceivedAt                                 time.Time
}

type requestView struct {
	*Request
	State  string
	Fields []fieldView
}

type fieldView struct {
	Name, Value string
	Block       bool
}

// page wraps a page handler: security headers on every answer.
func (d *Desk) page(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maximumFormBytes)
		}
		next(w, r)
	})
}

// reviewer admits a signed-in reviewer; a post must carry the session's
// CSRF token. Anyone else is sent to the sign-in page.
func (d *Desk) reviewer(next func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		se := d.current(r)
		if se == nil || !se.reviewer {
			if r.Method == http.MethodPost {
				d.render(w, http.StatusForbidden, "message", view{Title: "Signed out", Error: "You are not signed in (or your session ended). Sign in again."})
				return
			}
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost && !se.validCSRF(r.PostFormValue("csrf")) {
			d.render(w, http.StatusForbidden, "message", view{Title: "Form expired", Reviewer: true, CSRF: se.csrf, Error: "This form is not from your session. Reload the page and try again."})
			return
		}
		next(w, r, se)
	}
}

func (d *Desk) render(w http.ResponseWriter, status int, name string, v view) {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, v); err != nil {
		d.log.Error("reviewdesk: render", "page", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

func (d *Desk) stylesheet(w http.ResponseWriter, r *http.Request) {
	b, _ := fs.ReadFile(templateFS, "templates/desk.css")
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "max-age=300")
	w.Write(b)
}

// loginForm is GET /login: a session (anonymous until sign-in) carries the
// sign-in form's CSRF token.
func (d *Desk) loginForm(w http.ResponseWriter, r *http.Request) {
	se := d.current(r)
	if se != nil && se.reviewer {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if se == nil {
		se = d.sessions.start(false)
		d.setCookie(w, se)
	}
	d.render(w, http.StatusOK, "login", view{Title: "Sign in", CSRF: se.csrf})
}

// login is POST /login: the form's token must be the session's; the
// password is compared with the configured hash in constant time; a
// reviewer session replaces the anonymous one (a new id and token).
func (d *Desk) login(w http.ResponseWriter, r *http.Request) {
	se := d.current(r)
	if se == nil || !se.validCSRF(r.PostFormValue("csrf")) {
		fresh := d.sessions.start(false)
		d.setCookie(w, fresh)
		d.render(w, http.StatusForbidden, "login", view{Title: "Sign in", CSRF: fresh.csrf, Error: "The sign-in form expired. Try again."})
		return
	}
	key := clientKey(r, reviewerAccount)
	if d.sessions.throttled(key) {
		d.render(w, http.StatusTooManyRequests, "login", view{Title: "Sign in", CSRF: se.csrf, Error: "Too many failed sign-ins. Wait a few minutes."})
		return
	}
	if !d.password.matches(r.PostFormValue("password")) {
		d.sessions.failed(key)
		d.log.Warn("reviewdesk: a sign-in failed")
		d.render(w, http.StatusUnauthorized, "login", view{Title: "Sign in", CSRF: se.csrf, Error: "That password is not right."})
		return
	}
	d.sessions.end(se.id)
	rs := d.sessions.start(true)
	d.setCookie(w, rs)
	d.log.Info("reviewdesk: the reviewer signed in")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (d *Desk) logout(w http.ResponseWriter, r *http.Request, se *session) {
	d.sessions.end(se.id)
	d.setCookie(w, &session{})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// stateOf is a request's state as the pages name it.
func stateOf(r *Request) string {
	if r.Result == nil {
		return "awaiting review"
	}
	switch r.Result.Status {
	case StatusApproved:
		return "approved"
	case StatusRejected:
		return "rejected"
	case StatusChangesRequested:
		return "changes requested"
	case StatusCancelled:
		return "withdrawn by the registry"
	}
	return r.Result.Status
}

func (d *Desk) listPage(w http.ResponseWriter, r *http.Request, se *session) {
	v := view{Title: "Review requests", CSRF: se.csrf, Reviewer: true}
	for _, req := range d.store.list() {
		v.Requests = append(v.Requests, listItem{ID: req.ID, Type: req.Subject.Type, Record: req.Subject.ID, Version: req.Subject.Version,
			Requester: req.Requester, Policy: d.policyTitle(req.Policy.ID), State: stateOf(req), ReceivedAt: req.ReceivedAt})
	}
	d.render(w, http.StatusOK, "list", v)
}

func (d *Desk) policyTitle(id string) string {
	if p, ok := d.cfg.Policies[id]; ok && p.Title != "" {
		return p.Title
	}
	return id
}

// requestView builds the request page's data: the proposal's fields in
// name order, each value as text (structured values as indented JSON).
func (d *Desk) requestView(se *session, req *Request) view {
	rv := &requestView{Request: req, State: stateOf(req)}
	var snap map[string]json.RawMessage
	json.Unmarshal(req.Snapshot, &snap)
	names := make([]string, 0, len(snap))
	for k := range snap {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		raw := snap[k]
		var s string
		if json.Unmarshal(raw, &s) == nil {
			rv.Fields = append(rv.Fields, fieldView{Name: k, Value: s})
			continue
		}
		var out bytes.Buffer
		if json.Indent(&out, raw, "", "  ") != nil {
			out.Reset()
			out.Write(raw)
		}
		rv.Fields = append(rv.Fields, fieldView{Name: k, Value: out.String(), Block: bytes.ContainsAny(raw, "{[")})
	}
	now := d.now().UTC()
	v := view{Title: "Review request " + req.ID, CSRF: se.csrf, Reviewer: true, Request: rv,
		Until:    now.Add(7 * 24 * time.Hour).Format(untilLayout),
		MinUntil: now.Add(time.Minute).Format(untilLayout), MaxUntil: now.Add(time.Duration(d.cfg.MaximumApprovalDays) * 24 * time.Hour).Format(untilLayout),
		PolicyTitles: map[string]string{req.Policy.ID: d.policyTitle(req.Policy.ID)}}
	switch {
	case req.Attachments == nil:
		v.AttachNote = "This kind of request has no attachment slots."
	case len(req.Attachments) == 0:
		v.AttachNote = "The proposal has no attachments."
	default:
		v.Attachments = req.Attachments
		v.AttachNote = "As the registry froze them at submission: it submits only attachments whose verification approved them or that need none."
	}
	return v
}

func (d *Desk) requestPage(w http.ResponseWriter, r *http.Request, se *session) {
	req := d.store.get(r.PathValue("requestId"))
	if req == nil {
		d.render(w, http.StatusNotFound, "message", view{Title: "Not found", CSRF: se.csrf, Reviewer: true, Error: "There is no such review request."})
		return
	}
	d.render(w, http.StatusOK, "request", d.requestView(se, req))
}

// decide is POST /requests/{id}/decision: approve (with an availableUntil
// in the future and within the configured days), reject, or request
// changes; a request is settled once.
func (d *Desk) decide(w http.ResponseWriter, r *http.Request, se *session) {
	req := d.store.get(r.PathValue("requestId"))
	if req == nil {
		d.render(w, http.StatusNotFound, "message", view{Title: "Not found", CSRF: se.csrf, Reviewer: true, Error: "There is no such review request."})
		return
	}
	again := func(msg string) {
		v := d.requestView(se, req)
		v.Error = msg
		if u := r.PostFormValue("availableUntil"); u != "" && len(u) <= len(untilLayout) {
			v.Until = u
		}
		d.render(w, http.StatusUnprocessableEntity, "request", v)
	}
	now := d.now().UTC().Truncate(time.Second)
	res := &Result{ResultID: newID("res_"), CompletedAt: now}
	switch r.PostFormValue("decision") {
	case "approve":
		until, err := time.ParseInLocation(untilLayout, r.PostFormValue("availableUntil"), time.UTC)
		if err != nil {
			again("Give the end of the approval's availability as a date and time (UTC).")
			return
		}
		if !until.After(now) || until.After(now.Add(time.Duration(d.cfg.MaximumApprovalDays)*24*time.Hour)) {
			again("The approval must stay available until a time after now and at most " + strconv.Itoa(d.cfg.MaximumApprovalDays) + " days ahead.")
			return
		}
		res.Status, res.AvailableUntil = StatusApproved, &until
	case "reject":
		res.Status = StatusRejected
	case "changes":
		res.Status = StatusChangesRequested
	default:
		again("Choose approve, reject or request changes.")
		return
	}
	switch err := d.store.settle(req.ID, res); {
	case errors.Is(err, errSettled):
		req = d.store.get(req.ID)
		again("This request was already settled.")
		return
	case err != nil:
		d.log.Error("reviewdesk: cannot store a decision", "requestId", req.ID, "error", err)
		again("The decision could not be stored. Try again.")
		return
	}
	d.log.Info("reviewdesk: request settled", "requestId", req.ID, "status", res.Status)
	http.Redirect(w, r, "/requests/"+req.ID, http.StatusSeeOther)
}
