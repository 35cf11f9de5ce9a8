// Package records is the record host's core service for ordinary records:
// it checks a request against the caller's grant and the package, writes
// through the store, and builds envelopes and validators. It knows nothing
// of HTTP; refusals are problem.Error values.
package records

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/google/uuid"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/model"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/host/values"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/strictjson"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
)

// Service serves the records of one package.
type Service struct {
	pkg    *model.Package
	store  *store.Store
	codec  *values.Codec
	keys   Keys
	access access.Decider
}

// New returns the records service of the store's active package.
func New(st *store.Store, keys Keys, decider access.Decider) (*Service, error) {
	codec, err := values.NewCodec(st.Package())
	if err != nil {
		return nil, err
	}
	return &Service{pkg: st.Package(), store: st, codec: codec, keys: keys, access: decider}, nil
}

// Package returns the package the service serves.
func (s *Service) Package() *model.Package { return s.pkg }

// Call carries what the edge knows of one request.
type Call struct {
	TraceID        string
	Bearer         string
	Profile        string
	Representation Representation
}

// Result is a record envelope and the headers that go with it.
type Result struct {
	Envelope Envelope
	// ETag is the quoted strong validator.
	ETag string
	// Location is set on create.
	Location string
}

// EntityForRoute returns the entity served at route, or the concealed not-found.
func (s *Service) EntityForRoute(route string) (*model.Entity, error) {
	e := s.pkg.EntityByRoute(route)
	if e == nil {
		return nil, problem.NotFound()
	}
	return e, nil
}

// Create validates a create body ({"data": {...}}) and writes revision 1.
func (s *Service) Create(ctx context.Context, c Call, e *model.Entity, body []byte) (*Result, error) {
	grant, err := s.access.Decide(ctx, access.Request{Operation: model.OpCreate, Entity: e, Bearer: c.Bearer, Profile: c.Profile})
	if err != nil {
		return nil, err
	}
	data, err := createData(body)
	if err != nil {
		return nil, err
	}
	stored, wire, err := s.decodeFields(e, grant, data)
	if err != nil {
		return nil, err
	}
	id := uuid.NewString()
	commit := uuid.NewString()
	journalData, err := canonjson.Marshal(wire)
	if err != nil {
		return nil, fmt.Errorf("records: journal data: %w", err)
	}
	rec, err := s.store.Create(ctx, e, id, stored, store.Journal{
		OperationID:        uuid.NewString(),
		CommitID:           commit,
		TraceID:            c.TraceID,
		PrincipalReference: grant.PrincipalReference,
		RecordReference:    s.keys.RecordReference(e.ID, id),
		Data:               journalData,
	})
	if err != nil {
		return nil, s.writeRefusal(e, err)
	}
	res := s.result(rec, grant, c.Representation)
	res.Envelope.Data.Snapshot = SnapshotToken(commit)
	res.Location = "/v1/records/" + e.Route + "/" + id
	return res, nil
}

// Get reads the current revision of one record.
func (s *Service) Get(ctx context.Context, c Call, e *model.Entity, id string) (*Result, error) {
	grant, err := s.access.Decide(ctx, access.Request{Operation: model.OpGet, Entity: e, Bearer: c.Bearer, Profile: c.Profile})
	if err != nil {
		return nil, err
	}
	if !values.IsUUID(id) {
		return nil, problem.NotFound()
	}
	rec, err := s.store.Get(ctx, e, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, problem.NotFound()
	}
	if err != nil {
		return nil, err
	}
	return s.result(rec, grant, c.Representation), nil
}

func (s *Service) result(rec *store.Record, grant *access.Grant, rep Representation) *Result {
	return &Result{
		Envelope: s.envelope(rec, grant.Readable, rep),
		ETag:     s.keys.ETag(s.pkg.Revision, rec.Entity.ID, rec.ID, strconv.FormatInt(rec.Revision, 10), string(rep)),
	}
}

