package records

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
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/querysql"
)

// Collection is a page of a collection read.
type Collection struct {
	Context  string           `json:"@context,omitempty"`
	Items    []CollectionItem `json:"items"`
	PageInfo PageInfo         `json:"pageInfo"`
	Meta     Meta             `json:"meta"`
	// Count is the matching total, with $count.
	Count *int64 `json:"count,omitempty"`
	// Snapshot is the token of the state a :snapshot read shows.
	Snapshot string `json:"snapshot,omitempty"`
	// Members names, in sorted order, the domainData members of the items
	// that give theirs as Values rather than as a map (AppendJSON only).
	Members []string `json:"-"`
}

// CollectionItem is one record of a page, without the data wrapper.
type CollectionItem struct {
	RecordIdentifier   string `json:"recordIdentifier"`
	RevisionIdentifier string `json:"revisionIdentifier"`
	// DomainData is the item's domainData; when it is nil and Values is
	// set, Values holds the wire value of each of the page's Members, in
	// their order (AppendJSON only: a page of records builds no map per
	// record).
	DomainData map[string]any `json:"domainData"`
	Values     []any          `json:"-"`
	// Tombstoned and ChangeContext are set on revision reads only.
	Tombstoned    bool            `json:"tombstoned,omitempty"`
	ChangeContext json.RawMessage `json:"changeContext,omitempty"`
}

// PageInfo says where the next page starts.
type PageInfo struct {
	// NextCursor is null on the last page.
	NextCursor *string `json:"nextCursor"`
}

// List reads one page of the live records of e that the caller may see.
func (s *Service) List(ctx context.Context, c Call, e *model.Entity, opts query.RawOptions) (*Result, error) {
	return s.ListNarrowed(ctx, c, e, opts, "", nil)
}

// ListNarrowed reads one page of a collection read: read names a read other than
// the plain list (its cursors are bound to it), and narrow, when set, adds
// its condition to the scope.
func (s *Service) ListNarrowed(ctx context.Context, c Call, e *model.Entity, opts query.RawOptions, read string, narrow func(querysql.Fragment) querysql.Fragment) (*Result, error) {
	grant, err := s.Decide(ctx, c, model.OpList, e)
	if err != nil {
		return nil, err
	}
	allowed := query.Allowed{
		Readable:   grant.Readable.IDs(),
		Filterable: grant.Filterable.IDs(),
		Sortable:   grant.Sortable.IDs(),
		AllowCount: grant.AllowCount,
	}
	requestPseudo(e, grant, &allowed)
	caller := cursor.Caller{Principal: grant.PrincipalReference, Profile: grant.Profile, PackageRevision: s.pkg.Revision, Read: read}
	now := time.Now()
	q, err := s.sealer.Parse(e, allowed, opts, caller, now)
	if err != nil {
		return nil, QueryProblem(err)
	}
	recs, next, err := s.Page(ctx, e, grant, q, caller, now, narrow)
	if err != nil {
		return nil, err
	}
	page := Collection{Items: make([]CollectionItem, 0, len(recs)), Meta: MetaOf(s.pkg, e)}
	page.PageInfo.NextCursor = next
	slots, err := s.pageSlots(ctx, e, grant, recs)
	if err != nil {
		return nil, err
	}
	members := domainMembers(e, q.Select, slots != nil, grant.Readable)
	page.Members = make([]string, len(members))
	for i, m := range members {
		page.Members[i] = m.name
	}
	n := len(members)
	vals := make([]any, len(recs)*n)
	for i, rec := range recs {
		v := vals[i*n : (i+1)*n : (i+1)*n]
		var req *store.Request
		for j, m := range members {
			switch {
			case m.field != nil:
				v[j] = values.Encode(m.field, rec.Value(m.field))
			default:
				if req == nil {
					req = &store.Request{Attachments: slots[rec.ID]}
				}
				v[j] = slotMetadata(req.Attachment(m.name))
			}
		}
		page.Items = append(page.Items, CollectionItem{
			RecordIdentifier:   rec.ID,
			RevisionIdentifier: strconv.FormatInt(rec.Revision, 10),
			Values:             v,
		})
	}
	if q.Count {
		scope, err := s.scope(e, grant, narrow)
		if err != nil {
			return nil, err
		}
		n, err := s.store.Count(ctx, q, scope)
		if err != nil {
			return nil, err
		}
		page.Count = &n
	}
	if c.Representation == JSONLD {
		page.Context = s.pkg.Registry.URLs.Context
	}
	body, err := page.AppendJSON(make([]byte, 0, 256+256*len(page.Items)))
	if err != nil {
		return nil, fmt.Errorf("records: render page: %w", err)
	}
	return &Result{Status: http.StatusOK, Body: body}, nil
}

