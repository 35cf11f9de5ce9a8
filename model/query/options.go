package query

import (
	"slices"
	"strconv"
	"strings"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
)

// Names of the query options of a collection read.
const (
	OptAccessProfile = "accessProfile"
	OptSelect        = "$select"
	OptFilter        = "$filter"
	OptOrderBy       = "$orderby"
	OptCount         = "$count"
	OptTop           = "$top"
	OptSkipToken     = "$skiptoken"
)

// Page size and other option bounds.
const (
	// DefaultTop is the page size when $top is absent.
	DefaultTop = 25
	// MaxTop is the largest page size $top accepts.
	MaxTop = 100
	// MaxOrderKeys is the largest number of $orderby keys.
	MaxOrderKeys = 8
	// MaxOptionBytes bounds $select and $orderby, in bytes.
	MaxOptionBytes = 2048
	// MaxNameEcho is how many bytes of a caller-supplied name an error
	// detail repeats.
	MaxNameEcho = 64
)

// RawOptions are the decoded query parameters of one read, by name (the
// shape of url.Values: convert with query.RawOptions(u.Query())).
type RawOptions map[string][]string

// Allowed is what the caller's grant allows on the entity: authored field
// ids (not apiNames) that are readable, filterable and sortable, and
// whether $count is allowed.
type Allowed struct {
	Readable   []string
	Filterable []string
	Sortable   []string
	AllowCount bool
	// MaxTop is the largest page size of the read; 0 means MaxTop (the
	// spatial adapter allows larger pages).
	MaxTop int
	// Pseudo are filter names that are not entity fields, such as
	// reviewOutcome on the request lists of a profile disclosing
	// review_state. Absent, the name is refused like any unknown field.
	Pseudo []Pseudo
}

// Pseudo is a filter-only name compared with eq or in against a closed list
// of codes, never with null. The store compiles it to an expression of its
// own (see store/querysql), never to caller input.
type Pseudo struct {
	// Name is the name used in $filter.
	Name string
	// Values are the codes it may be compared with.
	Values []string
}

// ReviewOutcome is the pseudo field name of a request's review outcome.
const ReviewOutcome = "reviewOutcome"

// ReviewOutcomeValues returns the outcome values usable in the
// reviewOutcome filter.
func ReviewOutcomeValues() []string {
	return []string{"pending", "approved", "approvedExpired", "rejected", "changesRequested", "answered", "cancelled", "superseded"}
}

// AllowedFromGrant returns what a grant allows for queries.
func AllowedFromGrant(g *model.Grant) Allowed {
	return Allowed{Readable: g.ReadableFields, Filterable: g.FilterableFields, Sortable: g.SortableFields, AllowCount: g.AllowCount}
}

func has(list []string, id string) bool {
	for _, v := range list {
		if v == id {
			return true
		}
	}
	return false
}

// SortKey is one key of $orderby.
type SortKey struct {
	Field *model.Field
	Desc  bool
}

// Query is a parsed collection read. Build it with Parse (or, for a
// cursor's query, Build); it is immutable afterwards and safe to share.
type Query struct {
	// Entity is the entity read.
	Entity *model.Entity
	// Select is the fields of domainData: $select, or every readable
	// field in entity order when $select is absent.
	Select []*model.Field
	// Sort is $orderby; the record id always follows as the last key.
	Sort []SortKey
	// Count is true when $count=true asks for the matching total.
	Count bool
	// Top is the page size.
	Top int
	// Position is the keyset position the page starts after (from a
	// cursor); nil on a first page.
	Position *Row
	// Cursor is set, alone, when Parse met a $skiptoken: the host opens it
	// (host/cursor) into the query it carries.
	Cursor string
	// Expr is the parsed $filter; nil when there is none.
	Expr *Node
	// BBox is the bounding box the entity's geometry field must lie in;
	// nil when there is none.
	BBox *BBox

	// canon holds the canonical option texts carried inside cursors.
	canon Canonical
}

// Row is a keyset position: the record id and the stored values (storage
// form, by authored field id, as the store reads them) of the last record of
// a page. Only the values of the sort keys are used; a missing value is null.
type Row struct {
	ID     string
	Values map[string]any
}

// Canonical is the option text of a parsed query ($select and $orderby in
// canonical form, $filter as sent, so that re-parsing meets the same
// bounds): what a cursor carries and re-parses, with Build, against the
// grant of the call that presents it.
type Canonical struct {
	Select  string `json:"select,omitempty"`
	Filter  string `json:"filter,omitempty"`
	OrderBy string `json:"orderby,omitempty"`
	Count   bool   `json:"count,omitempty"`
	Top     int    `json:"top"`
	BBox    string `json:"bbox,omitempty"`
}

// Filter returns the canonical text of the filter ("" when there is none):
// every and, or and not operand parenthesised, literals as written.
func (q *Query) Filter() string { return q.Expr.String() }

