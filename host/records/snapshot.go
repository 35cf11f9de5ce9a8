package records

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/registrum/registrum/host/cursor"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/internal/strictjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store"
)

// :snapshot reads (docs/history.md, docs/decisions/snapshot-reads.md).

// MaxSnapshotTokenBytes bounds a snapshot token.
const MaxSnapshotTokenBytes = 4096

// MaxSchemaDescriptors bounds the originating schema descriptors (package
// revisions the shown revisions were written under) of one snapshot read.
const MaxSchemaDescriptors = 64

// SnapshotBudget is the database budget of one snapshot read.
const SnapshotBudget = 2 * time.Second

// snapshotPrefix starts every snapshot token: engine2_ and the base64url
// (no padding) encoding of the history tag and the snapshot.
const snapshotPrefix = "engine2_"

// SnapshotToken encodes snap of the history tagged tag as a snapshot token:
// the 8-byte tag, then unsigned varints of xmin, xmax - xmin, the number of
// in-progress transactions and each one's distance from its predecessor
// (from xmin for the first, less one after it). It fails when the token
// would be longer than MaxSnapshotTokenBytes.
func SnapshotToken(tag [8]byte, snap store.Snapshot) (string, error) {
	raw := make([]byte, 0, 8+3*binary.MaxVarintLen64+2*len(snap.Xip))
	raw = append(raw, tag[:]...)
	raw = binary.AppendUvarint(raw, snap.Xmin)
	raw = binary.AppendUvarint(raw, snap.Xmax-snap.Xmin)
	raw = binary.AppendUvarint(raw, uint64(len(snap.Xip)))
	prev := snap.Xmin
	for i, x := range snap.Xip {
		d := x - prev
		if i > 0 {
			d--
		}
		raw = binary.AppendUvarint(raw, d)
		prev = x
	}
	tok := snapshotPrefix + base64.RawURLEncoding.EncodeToString(raw)
	if len(tok) > MaxSnapshotTokenBytes {
		return "", errSnapshotTooLong
	}
	return tok, nil
}

// errSnapshotTooLong means a state has too many transactions in progress
// to be named by a token of at most MaxSnapshotTokenBytes.
var errSnapshotTooLong = errors.New("records: the snapshot token would exceed 4096 bytes")

// ParseSnapshotToken reads a snapshot token strictly: the prefix, base64url
// without padding, the encoding SnapshotToken writes (minimal varints,
// ascending in-progress ids within [xmin, xmax)) and nothing after it. It
// returns the tag and the snapshot.
func ParseSnapshotToken(tok string) ([8]byte, store.Snapshot, error) {
	var tag [8]byte
	bad := func() ([8]byte, store.Snapshot, error) {
		return tag, store.Snapshot{}, problem.New(problem.QueryInvalid, "snapshot must be a snapshot token of this service")
	}
	enc, ok := strings.CutPrefix(tok, snapshotPrefix)
	if len(tok) > MaxSnapshotTokenBytes || !ok {
		return bad()
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil || len(raw) < 8 {
		return bad()
	}
	copy(tag[:], raw)
	rest := raw[8:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return 0, false
		}
		rest = rest[n:]
		return v, true
	}
	var snap store.Snapshot
	xmin, ok1 := next()
	span, ok2 := next()
	count, ok3 := next()
	if !ok1 || !ok2 || !ok3 || span > math.MaxUint64-xmin || count > uint64(len(rest)) {
		return bad()
	}
	snap.Xmin, snap.Xmax = xmin, xmin+span
	prev := xmin
	for i := uint64(0); i < count; i++ {
		d, ok := next()
		if !ok {
			return bad()
		}
		if i > 0 {
			if d == math.MaxUint64 {
				return bad()
			}
			d++
		}
		if d > snap.Xmax-prev {
			return bad()
		}
		prev += d
		snap.Xip = append(snap.Xip, prev)
	}
	if len(rest) != 0 || !snap.Valid() {
		return bad()
	}
	if again, err := SnapshotToken(tag, snap); err != nil || again != tok {
		return bad()
	}
	return tag, snap, nil
}

func sourceUnavailable(err error) error {
	return &problem.Error{Code: problem.SourceUnavailable, Detail: "The history of this snapshot is unavailable.", Cause: err}
}

