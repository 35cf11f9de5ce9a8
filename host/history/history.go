// Package history is the record host's reads of recorded history: one
// record's revisions and a revision, the temporal reads :current and
// :as-of, and :snapshot pages of a collection as recorded at a commit
// (docs/history.md, docs/decisions/snapshot-reads.md). It reads under the
// grants of the record kernel (host/records) and knows nothing of HTTP;
// refusals are problem.Error values.
package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/cursor"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/strictjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/querysql"
)

// Options configure the history reads.
type Options struct {
	// Records is the record kernel whose grants, keys and store the reads
	// use. Required.
	Records *records.Service
}

// Service serves the history reads of one package.
type Service struct {
	records *records.Service
	pkg     *model.Package
	store   *store.Store
	keys    records.Keys
	codec   *values.Codec
}

// New returns the history reads over o.Records.
func New(o Options) (*Service, error) {
	if o.Records == nil {
		return nil, errors.New("history: Options.Records is required")
	}
	k := o.Records
	return &Service{records: k, pkg: k.Package(), store: k.Store(), keys: k.Keys(), codec: k.Codec()}, nil
}

// History reads (docs/history.md): the revisions of one record, and the
// :current and :as-of reads of temporal entities.

// MaxRevisionsPerPage bounds one read of a record's revisions.
const MaxRevisionsPerPage = 100

// historyGrant decides the revisions grant of e and narrows its readable
// fields to $select; the other options of fields are left to the caller.
func (s *Service) historyGrant(ctx context.Context, c records.Call, e *model.Entity, id string, opts query.RawOptions) (*access.Grant, []*model.Field, *store.Record, error) {
	grant, err := s.records.Decide(ctx, c, model.OpRevisions, e)
	if err != nil {
		return nil, nil, nil, err
	}
	return s.historyRecord(ctx, e, grant, id, opts)
}

// historyRecord narrows grant's readable fields to $select and finds the
// record id the grant may see, or the concealed not-found.
func (s *Service) historyRecord(ctx context.Context, e *model.Entity, grant *access.Grant, id string, opts query.RawOptions) (*access.Grant, []*model.Field, *store.Record, error) {
	fields, err := query.ParseRecord(e, query.Allowed{Readable: grant.Readable.IDs()}, opts)
	if err != nil {
		return nil, nil, nil, records.QueryProblem(err)
	}
	if !values.IsUUID(id) {
		return nil, nil, nil, problem.NotFound()
	}
	cur, ok, err := s.visibleNow(ctx, e, grant, id)
	if err != nil {
		return nil, nil, nil, err
	}
	if !ok {
		return nil, nil, nil, problem.NotFound()
	}
	return grant, fields, cur, nil
}

// visibleNow decides whether the history of record id of e may be shown
// under grant: the one rule of every history read (revisions, a revision,
// :snapshot; the temporal reads are collection reads of current records).
// The caller's current row boundaries hold on the record's current state,
// live or tombstoned, and a change request follows its current visibility
// (the owner only, where the grant says so); past states do not matter.
// See docs/decisions/snapshot-reads.md. It returns the current state when
// visible.
func (s *Service) visibleNow(ctx context.Context, e *model.Entity, grant *access.Grant, id string) (*store.Record, bool, error) {
	cur, err := s.store.Get(ctx, e, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("history: current state of %s: %w", id, err)
	}
	if !grant.Admits(cur.Values) {
		return nil, false, nil
	}
	if e.IsRequestEntity() {
		req, err := s.store.Request(ctx, e, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("history: request %s: %w", id, err)
		}
		if !records.RequestVisible(grant, req) {
			return nil, false, nil
		}
	}
	return cur, true, nil
}

// everyRecordVisible reports whether grant shows the history of every
// record of e (no row boundary, no owner-only request visibility), so that
// visibleNow need not be asked record by record: records are never
// deleted, only tombstoned.
func everyRecordVisible(e *model.Entity, grant *access.Grant) bool {
	if len(grant.Boundaries()) > 0 {
		return false
	}
	return !e.IsRequestEntity() || grant.Source == nil || grant.Source.RequestVisibility != "owner"
}