// Canonical returns the canonical option texts of the query.
func (q *Query) Canonical() Canonical { return q.canon }

// Limit is the number of rows to fetch for one page: one more than Top, so
// that the extra row tells whether a next page exists (it is not returned).
func (q *Query) Limit() int { return q.Top + 1 }

// Digest returns the content digest of the parsed query: entity, selected
// fields, canonical filter, order, count and page size.
func (q *Query) Digest() string {
	// Decoded JSON values only, which canonjson writes without reflection.
	sel := make([]any, len(q.Select))
	for i, f := range q.Select {
		sel[i] = f.APIName
	}
	m := map[string]any{
		"entity": q.Entity.ID, "select": sel, "filter": q.Filter(),
		"orderby": q.canon.OrderBy, "count": q.Count, "top": q.Top,
	}
	if q.canon.BBox != "" {
		m["bbox"] = q.canon.BBox
	}
	d, err := canonjson.Digest(m)
	if err != nil { // strings, bools and ints always encode
		panic(err)
	}
	return d
}

// Shorten cuts a caller-supplied name to MaxNameEcho bytes (marking the cut
// with "…") for an error detail that echoes it.
func Shorten(s string) string {
	if len(s) > MaxNameEcho {
		s = s[:MaxNameEcho] + "…"
	}
	return s
}

// echo quotes a caller-supplied name for an error detail, shortened.
func echo(s string) string { return strconv.Quote(Shorten(s)) }

// Parse parses the query options of a collection read of e for a caller
// allowed what a says. Any option outside the grant — an unknown option, an
// unknown or withheld field, $count without allowCount — is refused with
// an *Error of kind Invalid, and the detail names the option and the field
// without telling a withheld field from an unknown one.
//
// A $skiptoken must come alone (accessProfile aside); Parse then returns a
// Query holding only Cursor, for the host to open (an empty one is refused
// with kind CursorInvalid).
func Parse(e *model.Entity, a Allowed, opts RawOptions) (*Query, error) {
	// Options in name order, so that a refusal names the same option every time.
	names := make([]string, 0, len(opts))
	for name := range opts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		switch name {
		case OptAccessProfile, OptSelect, OptFilter, OptOrderBy, OptCount, OptTop, OptSkipToken:
		case OptBBox:
			if !bboxAllowed(e, a) {
				return nil, invalid("%s is not a query option of this read for this access profile: the entity has no readable geometry field.", OptBBox)
			}
		default:
			return nil, invalid("%s is not a query option of this read.", echo(name))
		}
		if len(opts[name]) != 1 {
			return nil, invalid("%s must be given exactly once.", name)
		}
	}
	if tok, ok := opts[OptSkipToken]; ok {
		for _, name := range names {
			if name != OptSkipToken && name != OptAccessProfile {
				return nil, invalid("%s cannot be combined with %s: a cursor carries the whole query and is sent alone, with only accessProfile.", OptSkipToken, name)
			}
		}
		if tok[0] == "" {
			return nil, Errorf(CursorInvalid, "The cursor is empty.")
		}
		return &Query{Entity: e, Cursor: tok[0]}, nil
	}
	raw := Canonical{Top: DefaultTop}
	if v, ok := opts[OptTop]; ok {
		n, err := parseTop(v[0], a.maxTop())
		if err != nil {
			return nil, err
		}
		raw.Top = n
	}
	if v, ok := opts[OptCount]; ok {
		if !a.AllowCount {
			return nil, invalid("%s is not allowed for this access profile.", OptCount)
		}
		switch v[0] {
		case "true":
			raw.Count = true
		case "false":
		default:
			return nil, invalid("%s must be true or false.", OptCount)
		}
	}
	if v, ok := opts[OptSelect]; ok {
		raw.Select = v[0]
	}
	if v, ok := opts[OptFilter]; ok {
		raw.Filter = v[0]
		if raw.Filter == "" {
			return nil, invalid("%s is empty.", OptFilter)
		}
	}
	if v, ok := opts[OptOrderBy]; ok {
		raw.OrderBy = v[0]
		if raw.OrderBy == "" {
			return nil, invalid("%s is empty.", OptOrderBy)
		}
	}
	if v, ok := opts[OptBBox]; ok {
		if v[0] == "" {
			return nil, invalid("%s is empty.", OptBBox)
		}
		raw.BBox = v[0]
	}
	if _, ok := opts[OptSelect]; ok && raw.Select == "" {
		return nil, invalid("%s is empty.", OptSelect)
	}
	return Build(e, a, raw)
}