// Snapshot reads one page of the collection of e as recorded at a commit:
// the latest committed state when no snapshot token is given (its token is
// returned with the page), else the state of the token, through every page.
func (s *Service) Snapshot(ctx context.Context, c Call, e *model.Entity, opts query.RawOptions) (*Result, error) {
	grant, err := s.decide(ctx, c, model.OpSnapshot, e)
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
	principal := hex.EncodeToString(keyed(s.keys.reference, "engine-snapshot-cursor-principal-v1", grant.PrincipalReference))
	var sel []string
	after := ""
	if cur != "" {
		if len(opts) > 0 || hasToken || hasValidAt {
			return nil, problem.New(problem.QueryInvalid, "a cursor is sent alone, with accessProfile only")
		}
		var p snapshotPosition
		if err := s.openSealed(snapshotCursorLabel, snapshotCursorAAD, cur, &p); err != nil || p.Version != 1 {
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
		return nil, queryProblem(err)
	}
	ctx, cancel := context.WithTimeout(ctx, SnapshotBudget)
	defer cancel()
	var snap store.Snapshot
	if hasToken {
		var tag [8]byte
		if tag, snap, err = ParseSnapshotToken(token); err != nil {
			return nil, err
		}
		if tag != s.store.HistoryTag() {
			return nil, sourceUnavailable(errors.New("records: a snapshot token of another history"))
		}
		if err := s.store.CheckSnapshot(ctx, snap); err != nil {
			return nil, sourceUnavailable(err)
		}
	} else {
		if snap, err = s.store.CurrentSnapshot(ctx); err != nil {
			return nil, sourceUnavailable(err)
		}
		if err := s.store.CheckSnapshot(ctx, snap); err != nil {
			return nil, sourceUnavailable(err)
		}
		if token, err = SnapshotToken(s.store.HistoryTag(), snap); err != nil {
			return nil, sourceUnavailable(err)
		}
	}
	page := Collection{Items: []CollectionItem{}, Meta: MetaOf(s.pkg, e), Snapshot: token}
	var last string
	more := false
	origins := map[string]bool{}
	for len(page.Items) <= top {
		revs, err := s.store.SnapshotRevisions(ctx, e, snap, after, 2*top)
		if err != nil {
			return nil, sourceUnavailable(err)
		}
		for _, rev := range revs {
			after = rev.RecordID
			if origins[rev.PackageRevision] = true; len(origins) > MaxSchemaDescriptors {
				return nil, sourceUnavailable(fmt.Errorf("records: a snapshot read over more than %d package revisions", MaxSchemaDescriptors))
			}
			ok, err := s.snapshotAdmits(e, grant.Admits, at, rev)
			if err != nil {
				return nil, sourceUnavailable(err)
			}
			if !ok {
				continue
			}
			if len(page.Items) == top {
				more = true
				break
			}
			dd, err := revisionData(fields, rev)
			if err != nil {
				return nil, sourceUnavailable(err)
			}
			page.Items = append(page.Items, CollectionItem{RecordIdentifier: rev.RecordID, RevisionIdentifier: strconv.FormatInt(rev.Revision, 10), DomainData: dd})
			last = rev.RecordID
		}
		if more || len(revs) < 2*top {
			break
		}
	}
	if more {
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.APIName
		}
		p := snapshotPosition{cursorBinding: cursorBinding{Version: 1, IssuedAt: now.Unix(), ExpiresAt: now.Unix() + cursorAge(e), Entity: e.ID, Route: e.Route,
			Profile: grant.Profile, Principal: principal, PackageRevision: s.pkg.Revision}, Snapshot: token,
			ValidAt: validAt, Top: top, Select: names, After: last}
		next, err := s.seal(snapshotCursorLabel, snapshotCursorAAD, p)
		if err != nil {
			return nil, err
		}
		page.PageInfo.NextCursor = &next
	}
	if c.Representation == JSONLD {
		page.Context = s.pkg.Registry.URLs.Context
	}
	body, err := page.AppendJSON(make([]byte, 0, 256+256*len(page.Items)))
	if err != nil {
		return nil, fmt.Errorf("records: render snapshot: %w", err)
	}
	return &Result{Status: http.StatusOK, Body: body}, nil
}

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

// snapshotAdmits decides whether a snapshot revision is shown: inside the
// caller's current row boundaries (on the revision's values) and, with
// validAt, in its validity interval.
func (s *Service) snapshotAdmits(e *model.Entity, admits func(map[string]any) bool, at validInstant, rev *store.Revision) (bool, error) {
	doc, err := strictjson.Decode(rev.Data)
	if err != nil {
		return false, fmt.Errorf("records: snapshot revision data: %w", err)
	}
	wire, _ := doc.(map[string]any)
	stored := make(map[string]any, len(wire))
	for _, f := range e.Fields {
		v, ok := wire[f.ID]
		if !ok || v == nil {
			continue
		}
		sv, err := s.codec.Decode(f, v)
		if err != nil {
			return false, fmt.Errorf("records: snapshot field %s no longer matches: %w", f.ID, err)
		}
		stored[f.ID] = sv
	}
	if !admits(stored) {
		return false, nil
	}
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
		return false, errors.New("records: snapshot interval start")
	}
	if st.After(at.ts) {
		return false, nil
	}
	if end == "" {
		return true, nil
	}
	et, err := time.Parse(time.RFC3339Nano, end)
	if err != nil {
		return false, errors.New("records: snapshot interval end")
	}
	return et.After(at.ts), nil
}

// seal seals v as JSON with AES-256-GCM under a key derived from the cursor
// key with label, authenticating aad: the construction of revision and
// snapshot cursors.
func (s *Service) seal(label, aad string, v any) (string, error) {
	aead, err := s.labelAEAD(label)
	if err != nil {
		return "", fmt.Errorf("records: seal: %w", err)
	}
	plain, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("records: seal: %w", err)
	}
	out := make([]byte, 1+aead.NonceSize(), 1+aead.NonceSize()+len(plain)+aead.Overhead())
	out[0] = 1
	if _, err := rand.Read(out[1:]); err != nil {
		return "", fmt.Errorf("records: seal: %w", err)
	}
	out = aead.Seal(out, out[1:1+aead.NonceSize()], plain, []byte(aad))
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// openSealed opens what seal sealed under label into v.
func (s *Service) openSealed(label, aad, token string, v any) error {
	if len(token) > cursor.MaxCursorBytes {
		return errors.New("records: sealed token too long")
	}
	aead, err := s.labelAEAD(label)
	if err != nil {
		return err
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(raw) < 1+aead.NonceSize()+aead.Overhead() || raw[0] != 1 {
		return errors.New("records: not a sealed token")
	}
	plain, err := aead.Open(nil, raw[1:1+aead.NonceSize()], raw[1+aead.NonceSize():], []byte(aad))
	if err != nil {
		return err
	}
	return json.Unmarshal(plain, v)
}

func (s *Service) labelAEAD(label string) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, s.keys.cursor, nil, label, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
