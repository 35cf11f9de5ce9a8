package records

import (
	"context"
	"strings"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store"
)

// Read reads the current revision of one live record, like Get, with the
// query options of a single-record read: $select narrows domainData exactly
// as on a collection read, and any other option is refused with
// query.invalid (after the caller's grant is decided, as List does).
func (s *Service) Read(ctx context.Context, c Call, e *model.Entity, id string, opts query.RawOptions) (*Result, error) {
	if opts == nil {
		opts = query.RawOptions{}
	}
	return s.get(ctx, c, e, id, opts)
}

// selected narrows the readable fields of a decided grant to a read's
// $select; attachment slots, which $select does not name, stay readable.
func selected(e *model.Entity, g *access.Grant, opts query.RawOptions) (*access.Grant, error) {
	if _, ok := opts[query.OptSelect]; !ok && shownWhole(e, g.Readable) {
		// Without $select a read shows every readable field and slot, and
		// the grant reads nothing else: it is the grant as decided, once
		// the options are checked.
		if _, err := query.ParseRecord(e, query.Allowed{}, opts); err != nil {
			return nil, QueryProblem(err)
		}
		return g, nil
	}
	fields, err := query.ParseRecord(e, query.Allowed{Readable: g.Readable.IDs()}, opts)
	if err != nil {
		return nil, QueryProblem(err)
	}
	ids := make([]string, len(fields), len(fields)+len(e.Attachments))
	for i, f := range fields {
		ids[i] = f.ID
	}
	for _, slot := range e.Attachments {
		if g.Readable.Has(slot.ID) {
			ids = append(ids, slot.ID)
		}
	}
	n := *g
	n.Readable = access.NewFieldSet(ids...)
	return &n, nil
}

// shownWhole reports whether every id of readable is a field or an
// attachment slot of e, so that the fields and slots a read without
// $select shows are readable itself.
func shownWhole(e *model.Entity, readable access.FieldSet) bool {
	n := 0
	for _, f := range e.Fields {
		if readable.Has(f.ID) {
			n++
		}
	}
	for _, slot := range e.Attachments {
		if readable.Has(slot.ID) {
			n++
		}
	}
	return n == readable.Len()
}

// RetryAfterSeconds is what the host asks clients to wait when the
// database is unavailable.
const RetryAfterSeconds = 5

// Refusal turns an error of the service into the refusal the edge renders:
// a problem is kept, a database that cannot be reached becomes
// source.unavailable (503, to be retried), anything else is left to
// problem.Wrap (an internal error whose cause is logged, never answered).
func Refusal(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*problem.Error); ok {
		return err
	}
	if store.Unavailable(err) {
		return &problem.Error{Code: problem.SourceUnavailable, Detail: "The database is unavailable; retry later.", Cause: err}
	}
	return err
}

// CheckIfMatch refuses an If-Match header that cannot name a revision: the
// wildcard (a write must name the revision it read) and anything that is
// not a list of quoted strong entity tags. Both keep the specification's
// 412 precondition.failed, with a detail that says the header is at fault,
// not the record.
func CheckIfMatch(h string) error {
	tags := splitETags(h)
	if len(tags) == 0 {
		return problem.New(problem.PreconditionFailed, "If-Match is malformed: it names no entity tag; send the ETag of the revision you read")
	}
	for _, t := range tags {
		switch {
		case t == "*":
			return problem.New(problem.PreconditionFailed, "If-Match is malformed for a write: * is not accepted; send the ETag of the revision you read")
		case strings.HasPrefix(t, "W/"):
			return problem.New(problem.PreconditionFailed, "If-Match is malformed: a weak entity tag cannot match; send the ETag exactly as read")
		case len(t) < 2 || t[0] != '"' || t[len(t)-1] != '"' || strings.Contains(t[1:len(t)-1], `"`):
			return problem.New(problem.PreconditionFailed, "If-Match is malformed: an entity tag is a quoted string, sent exactly as the ETag header gave it")
		}
	}
	return nil
}