// domainMember is a member of a page's domainData: a selected field (under
// its API name) or, when field is nil, a readable attachment slot (under
// its id).
type domainMember struct {
	name  string
	field *model.Field
}

// domainMembers returns the members of the domainData of every record of a
// page, sorted by name as AppendDomainData writes a map's: the selected
// fields, and the readable attachment slots when slots is set.
func domainMembers(e *model.Entity, sel []*model.Field, slots bool, readable access.FieldSet) []domainMember {
	ms := make([]domainMember, 0, len(sel)+len(e.Attachments))
	for _, f := range sel {
		ms = append(ms, domainMember{name: f.APIName, field: f})
	}
	if slots {
		for _, slot := range e.Attachments {
			if readable.Has(slot.ID) {
				ms = append(ms, domainMember{name: slot.ID})
			}
		}
	}
	slices.SortFunc(ms, func(a, b domainMember) int { return strings.Compare(a.name, b.name) })
	return ms
}

// scope returns the condition every record a collection read of e by the
// grant's caller may see meets: live, inside the row boundaries, the
// caller's own requests under requestVisibility owner, and narrow's
// condition when set.
func (s *Service) scope(e *model.Entity, grant *access.Grant, narrow func(querysql.Fragment) querysql.Fragment) (querysql.Fragment, error) {
	scope, err := store.Scope(e, storeBoundaries(grant))
	if err != nil {
		return querysql.Fragment{}, err
	}
	if ownRequestsOnly(e, grant) {
		scope = store.OwnedRequests(e, scope, grant.PrincipalReference)
	}
	if narrow != nil {
		scope = narrow(scope)
	}
	return scope, nil
}

// Page reads the records of one page of q in the grant's scope, at most
// q.Top, and seals the cursor of the next page when there is one (nil on
// the last page).
func (s *Service) Page(ctx context.Context, e *model.Entity, grant *access.Grant, q *query.Query, caller cursor.Caller, now time.Time,
	narrow func(querysql.Fragment) querysql.Fragment) ([]*store.Record, *string, error) {
	scope, err := s.scope(e, grant, narrow)
	if err != nil {
		return nil, nil, err
	}
	recs, err := s.store.Page(ctx, q, scope)
	if err != nil {
		return nil, nil, err
	}
	if len(recs) <= q.Top {
		return recs, nil, nil
	}
	recs = recs[:q.Top]
	last := recs[len(recs)-1]
	next, err := s.sealer.Seal(q, caller, query.Row{ID: last.ID, Values: last.ValueMap()}, now)
	if err != nil {
		return nil, nil, fmt.Errorf("records: seal cursor: %w", err)
	}
	return recs, &next, nil
}

// QueryProblem answers a refusal of the query layer (a *query.Error) with
// its problem code and the same detail; any other error is returned as is.
func QueryProblem(err error) error {
	var qe *query.Error
	if !errors.As(err, &qe) {
		return err
	}
	code := problem.QueryInvalid
	if qe.Kind == query.CursorInvalid {
		code = problem.QueryCursorInvalid
	}
	return &problem.Error{Code: code, Detail: qe.Detail, Cause: qe.Cause}
}

// storeBoundaries converts the grant's resolved row boundaries for the store.
func storeBoundaries(g *access.Grant) []store.Boundary {
	var out []store.Boundary
	for _, b := range g.Boundaries() {
		out = append(out, store.Boundary{FieldID: b.Field, Values: b.Values})
	}
	return out
}

// pageSlots reads the current slots of a page of request records, nil when
// the entity has no slot the grant may read.
func (s *Service) pageSlots(ctx context.Context, e *model.Entity, grant *access.Grant, recs []*store.Record) (map[string][]store.Attachment, error) {
	readable := false
	for _, slot := range e.Attachments {
		readable = readable || grant.Readable.Has(slot.ID)
	}
	if !readable || !e.IsRequestEntity() || len(recs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(recs))
	for i, rec := range recs {
		ids[i] = rec.ID
	}
	by, err := s.store.CurrentAttachments(ctx, e, ids)
	if err != nil {
		return nil, err
	}
	if by == nil {
		by = map[string][]store.Attachment{}
	}
	return by, nil
}
