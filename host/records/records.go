// Package records is the record host's core service for ordinary records:
// it checks a request against the caller's grant and the package, writes
// through the store, and builds envelopes, validators and idempotent
// outcomes. It knows nothing of HTTP; refusals are problem.Error values.
package records

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/cursor"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/strictjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
)

// MaxIdempotencyKeyBytes bounds the Idempotency-Key.
const MaxIdempotencyKeyBytes = 256

// MaxActionBodyBytes bounds the body of an action: a change request's
// submit, revise, cancel or apply, and an immediate action or its
// target-conditions read.
const MaxActionBodyBytes = 64 << 10

// Service serves the records of one package.
type Service struct {
	pkg    *model.Package
	store  *store.Store
	codec  *values.Codec
	keys   Keys
	access access.Decider
	sealer *cursor.Sealer
	plans  FrozenPlans
	// aeads holds the AEAD of each label of sealed tokens (labelAEAD),
	// derived once and shared by concurrent calls, as the page cursors'
	// sealer shares its own: the standard library's AES-GCM keeps no state
	// between calls (golang/go#41689 asks for that to be documented; a
	// FIPS fork of Go that broke it would break the sealer too).
	aeads sync.Map
}

// FrozenPlans reads what the kernel needs of a request's frozen plan: the
// entities it writes, which decide whether apply is offered to a profile
// with apply targets. The frozen form belongs to the planners; the
// change-request room (host/requests) implements this with them.
type FrozenPlans interface {
	TargetEntities(frozen []byte) ([]string, error)
}

// Options configure the records service. Every collaborator is given
// here, once: the service has no setter.
type Options struct {
	// Store is the store of the active package. Required.
	Store *store.Store
	// Keys are the keys derived from the host key (DeriveKeys). Required.
	Keys Keys
	// Access decides each call's grant. Required.
	Access access.Decider
	// Plans reads the frozen plans of change requests (requests.FrozenPlans).
	// Default none: apply is not offered to a profile whose grant limits
	// the entities it may apply to, since the plan's targets cannot be read.
	Plans FrozenPlans
}

// New returns the records service of o.Store's active package.
func New(o Options) (*Service, error) {
	switch {
	case o.Store == nil:
		return nil, errors.New("records: Options.Store is required")
	case o.Access == nil:
		return nil, errors.New("records: Options.Access is required")
	case o.Keys.cursor == nil:
		return nil, errors.New("records: Options.Keys is required (DeriveKeys)")
	}
	codec, err := values.NewCodec(o.Store.Package())
	if err != nil {
		return nil, err
	}
	sealer, err := cursor.NewSealer(o.Keys.cursor)
	if err != nil {
		return nil, err
	}
	return &Service{pkg: o.Store.Package(), store: o.Store, codec: codec, keys: o.Keys, access: o.Access, sealer: sealer, plans: o.Plans}, nil
}

// Package returns the package the service serves.
func (s *Service) Package() *model.Package { return s.pkg }

// Sealer returns the sealer of the service's cursors, for the capability
// rooms that page with the kernel's cursors.
func (s *Service) Sealer() *cursor.Sealer { return s.sealer }

// Call carries what the edge knows of one request.
type Call struct {
	TraceID string
	Bearer  string
	// UnusableCredential is true when an Authorization header carried no
	// bearer token; it is refused like a rejected token.
	UnusableCredential bool
	Profile            string
	Representation     Representation
	// IdempotencyKey is the client's key, "" when none was sent.
	IdempotencyKey string
	// Executor names the logical executor applying a request automatically;
	// only the automatic-apply job sets it, never a client.
	Executor string
}

// Result is an answered record: status, validators and the exact body.
type Result struct {
	Status int
	// ETag is the quoted strong validator.
	ETag string
	// Location is set on create.
	Location string
	// Body is the rendered envelope.
	Body []byte
	// Replayed is true when an idempotency key returned a stored result.
	Replayed bool
}

