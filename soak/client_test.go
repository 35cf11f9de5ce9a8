package soak

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// writeRetryFor bounds how long a client retries one write (a lost answer
// or a 503) under its Idempotency-Key: longer than any fault window.
const writeRetryFor = 60 * time.Second

// client is one simulated caller: it owns the parcels it creates (no other
// client writes them, so its ETags stay its own) and records every
// operation.
type client struct {
	h       *harness
	id      int
	rng     *mrand.Rand
	seq     int
	parcels []*parcel
	// children are the ids of the client's children (written only by its
	// contact changes' applications).
	children []string
}

// parcel is a live parcel of the client, as it last saw it.
type parcel struct {
	id, etag string
	rev      int64
	stale    bool // an answer was lost: re-read before the next write
}

// newTraceID returns a W3C trace id: the audit row's trace_id of a write.
func newTraceID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// send makes one HTTP exchange with host.
func (c *client) send(host int, method, path, ctype string, body []byte, hdr map[string]string, traceID string) (Attempt, http.Header, []byte) {
	a := Attempt{Host: host, At: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tok, err := c.h.tokens.Token(ctx)
	if err != nil {
		a.Err = "token: " + err.Error()
		a.Host = NoHost // the issuer, not a host
		return a, nil, nil
	}
	req, err := http.NewRequestWithContext(ctx, method, c.h.hosts[host].base+path, bytes.NewReader(body))
	if err != nil {
		a.Err = err.Error()
		return a, nil, nil
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	var span [8]byte
	rand.Read(span[:])
	req.Header.Set("traceparent", "00-"+traceID+"-"+hex.EncodeToString(span[:])+"-01")
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.h.http.Do(req)
	a.Latency = time.Since(a.At)
	if err != nil {
		a.Err = err.Error()
		return a, nil, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	a.Latency = time.Since(a.At)
	if err != nil {
		a.Err = "read body: " + err.Error()
		return a, nil, nil
	}
	a.Status = resp.StatusCode
	a.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	if a.Status >= 400 {
		var p struct {
			Code string `json:"code"`
		}
		json.Unmarshal(b, &p)
		a.Code = p.Code
	}
	return a, resp.Header, b
}

// run performs op: a write is retried on a lost answer or a 503 with the
// same key and trace id, on the other host, until it is answered or
// writeRetryFor has passed; a read is tried up to three times.
func (c *client) run(op *Op, method, path, ctype string, body []byte, hdr map[string]string) (int, http.Header, []byte) {
	c.h.record(op)
	host := c.rng.IntN(len(c.h.hosts))
	started := time.Now()
	for try := 0; ; try++ {
		a, rh, rb := c.send(host, method, path, ctype, body, hdr, op.TraceID)
		c.h.mu.Lock()
		op.Attempts = append(op.Attempts, a)
		c.h.mu.Unlock()
		if a.Status != 0 && a.Status != http.StatusServiceUnavailable {
			return a.Status, rh, rb
		}
		if (!op.Write && try >= 2) || time.Since(started) > writeRetryFor || c.h.stopping() {
			return a.Status, rh, rb
		}
		time.Sleep(time.Duration(min(2000, 100<<min(try, 5))) * time.Millisecond)
		host = (host + 1) % len(c.h.hosts)
	}
}

// write starts a write operation of kind with a fresh trace id and key.
func (c *client) write(kind string, items int) *Op {
	trace := newTraceID()
	return &Op{Kind: kind, Write: true, TraceID: trace, Key: fmt.Sprintf("soak-c%d-%s", c.id, trace[:16]), Items: items}
}

// envelope is the part of a record answer the harness reads.
type envelope struct {
	Data struct {
		RecordIdentifier   string         `json:"recordIdentifier"`
		RevisionIdentifier string         `json:"revisionIdentifier"`
		Tombstoned         bool           `json:"tombstoned"`
		Request            map[string]any `json:"request"`
	} `json:"data"`
}

func (c *client) parseEnvelope(b []byte) (envelope, int64) {
	var env envelope
	json.Unmarshal(b, &env)
	rev, _ := strconv.ParseInt(env.Data.RevisionIdentifier, 10, 64)
	return env, rev
}

// createRecord creates a record of entity at route under a fresh key
// (operation kind) and records the revision its acknowledgement reported;
// ok is false when it was not created.
func (c *client) createRecord(kind, route, entity string, body []byte) (id, etag string, rev int64, ok bool) {
	op := c.write(kind, 1)
	s, hdr, b := c.run(op, "POST", route, "application/json", body, map[string]string{"Idempotency-Key": op.Key})
	if s != 201 {
		return "", "", 0, false
	}
	env, rev := c.parseEnvelope(b)
	c.h.written(op, Written{Entity: entity, Record: env.Data.RecordIdentifier, Revision: rev})
	return env.Data.RecordIdentifier, hdr.Get("ETag"), rev, true
}

// step runs one operation chosen by weight.
func (c *client) step() {
	n := c.rng.IntN(100)
	switch {
	case n < 20 || len(c.parcels) < 3:
		c.create()
	case n < 40:
		c.patch()
	case n < 45:
		c.tombstone()
	case n < 53:
		c.batch()
	case n < 63:
		c.list()
	case n < 70:
		c.snapshot()
	case n < 77:
		c.get()
	case n < 83:
		c.changeRequest()
	case n < 88:
		c.reviewedChange()
	case n < 92:
		c.evidence()
	case n < 94:
		c.contactChange("tengo", "/v1/records/contact-changes", "contact_change")
	case n < 96:
		c.contactChange("wasm", "/v1/records/contact-changes-wasm", "contact_change_wasm")
	default:
		c.survey()
	}
}

// survey invokes the immediate action survey-parcel on one of the client's
// parcels: target-conditions names the parcel's ifMatch, then the action
// creates a survey and patches the parcel in one transaction, under an
// Idempotency-Key (retried with it on a lost answer like every write). Its
// answer names both revisions (results), which must be in the journal
// once each.
func (c *client) survey() {
	p := c.pick()
	if p == nil {
		return
	}
	input := fmt.Sprintf(`{"parcel":%q,"surveyor":"c%d"}`, p.id, c.id)
	read := &Op{Kind: "action-conditions", TraceID: newTraceID()}
	s, _, b := c.run(read, "POST", "/v1/actions/survey-parcel/target-conditions", "application/json", []byte(`{"input":`+input+`}`), nil)
	if s != 200 {
		return
	}
	var conds struct {
		Preconditions map[string]struct {
			IfMatch string `json:"ifMatch"`
		} `json:"preconditions"`
	}
	json.Unmarshal(b, &conds)
	op := c.write("action", 2)
	op.ReportsAll = true
	body := fmt.Sprintf(`{"input":%s,"preconditions":{"mark":{"ifMatch":%q}}}`, input, conds.Preconditions["mark"].IfMatch)
	s, _, b = c.run(op, "POST", "/v1/actions/survey-parcel", "application/json", []byte(body), map[string]string{"Idempotency-Key": op.Key})
	p.stale = true // the action patched it (or may have)
	if s != 200 {
		return
	}
	var res struct {
		Results []struct {
			Entity   string `json:"entity"`
			RecordID string `json:"recordId"`
			Revision int64  `json:"revision"`
		} `json:"results"`
	}
	json.Unmarshal(b, &res)
	var ws []Written
	for _, r := range res.Results {
		ws = append(ws, Written{Entity: r.Entity, Record: r.RecordID, Revision: r.Revision})
	}
	c.h.written(op, ws...)
}

// contactChange creates a contact change of one of the client's children
// (creating a child first when it has none, or now and then), planned by
// the example planner in engine (tengo or wasm), and submits and applies
// it. One change in three also names a new guardian: the plan then creates
// a guardian and patches the child, three audited writes with the
// request's own revision.
func (c *client) contactChange(engine, route, entity string) {
	if len(c.children) == 0 || c.rng.IntN(4) == 0 {
		c.seq++
		id, _, _, ok := c.createRecord("child-create", "/v1/records/children", "child", []byte(fmt.Sprintf(`{"data":{"name":"child c%d-%d"}}`, c.id, c.seq)))
		if !ok {
			return
		}
		c.children = append(c.children, id)
	}
	child := c.children[c.rng.IntN(len(c.children))]
	data := map[string]any{"childId": child, "address": fmt.Sprintf("Lane %d", c.rng.IntN(1000)), "phone": fmt.Sprintf("555-%02d %02d", c.rng.IntN(100), c.rng.IntN(100))}
	if c.rng.IntN(3) == 0 {
		data["guardian"] = map[string]any{"name": fmt.Sprintf("guardian c%d", c.id), "relationship": "aunt"}
	}
	body, _ := json.Marshal(map[string]any{"data": data})
	id, etag, _, ok := c.createRecord(engine+"-create", route, entity, body)
	if !ok {
		return
	}
	c.submitAndApply(route+"/"+id, etag, entity, engine+"-submit", engine+"-get", engine+"-apply", 3)
}

// evidence creates an evidence change of one of the client's parcels and
// uploads one or two contents into its scan slot, which the harness's
// scanner verifies; one content in eight carries the marker it rejects.
// Every content is new (it names its trace id), so each upload asks for a
// verification of its own rather than reusing a verdict.
func (c *client) evidence() {
	p := c.pick()
	if p == nil {
		return
	}
	body := fmt.Sprintf(`{"data":{"parcelId":%q,"note":"evidence %d"}}`, p.id, c.rng.IntN(1000))
	id, etag, _, ok := c.createRecord("evidence-create", "/v1/records/evidence-changes", "evidence_change", []byte(body))
	if !ok {
		return
	}
	loc := "/v1/records/evidence-changes/" + id
	for i := range 1 + c.rng.IntN(2) {
		op := c.write("upload", 1)
		content := fmt.Sprintf("soak evidence of client %d, upload %d, trace %s", c.id, i, op.TraceID)
		if c.rng.IntN(8) == 0 {
			content += " " + malwareMarker
		}
		sum := sha256.Sum256([]byte(content))
		op.Upload = &Upload{SHA256: hex.EncodeToString(sum[:]), ContentType: "application/octet-stream", Want: verdictFor([]byte(content))}
		s, hdr, b := c.run(op, "PATCH", loc+"/attachments/scan", "application/octet-stream", []byte(content),
			map[string]string{"Idempotency-Key": op.Key, "If-Match": etag})
		if s != 200 {
			return
		}
		env, rev := c.parseEnvelope(b)
		c.h.written(op, Written{Entity: "evidence_change", Record: env.Data.RecordIdentifier, Revision: rev})
		etag = hdr.Get("ETag")
	}
}

// reviewedChange creates a parcel of its own and a boundary change of it,
// and submits the change: the review authority approves it and the
// executor applies it, later. Nothing else writes that parcel, so the
// frozen plan (which expects the parcel's revision at submit) cannot go
// stale: every such change must end applied.
func (c *client) reviewedChange() {
	n := len(c.parcels)
	c.create()
	if len(c.parcels) == n {
		return
	}
	p := c.parcels[n]
	c.parcels = c.parcels[:n]
	body := fmt.Sprintf(`{"data":{"parcelId":%q,"area":%d}}`, p.id, c.rng.IntN(1000))
	id, etag, _, ok := c.createRecord("reviewed-create", "/v1/records/boundary-changes", "boundary_change", []byte(body))
	if !ok {
		return
	}
	op := c.write("reviewed-submit", 1)
	s, _, b := c.run(op, "POST", "/v1/records/boundary-changes/"+id+"/actions/submit", "application/json", []byte(`{"actorReference":"soak"}`),
		map[string]string{"Idempotency-Key": op.Key, "If-Match": etag})
	if s == 200 {
		env, rev := c.parseEnvelope(b)
		if env.Data.RecordIdentifier != "" {
			c.h.written(op, Written{Entity: "boundary_change", Record: env.Data.RecordIdentifier, Revision: rev})
		}
	}
}

// pick returns one of the client's parcels, refreshed if an answer about
// it was lost.
func (c *client) pick() *parcel {
	if len(c.parcels) == 0 {
		return nil
	}
	p := c.parcels[c.rng.IntN(len(c.parcels))]
	if p.stale && !c.refresh(p) {
		return nil
	}
	return p
}

// refresh re-reads p; it drops p when the record is gone.
func (c *client) refresh(p *parcel) bool {
	op := &Op{Kind: "get", TraceID: newTraceID()}
	s, hdr, b := c.run(op, "GET", "/v1/records/parcels/"+p.id, "", nil, nil)
	switch s {
	case 200:
		_, rev := c.parseEnvelope(b)
		p.etag, p.rev, p.stale = hdr.Get("ETag"), rev, false
		return true
	case 404:
		c.drop(p)
	}
	return false
}

func (c *client) drop(p *parcel) {
	for i, q := range c.parcels {
		if q == p {
			c.parcels = append(c.parcels[:i], c.parcels[i+1:]...)
			return
		}
	}
}

func (c *client) create() {
	c.seq++
	body := fmt.Sprintf(`{"data":{"code":"c%d-%d","client":"c%d","area":%d}}`, c.id, c.seq, c.id, c.rng.IntN(1000))
	id, etag, rev, ok := c.createRecord("create", "/v1/records/parcels", "parcel", []byte(body))
	if !ok {
		return
	}
	c.parcels = append(c.parcels, &parcel{id: id, etag: etag, rev: rev})
}

func (c *client) patch() {
	p := c.pick()
	if p == nil {
		return
	}
	op := c.write("patch", 1)
	body := fmt.Sprintf(`[{"op":"replace","path":"/data/area","value":%d}]`, c.rng.IntN(1000))
	s, hdr, b := c.run(op, "PATCH", "/v1/records/parcels/"+p.id, "application/json-patch+json", []byte(body),
		map[string]string{"Idempotency-Key": op.Key, "If-Match": p.etag})
	switch {
	case s == 200:
		_, rev := c.parseEnvelope(b)
		c.h.written(op, Written{Entity: "parcel", Record: p.id, Revision: rev})
		p.etag, p.rev = hdr.Get("ETag"), rev
	default:
		p.stale = true
	}
}

func (c *client) tombstone() {
	p := c.pick()
	if p == nil {
		return
	}
	op := c.write("tombstone", 1)
	s, _, b := c.run(op, "DELETE", "/v1/records/parcels/"+p.id, "", nil, map[string]string{"Idempotency-Key": op.Key, "If-Match": p.etag})
	switch {
	case s == 200:
		env, rev := c.parseEnvelope(b)
		c.h.written(op, Written{Entity: "parcel", Record: p.id, Revision: rev, Tombstoned: env.Data.Tombstoned})
		c.drop(p)
	default:
		p.stale = true
	}
}

func (c *client) batch() {
	items := []string{}
	for range 2 {
		c.seq++
		items = append(items, fmt.Sprintf(`{"operation":"create","data":{"code":"c%d-%d","client":"c%d","area":%d}}`, c.id, c.seq, c.id, c.rng.IntN(1000)))
	}
	p := c.pick()
	if p != nil {
		items = append(items, fmt.Sprintf(`{"operation":"patch","id":%q,"ifMatch":%q,"patch":[{"op":"replace","path":"/data/area","value":%d}]}`, p.id, p.etag, c.rng.IntN(1000)))
	}
	op := c.write("batch", len(items))
	op.ReportsAll = true
	s, _, b := c.run(op, "POST", "/v1/records/parcels:batch", "application/json", []byte(`{"items":[`+strings.Join(items, ",")+`]}`), map[string]string{"Idempotency-Key": op.Key})
	if s != 200 {
		if p != nil {
			p.stale = true
		}
		return
	}
	var res struct {
		Results []struct {
			Operation string `json:"operation"`
			ID        string `json:"id"`
			Revision  int64  `json:"revision"`
			ETag      string `json:"etag"`
		} `json:"results"`
	}
	json.Unmarshal(b, &res)
	var ws []Written
	for _, r := range res.Results {
		ws = append(ws, Written{Entity: "parcel", Record: r.ID, Revision: r.Revision})
		if r.Operation == "create" {
			c.parcels = append(c.parcels, &parcel{id: r.ID, etag: r.ETag, rev: r.Revision})
		} else if p != nil && r.ID == p.id {
			p.etag, p.rev = r.ETag, r.Revision
		}
	}
	c.h.written(op, ws...)
}

func (c *client) get() {
	p := c.pick()
	if p == nil {
		return
	}
	c.refresh(p)
}

// list reads the client's parcels by filter, following up to three cursors.
func (c *client) list() {
	q := url.Values{"$filter": {fmt.Sprintf("client eq 'c%d'", c.id)}, "$top": {"5"}, "$orderby": {"code"}}
	path := "/v1/records/parcels?" + q.Encode()
	for page := 0; page < 3 && path != ""; page++ {
		op := &Op{Kind: "list", TraceID: newTraceID()}
		s, _, b := c.run(op, "GET", path, "", nil, nil)
		if s != 200 {
			return
		}
		path = nextPage("/v1/records/parcels", b)
	}
}

// snapshot reads the collection at one commit, following one cursor. The
// first page's items and token are kept (up to maxSnapshotSamples) for
// replaySnapshots.
func (c *client) snapshot() {
	path := snapshotFirstPage
	for page := 0; page < 2 && path != ""; page++ {
		op := &Op{Kind: "snapshot", TraceID: newTraceID()}
		s, _, b := c.run(op, "GET", path, "", nil, nil)
		if s != 200 {
			return
		}
		if page == 0 {
			c.h.keepSnapshot(b)
		}
		path = nextPage("/v1/records/parcels:snapshot", b)
	}
}

// snapshotFirstPage is the path of a snapshot read's first page.
const snapshotFirstPage = "/v1/records/parcels:snapshot?$top=20"

// maxSnapshotSamples bounds the first pages kept for replaySnapshots.
const maxSnapshotSamples = 400

// snapshotSample is a snapshot read's first page: its token and items.
type snapshotSample struct {
	token string
	items []any
}

// keepSnapshot keeps the token and items of a first snapshot page b.
func (h *harness) keepSnapshot(b []byte) {
	var page struct {
		Items    []any  `json:"items"`
		Snapshot string `json:"snapshot"`
	}
	if json.Unmarshal(b, &page) != nil || page.Snapshot == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.snapshots) < maxSnapshotSamples {
		h.snapshots = append(h.snapshots, snapshotSample{token: page.Snapshot, items: page.Items})
	}
}

// replaySnapshots reads the first page of every kept snapshot again by its
// token, once the traffic has ended: a snapshot names a fixed state, so
// each must show exactly the items it showed when it was taken, whatever
// was written, killed and restarted since. It returns the findings.
func (h *harness) replaySnapshots() []string {
	h.mu.Lock()
	samples := slices.Clone(h.snapshots)
	h.mu.Unlock()
	c := &client{h: h}
	var out []string
	for i, sm := range samples {
		path := snapshotFirstPage + "&" + url.Values{"snapshot": {sm.token}}.Encode()
		a, _, b := c.send(i%len(h.hosts), "GET", path, "", nil, nil, newTraceID())
		if a.Status != 200 {
			out = append(out, fmt.Sprintf("snapshot %s read again: %d %s %.200s", sm.token, a.Status, a.Err, b))
			continue
		}
		var page struct {
			Items []any `json:"items"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			out = append(out, fmt.Sprintf("snapshot %s read again: %v", sm.token, err))
			continue
		}
		if !reflect.DeepEqual(page.Items, sm.items) {
			out = append(out, fmt.Sprintf("snapshot %s read again shows %d items, %d when it was taken: now %.300v, then %.300v",
				sm.token, len(page.Items), len(sm.items), page.Items, sm.items))
		}
	}
	return out
}

// nextPage returns the path of the page after the one in b, or "".
func nextPage(route string, b []byte) string {
	var page struct {
		PageInfo struct {
			NextCursor *string `json:"nextCursor"`
		} `json:"pageInfo"`
	}
	json.Unmarshal(b, &page)
	if page.PageInfo.NextCursor == nil {
		return ""
	}
	return route + "?" + url.Values{"$skiptoken": {*page.PageInfo.NextCursor}}.Encode()
}

// changeRequest creates an address change of one of the client's parcels,
// submits it and applies it.
func (c *client) changeRequest() {
	p := c.pick()
	if p == nil {
		return
	}
	body := fmt.Sprintf(`{"data":{"parcelId":%q,"address":"Street %d"}}`, p.id, c.rng.IntN(1000))
	id, etag, _, ok := c.createRecord("request-create", "/v1/records/address-changes", "address_change", []byte(body))
	if !ok {
		return
	}
	if c.submitAndApply("/v1/records/address-changes/"+id, etag, "address_change", "submit", "request-get", "apply", 2) {
		p.stale = true // the apply patched it
	}
}

// submitAndApply submits the change request at loc (its ETag etag) and
// applies it through the apply action the request then offers; applyItems
// bounds the audited writes of the application (the request's revision and
// its effects). It reports whether an application was sent.
func (c *client) submitAndApply(loc, etag, entity, submitKind, getKind, applyKind string, applyItems int) bool {
	op := c.write(submitKind, 1)
	s, _, b := c.run(op, "POST", loc+"/actions/submit", "application/json", []byte(`{"actorReference":"soak"}`),
		map[string]string{"Idempotency-Key": op.Key, "If-Match": etag})
	if s != 200 {
		return false
	}
	env, rev := c.parseEnvelope(b)
	if env.Data.RecordIdentifier != "" {
		c.h.written(op, Written{Entity: entity, Record: env.Data.RecordIdentifier, Revision: rev})
	}
	// The apply action as the request offers it now.
	read := &Op{Kind: getKind, TraceID: newTraceID()}
	s, _, b = c.run(read, "GET", loc, "", nil, nil)
	if s != 200 {
		return false
	}
	env, _ = c.parseEnvelope(b)
	actions, _ := env.Data.Request["actions"].([]any)
	for _, a := range actions {
		act, _ := a.(map[string]any)
		if act["operation"] != "apply_request" {
			continue
		}
		href, _ := act["href"].(string)
		ifMatch, _ := act["ifMatch"].(string)
		pv, _ := act["proposalVersion"].(float64)
		ed, _ := act["effectDigest"].(string)
		op = c.write(applyKind, applyItems)
		s, _, b = c.run(op, "POST", href, "application/json", []byte(fmt.Sprintf(`{"actorReference":"soak","proposalVersion":%d,"effectDigest":%q}`, int64(pv), ed)),
			map[string]string{"Idempotency-Key": op.Key, "If-Match": ifMatch})
		if s == 200 {
			env, rev = c.parseEnvelope(b)
			if env.Data.RecordIdentifier != "" {
				c.h.written(op, Written{Entity: entity, Record: env.Data.RecordIdentifier, Revision: rev})
			}
		}
		return true
	}
	return false
}
