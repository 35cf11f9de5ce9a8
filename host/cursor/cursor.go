// Package cursor seals and opens the cursors of keyset pagination: the
// encrypted, caller-bound $skiptoken of a collection read. A cursor carries
// the canonical text of its query (model/query) and the position of the
// last record of a page, sealed with AES-256-GCM under a key derived from
// the host secret, and bound to the caller, the access profile, the entity
// and its route, and the package revision. Every refusal to open one is a
// *query.Error of kind query.CursorInvalid, which the host answers with the
// problem code query.cursor_invalid. The format is described in
// docs/query.md.
//
// A typical read:
//
//	q, err := sealer.Parse(entity, allowed, opts, caller, now) // parses, or opens a $skiptoken
//	rows := run(q)                                             // at most q.Limit() rows
//	if len(rows) > q.Top {                                     // a next page exists
//		next, err := sealer.Seal(q, caller, rows[q.Top-1], now)
//	}
package cursor

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/model/values"
)

// codec checks sort values with the wire rules of model/values; the zero
// codec serves the checks used here.
var codec values.Codec

// Cursor constants.
const (
	// MinSecretBytes is the shortest host secret NewSealer accepts.
	MinSecretBytes = 32
	// DefaultCursorMaxAge is the cursor lifetime, in seconds, of an entity
	// whose Cursor.MaxAgeSeconds is 0.
	DefaultCursorMaxAge = 3600
	// MaxCursorBytes bounds the length of a cursor as sent.
	MaxCursorBytes = 16384
	// CursorClockSkew is how far in the future a cursor's issue time may
	// lie (another host's clock) before it is refused.
	CursorClockSkew = 60 * time.Second

	cursorVersion = 1
	cursorAAD     = "registrum-cursor-v1"
	nonceSize     = 12
)

// Caller identifies the call a cursor is bound to: the caller, the selected
// access profile and the active package revision. The entity and its route
// come from the query.
type Caller struct {
	// Principal is a stable identity of the caller (for example its keyed
	// principal reference); "" for an anonymous profile. It is kept in the
	// cursor only as a keyed digest.
	Principal string
	// Profile is the selected access profile id.
	Profile string
	// PackageRevision is the active package revision ("sha256:<hex>").
	PackageRevision string
	// Read names the kind of collection read when it is not the plain
	// list (":current", ":as-of <instant>"); a cursor of one read kind is
	// refused by another.
	Read string
}

// Sealer seals and opens cursors with AES-256-GCM under a key derived from
// the host secret; a second derived key makes the keyed digest of the
// caller. It is safe for concurrent use.
type Sealer struct {
	aead    cipher.AEAD
	bindKey []byte
}

// NewSealer derives the cursor keys from the host secret (at least
// MinSecretBytes bytes) with HKDF-SHA-256 under labels of their own.
func NewSealer(secret []byte) (*Sealer, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("cursor: the cursor secret has %d bytes; at least %d are needed", len(secret), MinSecretBytes)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, "registrum cursor aead v1", 32)
	if err != nil {
		return nil, fmt.Errorf("cursor: derive the cursor key: %w", err)
	}
	bindKey, err := hkdf.Key(sha256.New, secret, nil, "registrum cursor binding v1", 32)
	if err != nil {
		return nil, fmt.Errorf("cursor: derive the cursor binding key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("cursor: cursor cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("cursor: cursor cipher: %w", err)
	}
	return &Sealer{aead: aead, bindKey: bindKey}, nil
}

// payload is the sealed content of a cursor.
type payload struct {
	Version   int             `json:"v"`
	IssuedAt  int64           `json:"iat"`
	ExpiresAt int64           `json:"exp"`
	Binding   binding         `json:"b"`
	Query     query.Canonical `json:"q"`
	After     position        `json:"k"`
}

// binding ties a cursor to the call that may present it.
type binding struct {
	Entity          string `json:"entity"`
	Route           string `json:"route"`
	Profile         string `json:"profile"`
	Principal       string `json:"principal"`
	PackageRevision string `json:"packageRevision"`
	Query           string `json:"query"`
	Read            string `json:"read,omitempty"`
}

// position is a keyset position: the record id and one value per sort key
// (integers and timestamps as strings, null for null).
type position struct {
	ID     string `json:"id"`
	Values []any  `json:"values"`
}