// Revision reads one revision of a record.
func (s *Service) Revision(ctx context.Context, c records.Call, e *model.Entity, id, revision string, opts query.RawOptions) (*records.Result, error) {
	grant, fields, _, err := s.historyGrant(ctx, c, e, id, opts)
	if err != nil {
		return nil, err
	}
	n, err := strconv.ParseInt(revision, 10, 64)
	if err != nil || n < 1 || strconv.FormatInt(n, 10) != revision {
		return nil, problem.NotFound()
	}
	rev, err := s.store.RevisionOf(ctx, e, id, n)
	if errors.Is(err, store.ErrNotFound) {
		return nil, problem.NotFound()
	}
	if err != nil {
		return nil, err
	}
	dd, err := revisionData(fields, rev)
	if err != nil {
		return nil, err
	}
	env := records.Envelope{Data: records.EnvelopeData{RecordIdentifier: id, RevisionIdentifier: revision, DomainData: dd,
		Tombstoned: rev.Lifecycle == layout.LifecycleTombstoned}, Meta: records.MetaOf(s.pkg, e)}
	if env.Data.ChangeContext, err = s.changeContext(ctx, c, grant, rev); err != nil {
		return nil, err
	}
	if c.Representation == records.JSONLD {
		env.Context = s.pkg.Registry.URLs.Context
	}
	body, err := env.AppendJSON(nil)
	if err != nil {
		return nil, fmt.Errorf("history: render revision: %w", err)
	}
	return &records.Result{Status: http.StatusOK, Body: body}, nil
}

// Revisions reads one page of a record's revisions, oldest first: $top (at
// most MaxRevisionsPerPage, the default) and $select, or a $skiptoken alone
// that continues a read.
func (s *Service) Revisions(ctx context.Context, c records.Call, e *model.Entity, id string, opts query.RawOptions) (*records.Result, error) {
	// The grant is decided before any option is judged, so that a caller
	// without one meets the concealed 404 (or the 401) whatever it sends.
	grant, err := s.records.Decide(ctx, c, model.OpRevisions, e)
	if err != nil {
		return nil, err
	}
	opts = cloneOptions(opts)
	top, token, err := takePaging(opts)
	if err != nil {
		return nil, err
	}
	grant, fields, _, err := s.historyRecord(ctx, e, grant, id, opts)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var after int64
	if token != "" {
		if _, ap := opts[query.OptAccessProfile]; len(opts) > 1 || (len(opts) == 1 && !ap) {
			return nil, problem.New(problem.QueryInvalid, "a cursor is sent alone, with accessProfile only")
		}
		pos, err := s.openRevisionCursor(token, e, id, grant, now)
		if err != nil {
			return nil, err
		}
		after, top = pos.After, pos.Top
		if fields, err = query.ParseRecord(e, query.Allowed{Readable: grant.Readable.IDs()}, query.RawOptions{query.OptSelect: {strings.Join(pos.Select, ",")}}); err != nil {
			return nil, &problem.Error{Code: problem.QueryCursorInvalid, Detail: "The cursor's selection is no longer allowed for this access profile.", Cause: err}
		}
	}
	revs, err := s.store.Revisions(ctx, e, id, after, top+1)
	if err != nil {
		return nil, err
	}
	page := records.Collection{Items: make([]records.CollectionItem, 0, len(revs)), Meta: records.MetaOf(s.pkg, e)}
	if len(revs) > top {
		revs = revs[:top]
		sel := make([]string, len(fields))
		for i, f := range fields {
			sel[i] = f.APIName
		}
		next, err := s.sealRevisionCursor(revisionPosition{cursorBinding: cursorBinding{Entity: e.ID, Route: e.Route, Profile: grant.Profile,
			Principal:       s.keys.CursorPrincipal("engine-revisions-cursor-principal-v1", grant.PrincipalReference),
			PackageRevision: s.pkg.Revision}, Record: id, Top: top, Select: sel, After: revs[len(revs)-1].Revision}, e, now)
		if err != nil {
			return nil, err
		}
		page.PageInfo.NextCursor = &next
	}
	contexts := map[string]json.RawMessage{}
	for _, rev := range revs {
		dd, err := revisionData(fields, rev)
		if err != nil {
			return nil, err
		}
		cc, ok := contexts[rev.CommitID]
		if !ok {
			if cc, err = s.changeContext(ctx, c, grant, rev); err != nil {
				return nil, err
			}
			contexts[rev.CommitID] = cc
		}
		page.Items = append(page.Items, records.CollectionItem{RecordIdentifier: id, RevisionIdentifier: strconv.FormatInt(rev.Revision, 10),
			DomainData: dd, Tombstoned: rev.Lifecycle == layout.LifecycleTombstoned, ChangeContext: cc})
	}
	if c.Representation == records.JSONLD {
		page.Context = s.pkg.Registry.URLs.Context
	}
	body, err := page.AppendJSON(make([]byte, 0, 256+256*len(page.Items)))
	if err != nil {
		return nil, fmt.Errorf("history: render revisions: %w", err)
	}
	return &records.Result{Status: http.StatusOK, Body: body}, nil
}