// Decide decides operation op on entity e for the caller of c: the grant,
// or the concealed not-found (or the refusal of a rejected token), with
// the reason behind it for the log (problem.Reason).
func (s *Service) Decide(ctx context.Context, c Call, op string, e *model.Entity) (*access.Grant, error) {
	g, err := s.access.Decide(ctx, access.Request{Operation: op, Entity: e, Bearer: c.Bearer, UnusableCredential: c.UnusableCredential, Profile: c.Profile})
	if err != nil {
		return nil, decisionReason(err, c)
	}
	return g, nil
}

// decisionReason returns a refusal of the access decider with the reason
// behind it (problem.Reason), for the log only: the answer is unchanged. A
// 401 is told apart by what the caller sent; a concealed not-found by the
// decider's cause, which states the unmet condition of its decision
// (host/access: selection of the profile, its token, its conditions).
func decisionReason(err error, c Call) error {
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Reason != "" {
		return err
	}
	cause := ""
	if pe.Cause != nil {
		cause = pe.Cause.Error()
	}
	out := *pe
	switch {
	case pe.Code == problem.AuthenticationRefused && c.Bearer == "" && c.UnusableCredential:
		out.Reason = problem.ReasonUnusableCredential
	case pe.Code == problem.AuthenticationRefused:
		out.Reason = problem.ReasonTokenRefused
	case pe.Code != problem.ResourceNotFound:
		return err
	case pe.Cause == nil:
		// The decider refuses without a cause only an entity it does not know.
		out.Reason = problem.ReasonUnknownPath
	case strings.Contains(cause, "needs a token"):
		out.Reason = problem.ReasonMissingToken
	case strings.Contains(cause, "no profile"), strings.Contains(cause, "no default"):
		out.Reason = problem.ReasonUnknownProfile
	default:
		out.Reason = problem.ReasonProfileNotSatisfied
	}
	return &out
}

// Hidden returns the concealed not-found, with its reason, when rec is not
// a live record or lies outside grant's row boundaries; nil when the
// caller may see it.
func Hidden(rec *store.Record, grant *access.Grant) error {
	switch {
	case rec.Lifecycle != layout.LifecycleActive:
		return problem.Concealed(problem.ReasonNoRecord)
	case !grant.Admits(rec.Values):
		return problem.Concealed(problem.ReasonOutsideBoundary)
	}
	return nil
}