func maxAge(e *model.Entity) int64 {
	if e.Cursor.MaxAgeSeconds > 0 {
		return int64(e.Cursor.MaxAgeSeconds)
	}
	return DefaultCursorMaxAge
}

func (s *Sealer) principal(p string) string {
	m := hmac.New(sha256.New, s.bindKey)
	m.Write([]byte("principal\x00"))
	m.Write([]byte(p))
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

func (s *Sealer) bind(q *query.Query, c Caller) binding {
	return binding{Entity: q.Entity.ID, Route: q.Entity.Route, Profile: c.Profile,
		Principal: s.principal(c.Principal), PackageRevision: c.PackageRevision, Query: q.Digest(), Read: c.Read}
}

// Seal returns the cursor of the page after last, for the same query and
// caller, issued at now and valid for the entity's cursor.maxAgeSeconds.
func (s *Sealer) Seal(q *query.Query, c Caller, last query.Row, now time.Time) (string, error) {
	if q.Cursor != "" {
		return "", errors.New("cursor: seal: the query is an unopened cursor")
	}
	pos := position{ID: last.ID, Values: make([]any, len(q.Sort))}
	for i, k := range q.Sort {
		v, err := encodeKey(k.Field, last.Values[k.Field.ID])
		if err != nil {
			return "", fmt.Errorf("cursor: seal: sort key %s: %w", k.Field.ID, err)
		}
		pos.Values[i] = v
	}
	iat := now.Unix()
	p := payload{Version: cursorVersion, IssuedAt: iat, ExpiresAt: iat + maxAge(q.Entity),
		Binding: s.bind(q, c), Query: q.Canonical(), After: pos}
	plain, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("cursor: seal: %w", err)
	}
	out := make([]byte, 1+nonceSize, 1+nonceSize+len(plain)+s.aead.Overhead())
	out[0] = cursorVersion
	if _, err := rand.Read(out[1 : 1+nonceSize]); err != nil {
		return "", fmt.Errorf("cursor: seal: nonce: %w", err)
	}
	out = s.aead.Seal(out, out[1:1+nonceSize], plain, []byte(cursorAAD))
	tok := base64.RawURLEncoding.EncodeToString(out)
	if len(tok) > MaxCursorBytes {
		return "", fmt.Errorf("cursor: seal: the cursor would have %d bytes, more than %d (sort values too long)", len(tok), MaxCursorBytes)
	}
	return tok, nil
}

func encodeKey(f *model.Field, v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case int64:
		if f.Type == model.TypeInteger {
			return strconv.FormatInt(x, 10), nil
		}
	case int:
		if f.Type == model.TypeInteger {
			return strconv.Itoa(x), nil
		}
	case time.Time:
		if f.Type == model.TypeTimestamp {
			return x.UTC().Format(time.RFC3339Nano), nil
		}
	case bool:
		if f.Type == model.TypeBoolean {
			return x, nil
		}
	case string:
		switch f.Type {
		case model.TypeString, model.TypeText, model.TypeCode, model.TypeDecimal, model.TypeDate, model.TypeUUID, model.TypeReference:
			return x, nil
		}
	}
	return nil, fmt.Errorf("a %T value does not fit a %s field", v, f.Type)
}

func decodeKey(f *model.Field, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch f.Type {
	case model.TypeBoolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case model.TypeInteger:
		if s, ok := v.(string); ok {
			if n, ok := query.ParseInteger(s); ok {
				return n, nil
			}
		}
	case model.TypeTimestamp:
		if s, ok := v.(string); ok {
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				return t.UTC(), nil
			}
		}
	case model.TypeString, model.TypeText, model.TypeCode:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case model.TypeDecimal, model.TypeDate, model.TypeUUID, model.TypeReference:
		if s, ok := v.(string); ok {
			if _, err := codec.Decode(f, s); err == nil {
				return s, nil
			}
		}
	}
	return nil, fmt.Errorf("sort value does not fit field %s", f.ID)
}

func cursorInvalid(detail string, cause error) *query.Error {
	return &query.Error{Kind: query.CursorInvalid, Detail: detail, Cause: cause}
}

const errNotACursor = "The cursor is not a valid cursor of this service."