// revisionData returns the stored values of a revision by apiName, narrowed
// to fields; a field the revision does not hold is null.
func revisionData(fields []*model.Field, rev *store.Revision) (map[string]any, error) {
	var stored map[string]json.RawMessage
	if err := json.Unmarshal(rev.Data, &stored); err != nil {
		return nil, fmt.Errorf("history: revision data: %w", err)
	}
	dd := make(map[string]any, len(fields))
	for _, f := range fields {
		if v, ok := stored[f.ID]; ok && string(v) != "null" {
			dd[f.APIName] = v
		} else {
			dd[f.APIName] = nil
		}
	}
	return dd, nil
}

// changeContext returns the correction context of a revision's batch, with
// the members the revisions grant lists in provenanceFields, when every
// revision of the batch (the same commit) is visible to the caller: its
// entity grants revisions to the selected profile and the record's current
// state lies inside that grant's row boundaries. Otherwise nil.
func (s *Service) changeContext(ctx context.Context, c records.Call, grant *access.Grant, rev *store.Revision) (json.RawMessage, error) {
	if len(rev.ChangeContext) == 0 || grant.Source == nil || len(grant.Source.ProvenanceFields) == 0 {
		return nil, nil
	}
	var full map[string]json.RawMessage
	if err := json.Unmarshal(rev.ChangeContext, &full); err != nil {
		return nil, fmt.Errorf("history: change context: %w", err)
	}
	shown := map[string]json.RawMessage{}
	for _, name := range grant.Source.ProvenanceFields {
		if v, ok := full[name]; ok {
			shown[name] = v
		}
	}
	if len(shown) == 0 {
		return nil, nil
	}
	members, err := s.store.CommitMembers(ctx, rev.CommitID)
	if err != nil {
		return nil, err
	}
	grants := map[string]*access.Grant{}
	for _, m := range members {
		e := s.pkg.EntityByID(m.EntityID)
		if e == nil {
			return nil, nil
		}
		g, ok := grants[e.ID]
		if !ok {
			g, err = s.records.Decide(ctx, c, model.OpRevisions, e)
			if err != nil {
				var p *problem.Error
				if errors.As(err, &p) {
					return nil, nil // a record of the batch the caller may not see
				}
				return nil, err
			}
			grants[e.ID] = g
		}
		cur, err := s.store.Get(ctx, e, m.RecordID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if !g.Admits(cur.Values) {
			return nil, nil
		}
	}
	out, err := canonjson.Marshal(shown)
	if err != nil {
		return nil, fmt.Errorf("history: change context: %w", err)
	}
	return out, nil
}

// cloneOptions copies the options, which the history reads take apart.
func cloneOptions(opts query.RawOptions) query.RawOptions {
	out := make(query.RawOptions, len(opts))
	for k, v := range opts {
		out[k] = v
	}
	return out
}

// takePaging removes $top and $skiptoken from opts; a $skiptoken comes
// without $top (its cursor carries the page size).
func takePaging(opts query.RawOptions) (int, string, error) {
	top := MaxRevisionsPerPage
	v, hasTop := opts[query.OptTop]
	if hasTop {
		delete(opts, query.OptTop)
		n, err := strconv.Atoi(v[0])
		if len(v) != 1 || err != nil || n < 1 || n > MaxRevisionsPerPage || strconv.Itoa(n) != v[0] {
			return 0, "", problem.New(problem.QueryInvalid, "$top must be an integer from 1 to %d", MaxRevisionsPerPage)
		}
		top = n
	}
	var token string
	if v, ok := opts[query.OptSkipToken]; ok {
		delete(opts, query.OptSkipToken)
		if len(v) != 1 || v[0] == "" {
			return 0, "", problem.New(problem.QueryInvalid, "$skiptoken must be given exactly once")
		}
		token = v[0]
	}
	if hasTop && token != "" {
		return 0, "", problem.New(problem.QueryInvalid, "a cursor is sent alone, with accessProfile only")
	}
	return top, token, nil
}

// revisionPosition is the sealed content of a revisions cursor: its
// binding (entity, route, record, profile, keyed principal, package
// revision), the read ($top, $select by apiName) and the last revision read.
type revisionPosition struct {
	cursorBinding
	Record string   `json:"record"`
	Top    int      `json:"top"`
	Select []string `json:"select"`
	After  int64    `json:"after"`
}

// cursorBinding is what a sealed history cursor is bound to: its version
// and lifetime, the entity and route, the profile, the keyed principal and
// the package revision.
type cursorBinding struct {
	Version         int    `json:"v"`
	IssuedAt        int64  `json:"iat"`
	ExpiresAt       int64  `json:"exp"`
	Entity          string `json:"entity"`
	Route           string `json:"route"`
	Profile         string `json:"profile"`
	Principal       string `json:"principal"`
	PackageRevision string `json:"packageRevision"`
}

// The key label and additional data of revision cursors.
const (
	revisionCursorLabel = "registrum revisions cursor v1"
	revisionCursorAAD   = "registrum-revisions-cursor-v1"
)

func cursorAge(e *model.Entity) int64 {
	if e.Cursor.MaxAgeSeconds > 0 {
		return int64(e.Cursor.MaxAgeSeconds)
	}
	return cursor.DefaultCursorMaxAge
}

// sealRevisionCursor seals p with AES-256-GCM under a key of its own,
// derived from the cursor key, as collection cursors are sealed.
func (s *Service) sealRevisionCursor(p revisionPosition, e *model.Entity, now time.Time) (string, error) {
	p.Version, p.IssuedAt = 1, now.Unix()
	p.ExpiresAt = p.IssuedAt + cursorAge(e)
	return s.records.Seal(revisionCursorLabel, revisionCursorAAD, p)
}

// openRevisionCursor opens a revisions cursor presented for record id of e
// under grant; any failure is query.cursor_invalid.
func (s *Service) openRevisionCursor(token string, e *model.Entity, id string, grant *access.Grant, now time.Time) (*revisionPosition, error) {
	bad := func(detail string) error { return problem.New(problem.QueryCursorInvalid, "%s", detail) }
	if len(token) > cursor.MaxCursorBytes {
		return nil, bad("The cursor is not a valid cursor of this service.")
	}
	var p revisionPosition
	if err := s.records.OpenSealed(revisionCursorLabel, revisionCursorAAD, token, &p); err != nil || p.Version != 1 {
		return nil, bad("The cursor is not a valid cursor of this service.")
	}
	principal := s.keys.CursorPrincipal("engine-revisions-cursor-principal-v1", grant.PrincipalReference)
	if p.Entity != e.ID || p.Route != e.Route || p.Record != id || p.Profile != grant.Profile || p.Principal != principal || p.PackageRevision != s.pkg.Revision {
		return nil, bad("The cursor was issued to another caller, access profile, record or package revision.")
	}
	t := now.Unix()
	if p.IssuedAt > now.Add(cursor.CursorClockSkew).Unix() || t >= p.ExpiresAt || t-p.IssuedAt >= cursorAge(e) {
		return nil, bad(fmt.Sprintf("The cursor has expired: cursors are valid for %d seconds.", cursorAge(e)))
	}
	if p.Top < 1 || p.Top > MaxRevisionsPerPage || p.After < 1 {
		return nil, bad("The cursor is not a valid cursor of this service.")
	}
	return &p, nil
}

// Temporal reads one page of the live records of temporal entity e whose
// validity interval contains asOf (now when :current), as a collection
// read under the list operation. asOf is a UTC RFC 3339 timestamp ("" when
// the request has none); each page of :current is evaluated at its own
// time. A cursor of :as-of carries its instant and is sent alone: asOf
// beside a $skiptoken is refused like any other option.
func (s *Service) Temporal(ctx context.Context, c records.Call, e *model.Entity, current bool, opts query.RawOptions) (*records.Result, error) {
	if e.Temporal == nil {
		return nil, problem.NotFound()
	}
	at := time.Now().UTC()
	read := ":current"
	if !current {
		asOf, given := opts[OptAsOf]
		delete(opts, OptAsOf)
		t, err := s.asOfInstant(asOf, given, opts)
		if err != nil {
			// The grant is decided first, so that a caller without one
			// learns nothing of the options.
			if _, derr := s.records.Decide(ctx, c, model.OpList, e); derr != nil {
				return nil, derr
			}
			return nil, err
		}
		at, read = t, asOfRead(t)
	}
	var narrowErr error
	res, err := s.records.ListNarrowed(ctx, c, e, opts, read, func(scope querysql.Fragment) querysql.Fragment {
		out, err := store.ValidAt(e, scope, at)
		if err != nil {
			narrowErr = err
			return scope
		}
		return out
	})
	if narrowErr != nil {
		return nil, narrowErr
	}
	return res, err
}

// OptAsOf is the query option of an :as-of read's instant.
const OptAsOf = "asOf"

// asOfReadPrefix starts the read name (cursor.Caller.Read) of an :as-of
// read; the instant follows in RFC 3339 with nanoseconds, UTC.
const asOfReadPrefix = ":as-of "

// asOfRead names the :as-of read at t; its cursors are bound to it.
func asOfRead(t time.Time) string { return asOfReadPrefix + t.Format(time.RFC3339Nano) }

// asOfInstant returns the instant of an :as-of page: the request's asOf on
// a first page, the instant sealed in the cursor on a next one. asOf beside
// a cursor is refused (a cursor is sent alone, with accessProfile only); a
// cursor of another read is query.cursor_invalid.
func (s *Service) asOfInstant(values []string, given bool, opts query.RawOptions) (time.Time, error) {
	tok, ok := opts[query.OptSkipToken]
	if !ok {
		switch len(values) {
		case 0:
			return parseAsOf("")
		case 1:
			return parseAsOf(values[0])
		}
		return time.Time{}, problem.New(problem.QueryInvalid, "asOf must be given once: the instant to read at, in RFC 3339")
	}
	if given {
		return time.Time{}, problem.New(problem.QueryInvalid, "asOf cannot be combined with %s: a cursor carries the whole read, its instant included, and is sent alone, with only accessProfile.", query.OptSkipToken)
	}
	if len(tok) != 1 {
		return time.Time{}, problem.New(problem.QueryInvalid, "%s must be given exactly once", query.OptSkipToken)
	}
	read, err := s.records.Sealer().ReadOf(tok[0])
	if err != nil {
		return time.Time{}, records.QueryProblem(err)
	}
	v, ok := strings.CutPrefix(read, asOfReadPrefix)
	t, perr := parseAsOf(v)
	if !ok || perr != nil || asOfRead(t) != read {
		return time.Time{}, problem.New(problem.QueryCursorInvalid, "The cursor was issued to another read than :as-of.")
	}
	return t, nil
}

// parseAsOf reads asOf: a UTC RFC 3339 timestamp (Z, or an offset of
// +00:00), whatever the type of the interval fields.
func parseAsOf(v string) (time.Time, error) {
	refuse := problem.New(problem.QueryInvalid, "asOf must be a UTC RFC 3339 timestamp, such as 2025-01-31T00:00:00Z")
	if v == "" {
		return time.Time{}, refuse
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || !(strings.HasSuffix(v, "Z") || strings.HasSuffix(v, "+00:00")) || strings.ContainsAny(v[:10], "tz ") {
		return time.Time{}, refuse
	}
	return t.UTC(), nil
}

// Snapshot reads one page of the collection of e as recorded at a commit:
// the latest committed state when no snapshot token is given (its token is
// returned with the page), else the state of the token, through every page.
func (s *Service) Snapshot(ctx context.Context, c records.Call, e *model.Entity, opts query.RawOptions) (*records.Result, error) {
	grant, err := s.records.Decide(ctx, c, model.OpSnapshot, e)
	if err != nil {
		return nil, err
	}
	opts = cloneOptions(opts)
	delete(opts, query.OptAccessProfile)
	_, hasTop := opts[query.OptTop]
	top, cur, err := takePaging(opts)
	if err != nil {
		return nil, err
	}
	if !hasTop {
		top = query.DefaultTop
	}
	if _, ok := opts["recordedAsOf"]; ok {
		return nil, problem.New(problem.QueryInvalid, "recordedAsOf is not an option of :snapshot")
	}
	one := func(name string) (string, bool, error) {
		v, ok := opts[name]
		delete(opts, name)
		if ok && len(v) != 1 {
			return "", false, problem.New(problem.QueryInvalid, "%s must be given exactly once", name)
		}
		if !ok {
			return "", false, nil
		}
		return v[0], true, nil
	}
	token, hasToken, err := one("snapshot")
	if err != nil {
		return nil, err
	}
	validAt, hasValidAt, err := one("validAt")
	if err != nil {
		return nil, err
	}
	now := time.Now()
	principal := s.keys.CursorPrincipal("engine-snapshot-cursor-principal-v1", grant.PrincipalReference)
	var sel []string
	after := ""
	if cur != "" {
		if len(opts) > 0 || hasToken || hasValidAt {
			return nil, problem.New(problem.QueryInvalid, "a cursor is sent alone, with accessProfile only")
		}
		var p snapshotPosition
		if err := s.records.OpenSealed(snapshotCursorLabel, snapshotCursorAAD, cur, &p); err != nil || p.Version != 1 {
			return nil, problem.New(problem.QueryCursorInvalid, "The cursor is not a valid cursor of this service.")
		}
		if p.Entity != e.ID || p.Route != e.Route || p.Profile != grant.Profile || p.Principal != principal || p.PackageRevision != s.pkg.Revision {
			return nil, problem.New(problem.QueryCursorInvalid, "The cursor was issued to another caller, access profile or package revision.")
		}
		t := now.Unix()
		if p.IssuedAt > now.Add(cursor.CursorClockSkew).Unix() || t >= p.ExpiresAt || t-p.IssuedAt >= cursorAge(e) || p.Top < 1 || p.Top > MaxRevisionsPerPage {
			return nil, problem.New(problem.QueryCursorInvalid, "The cursor has expired: cursors are valid for %d seconds.", cursorAge(e))
		}
		token, validAt, hasValidAt, top, sel, after = p.Snapshot, p.ValidAt, p.ValidAt != "", p.Top, p.Select, p.After
		hasToken = true
		opts = query.RawOptions{query.OptSelect: {strings.Join(sel, ",")}}
	}
	var at validInstant
	if hasValidAt {
		if at, err = parseValidAt(e, validAt); err != nil {
			return nil, err
		}
	}
	fields, err := query.ParseRecord(e, query.Allowed{Readable: grant.Readable.IDs()}, opts)
	if err != nil {
		return nil, records.QueryProblem(err)
	}
	ctx, cancel := context.WithTimeout(ctx, SnapshotBudget)
	defer cancel()
	var snap store.Snapshot
	// The snapshot is checked in the round trip of the first records read:
	// a token against the database's tag now, not the one read at start,
	// so that hosts sharing the database agree on it
	// (docs/decisions/snapshot-reads.md).
	var tag *[8]byte
	if hasToken {
		var t [8]byte
		if t, snap, err = records.ParseSnapshotToken(token); err != nil {
			return nil, err
		}
		tag = &t
	} else if snap, err = s.store.CurrentSnapshot(ctx); err != nil {
		return nil, records.SourceUnavailable(err)
	}
	checked := false
	page := records.Collection{Items: []records.CollectionItem{}, Meta: records.MetaOf(s.pkg, e)}
	// The items' domainData is rendered from each record's values in the
	// order of the selected fields' names (no map per record).
	members := slices.Clone(fields)
	slices.SortFunc(members, func(a, b *model.Field) int { return strings.Compare(a.APIName, b.APIName) })
	page.Members = make([]string, len(members))
	for i, f := range members {
		page.Members[i] = f.APIName
	}
	var last string
	more := false
	origins := map[string]bool{}
	everyVisible := everyRecordVisible(e, grant)
	// Every revision read is shown unless validAt or the caller's row
	// boundaries leave some out: then a page reads twice what it shows at
	// a time, else exactly the page and one more to know there is more.
	batch := 2 * top
	if everyVisible && !at.set {
		batch = top + 1
	}
	for len(page.Items) <= top {
		var revs []store.SnapshotRecord
		if checked {
			revs, err = s.store.SnapshotRecords(ctx, e, snap, after, batch)
		} else if revs, err = s.store.CheckedSnapshotRecords(ctx, tag, e, snap, after, batch); err == nil && !hasToken {
			// The tag the check read names the new token.
			token, err = records.SnapshotToken(s.store.HistoryTag(), snap)
		}
		if err != nil {
			return nil, records.SourceUnavailable(err)
		}
		checked = true
		for i := range revs {
			rev := &revs[i]
			after = rev.RecordID
			if origins[rev.PackageRevision] = true; len(origins) > MaxSchemaDescriptors {
				return nil, records.SourceUnavailable(fmt.Errorf("history: a snapshot read over more than %d package revisions", MaxSchemaDescriptors))
			}
			wire, ok, err := s.snapshotState(e, at, rev)
			if err != nil {
				return nil, records.SourceUnavailable(err)
			}
			if !ok {
				continue
			}
			if !everyVisible {
				// The row boundaries judge the current state, which the
				// read returned with the record; a request's visibility
				// needs its workflow row.
				if ok = grant.Admits(rev.Current); ok && e.IsRequestEntity() {
					_, ok, err = s.visibleNow(ctx, e, grant, rev.RecordID)
				}
				if err != nil {
					return nil, records.SourceUnavailable(err)
				}
				if !ok {
					continue
				}
			}
			if len(page.Items) == top {
				more = true
				break
			}
			vals := make([]any, len(members))
			for j, f := range members {
				vals[j] = wire[f.ID]
			}
			page.Items = append(page.Items, records.CollectionItem{RecordIdentifier: rev.RecordID, RevisionIdentifier: strconv.FormatInt(rev.Revision, 10), Values: vals})
			last = rev.RecordID
		}
		if more || len(revs) < batch {
			break
		}
	}
	page.Snapshot = token
	if more {
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.APIName
		}
		p := snapshotPosition{cursorBinding: cursorBinding{Version: 1, IssuedAt: now.Unix(), ExpiresAt: now.Unix() + cursorAge(e), Entity: e.ID, Route: e.Route,
			Profile: grant.Profile, Principal: principal, PackageRevision: s.pkg.Revision}, Snapshot: token,
			ValidAt: validAt, Top: top, Select: names, After: last}
		next, err := s.records.Seal(snapshotCursorLabel, snapshotCursorAAD, p)
		if err != nil {
			return nil, err
		}
		page.PageInfo.NextCursor = &next
	}
	if c.Representation == records.JSONLD {
		page.Context = s.pkg.Registry.URLs.Context
	}
	body, err := page.AppendJSON(make([]byte, 0, 256+256*len(page.Items)))
	if err != nil {
		return nil, fmt.Errorf("history: render snapshot: %w", err)
	}
	return &records.Result{Status: http.StatusOK, Body: body}, nil
}

// MaxSchemaDescriptors bounds the originating schema descriptors (package
// revisions the shown revisions were written under) of one snapshot read.
const MaxSchemaDescriptors = 64

// SnapshotBudget is the database budget of one snapshot read.
const SnapshotBudget = 2 * time.Second

// snapshotPosition is the sealed content of a snapshot cursor.
type snapshotPosition struct {
	cursorBinding
	Snapshot string   `json:"snapshot"`
	ValidAt  string   `json:"validAt,omitempty"`
	Top      int      `json:"top"`
	Select   []string `json:"select"`
	After    string   `json:"after"`
}

// The key label and additional data of snapshot cursors.
const (
	snapshotCursorLabel = "registrum snapshot cursor v1"
	snapshotCursorAAD   = "registrum-snapshot-cursor-v1"
)

// validInstant is a parsed validAt; zero when absent.
type validInstant struct {
	set  bool
	date string
	ts   time.Time
}

// parseValidAt reads validAt: temporal entities only; a calendar date for a
// date start field, a UTC RFC 3339 timestamp for a timestamp start field.
func parseValidAt(e *model.Entity, v string) (validInstant, error) {
	if e.Temporal == nil {
		return validInstant{}, problem.New(problem.QueryInvalid, "validAt applies to temporal entities only")
	}
	if e.Temporal.Type == model.TypeDate {
		d, err := time.Parse(time.DateOnly, v)
		if err != nil || d.Format(time.DateOnly) != v {
			return validInstant{}, problem.New(problem.QueryInvalid, "validAt must be a calendar date, such as 2025-01-31")
		}
		return validInstant{set: true, date: v}, nil
	}
	t, err := parseAsOf(v)
	if err != nil {
		return validInstant{}, problem.New(problem.QueryInvalid, "validAt must be a UTC RFC 3339 timestamp, such as 2025-01-31T00:00:00Z")
	}
	return validInstant{set: true, ts: t}, nil
}

// snapshotState returns a record's values in a snapshot in the form a
// current read answers (values.Encode of their storage form, nil for an
// absent or null value), by field id, with whether, under validAt, they
// lie in its validity interval. A state read from a revision is decoded
// under the current field metadata, its data parsed once whatever is shown
// of it. Row boundaries are not judged on them but on the record's
// current state (SnapshotRecord.Current).
func (s *Service) snapshotState(e *model.Entity, at validInstant, rev *store.SnapshotRecord) (map[string]any, bool, error) {
	var wire map[string]any
	if rev.Values != nil {
		wire = make(map[string]any, len(e.Fields))
		// The row may have been written under an earlier package: its
		// values are then checked as a revision's are. The active
		// package's own writes were checked by its rules when written.
		earlier := rev.PackageRevision != s.pkg.Revision
		for _, f := range e.Fields {
			v := rev.Values[f.ID]
			if v == nil {
				wire[f.ID] = nil
				continue
			}
			if earlier {
				if err := s.codec.CheckStored(f, v); err != nil {
					return nil, false, fmt.Errorf("history: snapshot field %s no longer matches: %w", f.ID, err)
				}
			}
			wire[f.ID] = values.Encode(f, v)
		}
	} else {
		doc, err := strictjson.Decode(rev.Data)
		if err != nil {
			return nil, false, fmt.Errorf("history: snapshot revision data: %w", err)
		}
		if wire, _ = doc.(map[string]any); wire == nil {
			return nil, false, errors.New("history: snapshot revision data is not an object")
		}
		for _, f := range e.Fields {
			v, ok := wire[f.ID]
			if !ok || v == nil {
				continue
			}
			stored, err := s.codec.Decode(f, v)
			if err != nil {
				return nil, false, fmt.Errorf("history: snapshot field %s no longer matches: %w", f.ID, err)
			}
			wire[f.ID] = values.Encode(f, stored)
		}
	}
	admitted, err := validIn(e, at, wire)
	return wire, admitted, err
}

// validIn reports whether wire, a revision's values by field id, lie in
// e's validity interval at at (always, without validAt).
func validIn(e *model.Entity, at validInstant, wire map[string]any) (bool, error) {
	if !at.set {
		return true, nil
	}
	start, _ := wire[e.Temporal.StartField].(string)
	end, _ := wire[e.Temporal.EndField].(string)
	if at.date != "" {
		return start != "" && start <= at.date && (end == "" || end > at.date), nil
	}
	st, err := time.Parse(time.RFC3339Nano, start)
	if err != nil {
		return false, errors.New("history: snapshot interval start")
	}
	if st.After(at.ts) {
		return false, nil
	}
	if end == "" {
		return true, nil
	}
	et, err := time.Parse(time.RFC3339Nano, end)
	if err != nil {
		return false, errors.New("history: snapshot interval end")
	}
	return et.After(at.ts), nil
}
