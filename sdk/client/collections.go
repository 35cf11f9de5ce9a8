package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Query is the options of a collection read. Zero members are left out.
type Query struct {
	// Select is $select: apiNames of readable fields.
	Select []string
	// Filter is $filter, for example "status eq 'open' and openedOn ge 2026-01-01".
	Filter string
	// OrderBy is $orderby: "apiName" or "apiName desc" per key.
	OrderBy []string
	// Top is the page size ($top).
	Top int
	// Count asks for the matching total ($count=true).
	Count bool
	// BBox, on entities served on the spatial adapter, keeps the records
	// whose point lies in the box.
	BBox *BBox
}

func (q Query) values() url.Values {
	v := url.Values{}
	if len(q.Select) > 0 {
		v.Set("$select", join(q.Select))
	}
	if q.Filter != "" {
		v.Set("$filter", q.Filter)
	}
	if len(q.OrderBy) > 0 {
		v.Set("$orderby", join(q.OrderBy))
	}
	if q.Top > 0 {
		v.Set("$top", strconv.Itoa(q.Top))
	}
	if q.Count {
		v.Set("$count", "true")
	}
	if q.BBox != nil {
		v.Set("bbox", q.BBox.String())
	}
	return v
}

// BBox is a bounding box in CRS84 degrees. West greater than East crosses
// the antimeridian.
type BBox struct {
	West, South, East, North float64
}

// String is the bbox option: west,south,east,north.
func (b BBox) String() string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	return f(b.West) + "," + f(b.South) + "," + f(b.East) + "," + f(b.North)
}

// Item is one record of a collection page.
type Item struct {
	// RecordIdentifier is the record id, RevisionIdentifier its revision.
	RecordIdentifier   string `json:"recordIdentifier"`
	RevisionIdentifier string `json:"revisionIdentifier"`
	// DomainData is the record's fields under their apiName; see Decode.
	DomainData json.RawMessage `json:"domainData"`
	// Tombstoned and ChangeContext are set on revision reads.
	Tombstoned    bool            `json:"tombstoned,omitempty"`
	ChangeContext json.RawMessage `json:"changeContext,omitempty"`
}

// Decode unmarshals the item's domainData into v.
func (it *Item) Decode(v any) error {
	if err := json.Unmarshal(it.DomainData, v); err != nil {
		return fmt.Errorf("client: domainData of %s: %w", it.RecordIdentifier, err)
	}
	return nil
}

// Page is one page of a collection read.
type Page struct {
	Items []Item `json:"items"`
	// NextCursor continues the read; "" on the last page.
	NextCursor string `json:"-"`
	// Count is the matching total, with Query.Count.
	Count *int64 `json:"count,omitempty"`
	// Snapshot is the token of the state a :snapshot page shows.
	Snapshot string `json:"snapshot,omitempty"`
	Meta     Meta   `json:"meta"`
}

type pageBody struct {
	Page
	PageInfo struct {
		NextCursor *string `json:"nextCursor"`
	} `json:"pageInfo"`
}

// pager reads the pages of one collection read: first with its options,
// then with the cursor alone (and, for :as-of, its instant).
type pager struct {
	c      *Client
	path   string
	first  url.Values
	always url.Values
	cursor string // query name of the cursor
	o      call
}

func (p *pager) page(ctx context.Context, cursor string) (*Page, error) {
	q := url.Values{}
	for k, v := range p.always {
		q[k] = v
	}
	if cursor == "" {
		for k, v := range p.first {
			q[k] = v
		}
	} else {
		q.Set(p.cursor, cursor)
	}
	resp, err := p.c.do(ctx, &request{method: http.MethodGet, path: p.path, query: q}, p.o.profile)
	if err != nil {
		return nil, err
	}
	var b pageBody
	if err := decode(resp, &b); err != nil {
		return nil, err
	}
	out := b.Page
	if b.PageInfo.NextCursor != nil {
		out.NextCursor = *b.PageInfo.NextCursor
	}
	return &out, nil
}

func (p *pager) all(ctx context.Context) iter.Seq2[Item, error] {
	return func(yield func(Item, error) bool) {
		cursor := ""
		for {
			pg, err := p.page(ctx, cursor)
			if err != nil {
				yield(Item{}, err)
				return
			}
			for _, it := range pg.Items {
				if !yield(it, nil) {
					return
				}
			}
			if pg.NextCursor == "" {
				return
			}
			cursor = pg.NextCursor
		}
	}
}