// Idempotency binds a write to the caller's key; nil without a key.
//
// The key is the principal's: it is stored under a keyed reference of the
// grant's principal and the client's key. The request it stands for is
// the digest of parts (the operation, its target and its body, as the
// caller names them) with everything else that shapes the answer: the
// access profile that granted the call (which decides what the answer may
// show) and the representation asked for (Accept). The same key with
// another request, under another profile or in another representation
// included, is 409 idempotency.conflict.
func (s *Service) Idempotency(c Call, grant *access.Grant, parts ...string) (*store.Idempotency, error) {
	if c.IdempotencyKey == "" {
		return nil, nil
	}
	if len(c.IdempotencyKey) > MaxIdempotencyKeyBytes {
		return nil, problem.New(problem.RequestInvalid, "the Idempotency-Key is longer than %d bytes", MaxIdempotencyKeyBytes)
	}
	h := sha256.New()
	for _, p := range append(parts, string(c.Representation), "profile="+grant.Profile) {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return &store.Idempotency{
		KeyReference:  s.keys.reference.text("", "", "engine-idempotency-v1", grant.PrincipalReference, c.IdempotencyKey),
		RequestDigest: "sha256:" + hex.EncodeToString(h.Sum(nil)),
	}, nil
}

// Write runs fn as one write under an optional idempotency binding (a
// replay answers the stored outcome) and turns its refusals into problems:
// the store's through StoreRefusal, a constraint violation in the author's
// terms (e names the entity written).
func (s *Service) Write(ctx context.Context, e *model.Entity, idem *store.Idempotency, fn func(w *store.Writer) (*store.Outcome, error)) (*Result, error) {
	out, replayed, err := s.store.Write(ctx, idem, fn)
	if err != nil {
		return nil, s.Refusal(e, err)
	}
	return &Result{Status: out.Status, ETag: out.ETag, Location: out.Location, Body: out.Body, Replayed: replayed}, nil
}

// Create validates a create body ({"data": {...}}) and writes revision 1.
// The body is judged once the grant is decided.
func (s *Service) Create(ctx context.Context, c Call, e *model.Entity, in Body) (*Result, error) {
	grant, err := s.Decide(ctx, c, model.OpCreate, e)
	if err != nil {
		return nil, err
	}
	body, err := in.Bytes()
	if err != nil {
		return nil, err
	}
	idem, err := s.Idempotency(c, grant, "create", e.ID, string(body))
	if err != nil {
		return nil, err
	}
	data, err := createData(body)
	if err != nil {
		return nil, err
	}
	stored, err := s.decodeFields(e, grant, data)
	if err != nil {
		return nil, err
	}
	if !grant.Admits(stored) {
		return nil, problem.Concealed(problem.ReasonOutsideBoundary)
	}
	return s.Write(ctx, e, idem, func(w *store.Writer) (*store.Outcome, error) {
		id := uuid.NewString()
		j, err := s.Journal(c, grant, e, id, stored)
		if err != nil {
			return nil, err
		}
		rec, err := w.Create(ctx, e, id, stored, j)
		if err != nil {
			return nil, err
		}
		var req *store.Request
		if e.IsRequestEntity() {
			if grant.PrincipalReference == "" {
				return nil, problem.Concealed(problem.ReasonProfileNotSatisfied) // a draft needs an owner
			}
			if err := w.CreateRequest(ctx, e, id, grant.PrincipalReference); err != nil {
				return nil, err
			}
			if req, err = w.LockRequest(ctx, e, id); err != nil {
				return nil, err
			}
		}
		out := &store.Outcome{Status: http.StatusCreated, Location: "/v1/records/" + e.Route + "/" + id}
		return out, s.WriteSnapshotAtCommit(ctx, w, func(tok string) error {
			return s.RenderInto(out, rec, req, grant, c.Representation, tok)
		})
	})
}

// Get reads the current revision of one live record.
func (s *Service) Get(ctx context.Context, c Call, e *model.Entity, id string) (*Result, error) {
	return s.get(ctx, c, e, id, nil)
}

// get reads the current revision of one live record with the query
// options of a single-record read (nil for none): $select narrows the
// grant's readable fields, requestHistoryAfterProposalVersion picks the
// page of a request's history.
func (s *Service) get(ctx context.Context, c Call, e *model.Entity, id string, opts query.RawOptions) (*Result, error) {
	grant, err := s.Decide(ctx, c, model.OpGet, e)
	if err != nil {
		return nil, err
	}
	if opts != nil {
		if grant, err = selected(e, grant, opts); err != nil {
			return nil, err
		}
	}
	if !values.IsUUID(id) {
		return nil, problem.Concealed(problem.ReasonUnknownPath)
	}
	rec, err := s.store.Get(ctx, e, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, problem.Concealed(problem.ReasonNoRecord)
	}
	if err != nil {
		return nil, err
	}
	if err := Hidden(rec, grant); err != nil {
		return nil, err
	}
	var req *store.Request
	if e.IsRequestEntity() {
		if req, err = s.store.Request(ctx, e, id); err != nil {
			return nil, err
		}
		if !RequestVisible(grant, req) {
			return nil, problem.Concealed(problem.ReasonRequestHidden)
		}
		var after *string
		if v, ok := opts[query.OptRequestHistoryAfter]; ok && len(v) == 1 {
			after = &v[0]
		}
		if err := s.LoadHistory(ctx, s.store, e, req, after); err != nil {
			return nil, err
		}
	}
	presence, err := s.presence(ctx, grant, rec)
	if err != nil {
		return nil, err
	}
	out, err := s.render(rec, req, presence, grant, c.Representation, "")
	if err != nil {
		return nil, err
	}
	return &Result{Status: http.StatusOK, ETag: out.ETag, Body: out.Body}, nil
}

// Patch applies a JSON Patch to a live record whose current validator is
// ifMatch. The body is judged once the record is locked and found inside
// the caller's boundary (and, for a request, its owner's draft): a record
// the caller may not see is the concealed not-found whatever the body.
func (s *Service) Patch(ctx context.Context, c Call, e *model.Entity, id, ifMatch string, in Body) (*Result, error) {
	if e.MutationMode == model.CreateOnly {
		return nil, problem.Concealed(problem.ReasonUnknownPath)
	}
	grant, idem, err := s.admitChange(ctx, c, model.OpPatch, e, id, ifMatch, string(in.Received()))
	if err != nil {
		return nil, err
	}
	return s.Write(ctx, e, idem, func(w *store.Writer) (*store.Outcome, error) {
		cur, err := s.LockCurrent(ctx, w, e, grant, id, ifMatch)
		if err != nil {
			return nil, err
		}
		var req *store.Request
		if e.IsRequestEntity() {
			if req, err = s.LockDraft(ctx, w, e, grant, id); err != nil {
				return nil, err
			}
		}
		body, err := in.Bytes()
		if err != nil {
			return nil, err
		}
		ops, err := parsePatch(e, grant, body)
		if err != nil {
			return nil, err
		}
		if req != nil {
			if err := s.LoadHistory(ctx, w, e, req, nil); err != nil {
				return nil, err
			}
		}
		next, err := s.applyPatch(e, cur, ops)
		if err != nil {
			return nil, err
		}
		if !grant.Admits(next) {
			return nil, problem.Concealed(problem.ReasonOutsideBoundary)
		}
		j, err := s.Journal(c, grant, e, id, next)
		if err != nil {
			return nil, err
		}
		rec, err := w.Update(ctx, e, id, cur.Revision, next, j)
		if err != nil {
			return nil, err
		}
		out := &store.Outcome{Status: http.StatusOK}
		return out, s.WriteSnapshotAtCommit(ctx, w, func(tok string) error {
			return s.RenderInto(out, rec, req, grant, c.Representation, tok)
		})
	})
}

// Tombstone ends a live record whose current validator is ifMatch; its
// history stays readable.
func (s *Service) Tombstone(ctx context.Context, c Call, e *model.Entity, id, ifMatch string) (*Result, error) {
	if !e.Tombstone {
		return nil, problem.Concealed(problem.ReasonUnknownPath)
	}
	grant, idem, err := s.admitChange(ctx, c, model.OpTombstone, e, id, ifMatch, "")
	if err != nil {
		return nil, err
	}
	return s.Write(ctx, e, idem, func(w *store.Writer) (*store.Outcome, error) {
		cur, err := s.LockCurrent(ctx, w, e, grant, id, ifMatch)
		if err != nil {
			return nil, err
		}
		j, err := s.Journal(c, grant, e, id, cur.Values)
		if err != nil {
			return nil, err
		}
		rec, err := w.Tombstone(ctx, e, id, cur.Revision, j)
		if err != nil {
			return nil, err
		}
		out := &store.Outcome{Status: http.StatusOK}
		return out, s.WriteSnapshotAtCommit(ctx, w, func(tok string) error {
			return s.RenderInto(out, rec, nil, grant, c.Representation, tok)
		})
	})
}

// admitChange checks what a change of one existing record needs before its
// body is read: the grant, a well-formed record id (else not-found), an
// If-Match (else 428), and the idempotency binding of the request.
func (s *Service) admitChange(ctx context.Context, c Call, op string, e *model.Entity, id, ifMatch, body string) (*access.Grant, *store.Idempotency, error) {
	grant, err := s.Decide(ctx, c, op, e)
	if err != nil {
		return nil, nil, err
	}
	if !values.IsUUID(id) {
		return nil, nil, problem.Concealed(problem.ReasonUnknownPath)
	}
	if ifMatch == "" {
		return nil, nil, problem.New(problem.PreconditionRequired, "a %s needs the record's ETag in If-Match", op)
	}
	if err := CheckIfMatch(ifMatch); err != nil {
		return nil, nil, err
	}
	idem, err := s.Idempotency(c, grant, op, e.ID, id, ifMatch, body)
	if err != nil {
		return nil, nil, err
	}
	return grant, idem, nil
}

// LockCurrent locks a live record the grant admits and checks that ifMatch
// names its current revision.
func (s *Service) LockCurrent(ctx context.Context, w *store.Writer, e *model.Entity, grant *access.Grant, id, ifMatch string) (*store.Record, error) {
	cur, err := w.Lock(ctx, e, id)
	if err != nil {
		return nil, err
	}
	if err := s.CheckLocked(cur, grant, ifMatch); err != nil {
		return nil, err
	}
	return cur, nil
}

// CheckLocked checks a locked record as lockCurrent does.
func (s *Service) CheckLocked(cur *store.Record, grant *access.Grant, ifMatch string) error {
	if err := Hidden(cur, grant); err != nil {
		return err
	}
	if !s.Matches(ifMatch, cur) {
		return StaleValidator()
	}
	return nil
}

// Matches reports whether an If-Match value names the record's current
// revision, in either representation. Several validators may be listed;
// the wildcard is not accepted, since a write must name what it read.
func (s *Service) Matches(ifMatch string, rec *store.Record) bool {
	rev := strconv.FormatInt(rec.Revision, 10)
	current := []string{
		s.keys.ETag(s.pkg.Revision, rec.Entity.ID, rec.ID, rev, string(JSON)),
		s.keys.ETag(s.pkg.Revision, rec.Entity.ID, rec.ID, rev, string(JSONLD)),
	}
	ok := false
	for _, candidate := range splitETags(ifMatch) {
		for _, want := range current {
			if MatchETag(candidate, want) {
				ok = true
			}
		}
	}
	return ok
}

// Journal builds the journal entry of a write of values to record id.
func (s *Service) Journal(c Call, grant *access.Grant, e *model.Entity, id string, stored map[string]any) (store.Journal, error) {
	wire := map[string]any{}
	for _, f := range e.Fields {
		if v := stored[f.ID]; v != nil {
			wire[f.ID] = values.Encode(f, v)
		}
	}
	// The reflection-free writer first (the same bytes, canonjson's tests
	// hold them equal); Marshal for the value kinds it does not know.
	data, err := canonjson.AppendValue(make([]byte, 0, 256), wire)
	if err != nil {
		if data, err = canonjson.Marshal(wire); err != nil {
			return store.Journal{}, fmt.Errorf("records: journal data: %w", err)
		}
	}
	return store.Journal{
		OperationID:        uuid.NewString(),
		TraceID:            c.TraceID,
		PrincipalReference: grant.PrincipalReference,
		RecordReference:    s.keys.RecordReference(e.ID, id),
		Data:               data,
	}, nil
}

// RenderInto renders the envelope of rec (with data.request when req is
// the workflow state of a request record) into out's body and validator.
func (s *Service) RenderInto(out *store.Outcome, rec *store.Record, req *store.Request, grant *access.Grant, rep Representation, snapshot string) error {
	o, err := s.render(rec, req, nil, grant, rep, snapshot)
	if err != nil {
		return err
	}
	out.ETag, out.Body = o.ETag, o.Body
	return nil
}

// render renders the envelope of rec with data.request (req, for a request
// record) and data.requestPresence (presence, on reads that carry it).
func (s *Service) render(rec *store.Record, req *store.Request, presence json.RawMessage, grant *access.Grant, rep Representation, snapshot string) (*store.Outcome, error) {
	env := s.envelope(rec, grant.Readable, rep)
	env.Data.RequestPresence = presence
	if req != nil {
		slotsInto(env.Data.DomainData, rec.Entity, req, grant.Readable)
		view, err := json.Marshal(s.requestView(rec, req, grant, rep))
		if err != nil {
			return nil, fmt.Errorf("records: render request: %w", err)
		}
		env.Data.Request = view
	}
	env.Data.Snapshot = snapshot
	if rec.Lifecycle == layout.LifecycleTombstoned {
		env.Data.Tombstoned = true
	}
	body, err := env.AppendJSON(make([]byte, 0, 512))
	if err != nil {
		return nil, fmt.Errorf("records: render envelope: %w", err)
	}
	return &store.Outcome{
		ETag: s.keys.ETag(s.pkg.Revision, rec.Entity.ID, rec.ID, strconv.FormatInt(rec.Revision, 10), string(rep)),
		Body: body,
	}, nil
}

// WriteSnapshotAtCommit hands render the snapshot token of the state
// just after w's transaction commits, read without a round trip of its
// own (store.Writer.TokenAtCommit): for a write whose answer is not stored,
// render runs after the commit and writes nothing; for a stored answer (a
// keyed write's outcome, a chunk's receipt) it runs before, with a
// stand-in the store replaces by the token, so the token must appear once
// in what it renders. A state the store cannot name by a token of at most
// 4096 bytes refuses the write (503 source.unavailable, nothing written;
// store.MaxWriteInProgress), as does a database moved to another package
// (503 service.unavailable): both come from the store's Write, through
// StoreRefusal.
func (s *Service) WriteSnapshotAtCommit(ctx context.Context, w *store.Writer, render func(tok string) error) error {
	if err := w.TokenAtCommit(ctx, render); err != nil {
		return StoreRefusal(err)
	}
	return nil
}

// decodeFields checks every member of data against the entity and the grant
// and returns the storage values by field id. Required fields must be present.
func (s *Service) decodeFields(e *model.Entity, grant *access.Grant, data map[string]any) (map[string]any, error) {
	stored := map[string]any{}
	for _, name := range sortedKeys(data) {
		f := e.FieldByAPIName(name)
		if f == nil || !grant.Writable.Has(f.ID) {
			return nil, problem.At(problem.RequestInvalid, strictjson.Pointer("data", name), "unknown member %q: not a writable field of %s", name, e.ID)
		}
		v, err := s.decodeValue(f, data[name])
		if err != nil {
			return nil, err
		}
		if v != nil {
			stored[f.ID] = v
		}
	}
	for _, f := range e.Fields {
		if f.Required && stored[f.ID] == nil {
			return nil, problem.At(problem.RequestInvalid, strictjson.Pointer("data", f.APIName), "%s is required", f.APIName)
		}
	}
	if err := checkInterval(e, stored); err != nil {
		return nil, err
	}
	return stored, nil
}

func (s *Service) decodeValue(f *model.Field, v any) (any, error) {
	out, err := s.codec.Decode(f, v)
	if err != nil {
		var fault *values.Fault
		if errors.As(err, &fault) {
			return nil, problem.At(problem.RequestInvalid, strictjson.Pointer("data", f.APIName), "%s", fault.Msg)
		}
		return nil, err
	}
	return out, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Store returns the store the service writes through, for the capability
// rooms built over the kernel.
func (s *Service) Store() *store.Store { return s.store }

// Keys returns the service's derived keys.
func (s *Service) Keys() Keys { return s.keys }

// Codec returns the value codec of the service's package.
func (s *Service) Codec() *values.Codec { return s.codec }
