package records

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/registrum/registrum/host/cursor"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/internal/strictjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/store"
)

// :snapshot reads (docs/history.md, docs/decisions/snapshot-reads.md).

// MaxSnapshotTokenBytes bounds a snapshot token.
const MaxSnapshotTokenBytes = 4096

// SnapshotBudget is the database budget of one snapshot read.
const SnapshotBudget = 2 * time.Second

// snapshotPrefix starts every snapshot token: engine1_<commit uuid>.
const snapshotPrefix = "engine1_"

// parseSnapshotToken reads a snapshot token strictly: the prefix and a
// lowercase canonical UUID, nothing else.
func parseSnapshotToken(tok string) (string, error) {
	id, ok := strings.CutPrefix(tok, snapshotPrefix)
	if len(tok) > MaxSnapshotTokenBytes || !ok || !values.IsUUID(id) || strings.ToLower(id) != id {
		return "", problem.New(problem.QueryInvalid, "snapshot must be a snapshot token of this service")
	}
	return id, nil
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
	var commit string
	var pos int64
	if hasToken {
		if commit, err = parseSnapshotToken(token); err != nil {
			return nil, err
		}
		if pos, err = s.store.CommitPosition(ctx, commit); err != nil {
			return nil, sourceUnavailable(err)
		}
	} else if commit, pos, err = s.store.SnapshotHead(ctx); err != nil {
		return nil, sourceUnavailable(err)
	}
	page := Collection{Items: []CollectionItem{}, Meta: MetaOf(s.pkg, e), Snapshot: SnapshotToken(commit)}
	var last string
	more := false
	for len(page.Items) <= top {
		revs, err := s.store.SnapshotRevisions(ctx, e, pos, after, 2*top)
		if err != nil {
			return nil, sourceUnavailable(err)
		}
		for _, rev := range revs {
			after = rev.RecordID
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
			Profile: grant.Profile, Principal: principal, PackageRevision: s.pkg.Revision}, Snapshot: SnapshotToken(commit),
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