// Build parses canonical option texts (those of Query.Canonical) against
// e and a; it serves Parse and the re-parse of a cursor's query, with the
// same refusals as Parse.
func Build(e *model.Entity, a Allowed, raw Canonical) (*Query, error) {
	q := &Query{Entity: e, Count: raw.Count, Top: raw.Top}
	if raw.Top < 1 || raw.Top > a.maxTop() {
		return nil, invalid("%s must be an integer from 1 to %d.", OptTop, a.maxTop())
	}
	if raw.Count && !a.AllowCount {
		return nil, invalid("%s is not allowed for this access profile.", OptCount)
	}
	var err error
	if q.Select, raw.Select, err = parseSelect(e, a, raw.Select); err != nil {
		return nil, err
	}
	if q.Sort, raw.OrderBy, err = parseOrderBy(e, a, raw.OrderBy); err != nil {
		return nil, err
	}
	if raw.Filter != "" {
		if q.Expr, err = parseFilter(e, a, raw.Filter); err != nil {
			return nil, err
		}
	}
	if q.BBox, raw.BBox, err = parseBBoxOption(e, a, raw.BBox); err != nil {
		return nil, err
	}
	q.canon = raw
	return q, nil
}

func (a Allowed) maxTop() int {
	if a.MaxTop > 0 {
		return a.MaxTop
	}
	return MaxTop
}

// ParseTop parses a page size from 1 to max: digits without a leading zero.
// The refusal names the option opt.
func ParseTop(opt, s string, max int) (int, error) {
	n := 0
	ok := s != "" && len(s) <= len(strconv.Itoa(max)) && s[0] != '0'
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c >= '0' && c <= '9'
		n = n*10 + int(c-'0')
	}
	if !ok || n > max {
		return 0, invalid("%s must be an integer from 1 to %d.", opt, max)
	}
	return n, nil
}

func parseTop(s string, max int) (int, error) { return ParseTop(OptTop, s, max) }

// splitList splits a comma list, refusing empty members and overlong text.
func splitList(opt, s string) ([]string, error) {
	if len(s) > MaxOptionBytes {
		return nil, invalid("%s is longer than %d bytes.", opt, MaxOptionBytes)
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = strings.Trim(p, " ")
		if parts[i] == "" {
			return nil, invalid("%s has an empty member in its comma list.", opt)
		}
	}
	return parts, nil
}

// parseSelect returns the selected fields and the canonical $select text
// ("" when every readable field is selected).
func parseSelect(e *model.Entity, a Allowed, s string) ([]*model.Field, string, error) {
	if s == "" {
		var out []*model.Field
		for _, f := range e.Fields {
			if has(a.Readable, f.ID) {
				out = append(out, f)
			}
		}
		return out, "", nil
	}
	names, err := splitList(OptSelect, s)
	if err != nil {
		return nil, "", err
	}
	out := make([]*model.Field, 0, len(names))
	for _, n := range names {
		f := e.FieldByAPIName(n)
		if f == nil || !has(a.Readable, f.ID) {
			return nil, "", invalid("%s: %s is not a readable field of this entity for this access profile.", OptSelect, echo(n))
		}
		for _, prev := range out {
			if prev == f {
				return nil, "", invalid("%s names %s twice.", OptSelect, echo(n))
			}
		}
		out = append(out, f)
	}
	return out, strings.Join(names, ","), nil
}

// parseOrderBy returns the sort keys and the canonical $orderby text.
func parseOrderBy(e *model.Entity, a Allowed, s string) ([]SortKey, string, error) {
	if s == "" {
		return nil, "", nil
	}
	items, err := splitList(OptOrderBy, s)
	if err != nil {
		return nil, "", err
	}
	if len(items) > MaxOrderKeys {
		return nil, "", invalid("%s has more than %d keys.", OptOrderBy, MaxOrderKeys)
	}
	keys := make([]SortKey, 0, len(items))
	canon := make([]string, 0, len(items))
	for _, item := range items {
		name, dir, _ := strings.Cut(item, " ")
		dir = strings.Trim(dir, " ")
		desc := false
		switch dir {
		case "", "asc":
		case "desc":
			desc = true
		default:
			return nil, "", invalid("%s: %s must be followed by asc or desc, or by nothing.", OptOrderBy, echo(name))
		}
		f := e.FieldByAPIName(name)
		if f == nil || !has(a.Sortable, f.ID) {
			return nil, "", invalid("%s: %s is not a sortable field of this entity for this access profile.", OptOrderBy, echo(name))
		}
		if f.Type == model.TypeStructured || f.Type == model.TypeCRS84Point {
			return nil, "", invalid("%s: %s is a %s field, which has no order.", OptOrderBy, echo(name), f.Type)
		}
		for _, k := range keys {
			if k.Field == f {
				return nil, "", invalid("%s names %s twice.", OptOrderBy, echo(name))
			}
		}
		keys = append(keys, SortKey{Field: f, Desc: desc})
		if desc {
			canon = append(canon, name+" desc")
		} else {
			canon = append(canon, name+" asc")
		}
	}
	return keys, strings.Join(canon, ","), nil
}