func (c *Client) lister(route string, q Query, opts []CallOption) *pager {
	return &pager{c: c, path: recordPath(route), first: q.values(), cursor: "$skiptoken", o: options(opts)}
}

// List reads the first page of the live records of route that match q.
func (c *Client) List(ctx context.Context, route string, q Query, opts ...CallOption) (*Page, error) {
	return c.lister(route, q, opts).page(ctx, "")
}

// ListNext reads the page after cursor (a Page's NextCursor) of the same read.
func (c *Client) ListNext(ctx context.Context, route, cursor string, opts ...CallOption) (*Page, error) {
	return c.lister(route, Query{}, opts).page(ctx, cursor)
}

// Records iterates over every record of route matching q, following the
// cursors page after page; it stops at the first error, which it yields.
func (c *Client) Records(ctx context.Context, route string, q Query, opts ...CallOption) iter.Seq2[Item, error] {
	return c.lister(route, q, opts).all(ctx)
}

// Revisions iterates over the revisions of a record, oldest first, top per
// page (0: the host's default; at most 100).
func (c *Client) Revisions(ctx context.Context, route, id string, top int, opts ...CallOption) iter.Seq2[Item, error] {
	first := url.Values{}
	if top > 0 {
		first.Set("$top", strconv.Itoa(top))
	}
	p := &pager{c: c, path: itemPath(route, id) + "/revisions", first: first, cursor: "$skiptoken", o: options(opts)}
	return p.all(ctx)
}

// Revision reads one revision of a record.
func (c *Client) Revision(ctx context.Context, route, id, revision string, opts ...CallOption) (*Record, error) {
	o := options(opts)
	resp, err := c.do(ctx, &request{method: http.MethodGet, path: itemPath(route, id) + "/revisions/" + url.PathEscape(revision)}, o.profile)
	if err != nil {
		return nil, err
	}
	return recordOf(resp)
}

// Current iterates over the records of a temporal entity whose interval
// contains now (:current).
func (c *Client) Current(ctx context.Context, route string, q Query, opts ...CallOption) iter.Seq2[Item, error] {
	p := &pager{c: c, path: recordPath(route) + ":current", first: q.values(), cursor: "$skiptoken", o: options(opts)}
	return p.all(ctx)
}

// AsOf iterates over the records of a temporal entity whose interval
// contains asOf (:as-of); every page names the instant again.
func (c *Client) AsOf(ctx context.Context, route string, asOf time.Time, q Query, opts ...CallOption) iter.Seq2[Item, error] {
	p := &pager{c: c, path: recordPath(route) + ":as-of", first: q.values(), always: url.Values{"asOf": {asOf.UTC().Format(time.RFC3339Nano)}},
		cursor: "$skiptoken", o: options(opts)}
	return p.all(ctx)
}

// SnapshotQuery is the options of a :snapshot read.
type SnapshotQuery struct {
	// Token names the state to read (a data.snapshot of a write, or the
	// Snapshot of an earlier page); "" captures the latest committed state.
	Token string
	// ValidAt, on temporal entities, keeps the records valid then: a date
	// for a date interval, a UTC RFC 3339 timestamp for a timestamp one.
	ValidAt string
	Select  []string
	Top     int
}

func (c *Client) snapshotPager(route string, q SnapshotQuery, opts []CallOption) *pager {
	first := url.Values{}
	if q.Token != "" {
		first.Set("snapshot", q.Token)
	}
	if q.ValidAt != "" {
		first.Set("validAt", q.ValidAt)
	}
	if len(q.Select) > 0 {
		first.Set("$select", join(q.Select))
	}
	if q.Top > 0 {
		first.Set("$top", strconv.Itoa(q.Top))
	}
	return &pager{c: c, path: recordPath(route) + ":snapshot", first: first, cursor: "$skiptoken", o: options(opts)}
}

// SnapshotPage reads the first page of a :snapshot read; its Snapshot names
// the state every later page (and a later read with that token) shows.
func (c *Client) SnapshotPage(ctx context.Context, route string, q SnapshotQuery, opts ...CallOption) (*Page, error) {
	return c.snapshotPager(route, q, opts).page(ctx, "")
}

// Snapshot iterates over the records of route as they stood in one state
// (q.Token, or the latest committed state captured by the first page),
// following the cursors, which stay in that state.
func (c *Client) Snapshot(ctx context.Context, route string, q SnapshotQuery, opts ...CallOption) iter.Seq2[Item, error] {
	return c.snapshotPager(route, q, opts).all(ctx)
}