// SnapshotToken names the commit a mutation wrote, for :snapshot reads.
func SnapshotToken(commitID string) string { return "engine1_" + commitID }

// createData parses a create body and returns its data member.
func createData(body []byte) (map[string]any, error) {
	doc, err := strictjson.Decode(body)
	if err != nil {
		return nil, bodyFault(err)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, problem.At(problem.RequestInvalid, "", "the body must be a JSON object with a data member")
	}
	for _, k := range sortedKeys(top) {
		if k != "data" {
			return nil, problem.At(problem.RequestInvalid, strictjson.Pointer(k), "unknown member %q: a create body has only the member data", k)
		}
	}
	raw, ok := top["data"]
	if !ok {
		return nil, problem.At(problem.RequestInvalid, "/data", "the member data is required")
	}
	data, ok := raw.(map[string]any)
	if !ok {
		return nil, problem.At(problem.RequestInvalid, "/data", "data must be an object of field values")
	}
	return data, nil
}

// bodyFault turns a strict-decoding error into a refusal naming the member.
func bodyFault(err error) error {
	var se *strictjson.SyntaxError
	if errors.As(err, &se) {
		return problem.At(problem.RequestInvalid, se.Pointer, "the body is not acceptable JSON: %s", se.Msg)
	}
	return problem.At(problem.RequestInvalid, "", "the body is not acceptable JSON")
}

// decodeFields checks every member of data against the entity and the grant
// and returns the storage values and the normalised wire values by field id.
func (s *Service) decodeFields(e *model.Entity, grant *access.Grant, data map[string]any) (stored, wire map[string]any, err error) {
	stored = map[string]any{}
	wire = map[string]any{}
	for _, name := range sortedKeys(data) {
		f := e.FieldByAPIName(name)
		if f == nil || !grant.Writable[f.ID] {
			return nil, nil, problem.At(problem.RequestInvalid, strictjson.Pointer("data", name), "unknown member %q: not a writable field of %s", name, e.ID)
		}
		v, err := s.codec.Decode(f, data[name])
		if err != nil {
			var fault *values.Fault
			if errors.As(err, &fault) {
				return nil, nil, problem.At(problem.RequestInvalid, strictjson.Pointer("data", name), "%s", fault.Msg)
			}
			return nil, nil, err
		}
		if v != nil {
			stored[f.ID] = v
			wire[f.ID] = values.Encode(f, v)
		}
	}
	for _, f := range e.Fields {
		if f.Required && stored[f.ID] == nil {
			return nil, nil, problem.At(problem.RequestInvalid, strictjson.Pointer("data", f.APIName), "%s is required", f.APIName)
		}
	}
	return stored, wire, nil
}

// writeRefusal explains a constraint violation in the author's terms.
func (s *Service) writeRefusal(e *model.Entity, err error) error {
	var ce *store.ConstraintError
	if !errors.As(err, &ce) {
		return err
	}
	var at *string
	if f := e.Field(ce.Owner.FieldID); f != nil {
		p := strictjson.Pointer("data", f.APIName)
		at = &p
	}
	var detail string
	switch ce.Owner.Kind {
	case model.ConstraintUnique:
		detail = fmt.Sprintf("another live %s record already has this value (unique constraint %s)", e.ID, ce.Owner.ConstraintID)
	case model.ConstraintReference:
		detail = "the referenced record does not exist"
	case model.ConstraintTemporalNonOverlap:
		detail = fmt.Sprintf("the validity interval overlaps another record's (constraint %s)", ce.Owner.ConstraintID)
	case model.ConstraintCheck:
		detail = fmt.Sprintf("the values violate the check %s", ce.Owner.ConstraintID)
	case layout.KindFieldBounds:
		detail = "the value is outside the bounds of the field"
	default:
		detail = "the write violates a constraint of the registry"
	}
	return &problem.Error{Code: problem.RequestInvalid, Detail: detail, FieldPath: at, Cause: err}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
