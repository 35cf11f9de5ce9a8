package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/querysql"
)

// Revision is one stored revision of a record, from registrum.revisions.
type Revision struct {
	RecordID  string
	Revision  int64
	Lifecycle string
	// Data is the record's stored values in wire form by authored field id
	// (JSON object); a field not present was null.
	Data      []byte
	CommitID  string
	CreatedAt time.Time
	// ChangeContext is the JSON of the batch's change context, nil when none.
	ChangeContext []byte
	// PackageRevision is the package revision the revision was written
	// under: the origin of its field descriptors.
	PackageRevision string
}

// CommitMember is one revision written by a commit: its entity and record.
type CommitMember struct {
	EntityID string
	RecordID string
}

const revisionColumns = `record_id::text, revision, lifecycle, data::text, commit_id::text, created_at, change_context::text, package_revision`

func scanRevision(row pgx.Row) (*Revision, error) {
	var r Revision
	var data string
	var cc *string
	if err := row.Scan(&r.RecordID, &r.Revision, &r.Lifecycle, &data, &r.CommitID, &r.CreatedAt, &cc, &r.PackageRevision); err != nil {
		return nil, err
	}
	r.Data = []byte(data)
	if cc != nil {
		r.ChangeContext = []byte(*cc)
	}
	r.CreatedAt = r.CreatedAt.UTC()
	return &r, nil
}

// Revisions returns at most limit revisions of record id of e after
// revision after, oldest first.
func (s *Store) Revisions(ctx context.Context, e *model.Entity, id string, after int64, limit int) (_ []*Revision, err error) {
	ctx, span := startOp(ctx, spanRead, "Revisions")
	defer func() { endOp(span, err) }()
	rows, err := s.pool.Query(ctx, `SELECT `+revisionColumns+` FROM registrum.revisions
WHERE entity_id = $1 AND record_id = $2::uuid AND revision > $3 AND erased_at IS NULL ORDER BY revision LIMIT $4`, e.ID, id, after, limit)
	return collectRevisions(rows, err, "revisions of "+e.ID)
}

// collectRevisions scans the revisions a query returned.
func collectRevisions(rows pgx.Rows, err error, what string) ([]*Revision, error) {
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", what, err)
	}
	defer rows.Close()
	var out []*Revision
	for rows.Next() {
		r, err := scanRevision(rows)
		if err != nil {
			return nil, fmt.Errorf("store: scan %s: %w", what, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read %s: %w", what, err)
	}
	return out, nil
}

// RevisionOf returns one revision of record id of e, or ErrNotFound.
func (s *Store) RevisionOf(ctx context.Context, e *model.Entity, id string, revision int64) (_ *Revision, err error) {
	ctx, span := startOp(ctx, spanRead, "RevisionOf")
	defer func() { endOp(span, err) }()
	r, err := scanRevision(s.pool.QueryRow(ctx, `SELECT `+revisionColumns+` FROM registrum.revisions
WHERE entity_id = $1 AND record_id = $2::uuid AND revision = $3 AND erased_at IS NULL`, e.ID, id, revision))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: read revision of %s: %w", e.ID, err)
	}
	return r, nil
}

// CommitMembers returns the records every revision of one commit belongs
// to, each once.
func (s *Store) CommitMembers(ctx context.Context, commitID string) (_ []CommitMember, err error) {
	ctx, span := startOp(ctx, spanRead, "CommitMembers")
	defer func() { endOp(span, err) }()
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT entity_id, record_id::text FROM registrum.revisions WHERE commit_id = $1::uuid ORDER BY 1, 2`, commitID)
	if err != nil {
		return nil, fmt.Errorf("store: read commit members: %w", err)
	}
	defer rows.Close()
	var out []CommitMember
	for rows.Next() {
		var m CommitMember
		if err := rows.Scan(&m.EntityID, &m.RecordID); err != nil {
			return nil, fmt.Errorf("store: read commit members: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// ValidAt narrows the scope of a collection read of a temporal entity to
// the records whose validity interval contains at: the start at or before
// it, the end null or after it. For date interval fields the comparison is
// on at's UTC calendar date.
func ValidAt(e *model.Entity, scope querysql.Fragment, at time.Time) (querysql.Fragment, error) {
	if e.Temporal == nil {
		return querysql.Fragment{}, fmt.Errorf("store: %s is not temporal", e.ID)
	}
	sf, ef := e.Field(e.Temporal.StartField), e.Field(e.Temporal.EndField)
	if sf == nil || ef == nil {
		return querysql.Fragment{}, fmt.Errorf("store: interval fields of %s missing", e.ID)
	}
	args := append([]any(nil), scope.Args...)
	var ph string
	if e.Temporal.Type == model.TypeDate {
		args = append(args, at.UTC().Format(time.DateOnly))
		ph = "$" + strconv.Itoa(len(args)) + "::date"
	} else {
		args = append(args, at.UTC())
		ph = "$" + strconv.Itoa(len(args)) + "::timestamptz"
	}
	start, end := layout.Table(e)+"."+layout.Column(sf), layout.Table(e)+"."+layout.Column(ef)
	cond := start + " <= " + ph + " AND (" + end + " IS NULL OR " + end + " > " + ph + ")"
	if scope.SQL != "" {
		cond = "(" + scope.SQL + ") AND " + cond
	}
	return querysql.Fragment{SQL: cond, Args: args}, nil
}