// Open opens a cursor presented by caller c on entity e with grant a, at
// now. It checks the authentication tag, the binding to the caller, the
// profile, the entity and its route, the package revision and the query,
// and the age against the entity's cursor.maxAgeSeconds; then it re-parses
// the carried query against a (a grant that no longer allows it refuses
// the cursor). Every failure is a *query.Error of kind query.CursorInvalid.
func (s *Sealer) Open(token string, e *model.Entity, a query.Allowed, c Caller, now time.Time) (*query.Query, error) {
	p, err := s.unseal(token)
	if err != nil {
		return nil, err
	}
	b := p.Binding
	if b.Entity != e.ID || b.Route != e.Route || b.Profile != c.Profile || b.PackageRevision != c.PackageRevision || b.Read != c.Read ||
		subtle.ConstantTimeCompare([]byte(b.Principal), []byte(s.principal(c.Principal))) != 1 {
		return nil, cursorInvalid("The cursor was issued to another caller, access profile, route or package revision.", nil)
	}
	t := now.Unix()
	if p.IssuedAt > now.Add(CursorClockSkew).Unix() {
		return nil, cursorInvalid("The cursor's issue time lies in the future.", nil)
	}
	if t >= p.ExpiresAt || t-p.IssuedAt >= maxAge(e) {
		return nil, cursorInvalid(fmt.Sprintf("The cursor has expired: cursors are valid for %d seconds.", maxAge(e)), nil)
	}
	q, err := query.Build(e, a, p.Query)
	if err != nil {
		return nil, cursorInvalid("The cursor's query is no longer allowed for this access profile.", err)
	}
	if q.Digest() != b.Query {
		return nil, cursorInvalid("The cursor's query does not match its binding.", nil)
	}
	if len(p.After.Values) != len(q.Sort) || !values.IsUUID(p.After.ID) {
		return nil, cursorInvalid(errNotACursor, errors.New("position does not fit the order"))
	}
	pos := &query.Row{ID: p.After.ID, Values: make(map[string]any, len(q.Sort))}
	for i, k := range q.Sort {
		v, err := decodeKey(k.Field, p.After.Values[i])
		if err != nil {
			return nil, cursorInvalid(errNotACursor, err)
		}
		pos.Values[k.Field.ID] = v
	}
	q.Position = pos
	return q, nil
}

// unseal authenticates and decodes a cursor; it checks nothing of its
// binding or age.
func (s *Sealer) unseal(token string) (*payload, error) {
	if len(token) > MaxCursorBytes {
		return nil, cursorInvalid(errNotACursor, fmt.Errorf("cursor of %d bytes", len(token)))
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil {
		return nil, cursorInvalid(errNotACursor, err)
	}
	if len(raw) < 1+nonceSize+s.aead.Overhead() || raw[0] != cursorVersion {
		return nil, cursorInvalid(errNotACursor, errors.New("bad length or version"))
	}
	plain, err := s.aead.Open(nil, raw[1:1+nonceSize], raw[1+nonceSize:], []byte(cursorAAD))
	if err != nil {
		return nil, cursorInvalid(errNotACursor, err)
	}
	var p payload
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || p.Version != cursorVersion {
		return nil, cursorInvalid(errNotACursor, fmt.Errorf("payload: %v", err))
	}
	return &p, nil
}

// ReadOf returns the read a cursor was sealed for (Caller.Read: "" for the
// plain list, ":current", ":as-of <instant>"), so that a read whose
// parameters travel in the cursor (the instant of :as-of) can be followed
// with the cursor alone. It only authenticates the cursor: Open still
// decides its binding to the caller and its age. A cursor that is not
// one of this sealer is a *query.Error of kind query.CursorInvalid.
func (s *Sealer) ReadOf(token string) (string, error) {
	p, err := s.unseal(token)
	if err != nil {
		return "", err
	}
	return p.Binding.Read, nil
}

// Parse parses the options of a read like query.Parse, and when they carry
// a $skiptoken opens it for caller c at now: the returned Query then
// continues the cursor's query after its position.
func (s *Sealer) Parse(e *model.Entity, a query.Allowed, opts query.RawOptions, c Caller, now time.Time) (*query.Query, error) {
	q, err := query.Parse(e, a, opts)
	if err != nil || q.Cursor == "" {
		return q, err
	}
	return s.Open(q.Cursor, e, a, c, now)
}
