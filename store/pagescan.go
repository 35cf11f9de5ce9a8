package store

import (
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/layout"
)

// pageScanner scans the rows of a collection read (the select list of
// columns) into records, as scanRecord reads one record: the same ids,
// times and values of the same Go types, the values by position in the
// record's Row rather than in a map per record. What a row's scan needs is
// shared by the page rather than allocated per row and per value: one list
// of scan destinations, the records and their rows in blocks, and for each
// row one string holding its id and text-form values and one byte slice
// holding its JSON values, which the values are cut from. Text columns are
// borrowed from the driver's row (pgtype.DriverBytes, valid until the next
// row) and copied once. A page of 1,000 records of every storage form makes
// 7,300 allocations: 28,200 before the page shared what it could, 11,300
// with a map per record (BenchmarkPage; docs/performance/floors.md, seventh
// and ninth sessions).
type pageScanner struct {
	e         *model.Entity
	dest      []any
	id        pgtype.DriverBytes
	lifecycle pgtype.DriverBytes
	fields    []columnScan
	// text and doc gather the current row's text-form and JSON values;
	// ends[i] is where field i's value ends in its buffer. The rows' JSON
	// values are cut from docs, allocated in blocks.
	text, doc []byte
	ends      []int
	docs      []byte
	// block holds the records not yet handed out, vals their rows; want is
	// how many the page holds at most.
	block []Record
	vals  []any
	want  int
}

// columnScan is the scan destination of one field's column.
type columnScan struct {
	f    *model.Field
	form columnForm
	raw  pgtype.DriverBytes
	i    pgtype.Int8
	b    pgtype.Bool
	t    pgtype.Timestamptz
	// codes holds a code field's vocabulary as values (boxed once per
	// page): a stored code is one of them, or, when the vocabulary no
	// longer has it, copied as any text is. code is the current row's.
	codes []any
	code  int
}

// maxSharedCodes is the largest vocabulary whose codes a page shares
// rather than copies: a row's code is found by comparing it with each.
const maxSharedCodes = 32

// columnForm is how a field's column arrives in a page (see selectExpr).
type columnForm uint8

const (
	formText columnForm = iota // text, or cast to text: a string
	formJSON                   // jsonb cast to text: a json.RawMessage
	formInt                    // bigint: an int64
	formBool                   // boolean: a bool
	formTime                   // timestamptz: a time.Time in UTC
)

// formOf returns the form of f's column in a page.
func formOf(f *model.Field) columnForm {
	switch f.Type {
	case model.TypeCRS84Point, model.TypeStructured:
		return formJSON
	case model.TypeInteger:
		return formInt
	case model.TypeBoolean:
		return formBool
	case model.TypeTimestamp:
		return formTime
	}
	return formText
}

// newPageScanner returns the scanner of a page of e holding at most want
// records.
func newPageScanner(e *model.Entity, want int) *pageScanner {
	p := &pageScanner{e: e, fields: make([]columnScan, len(e.Fields)), ends: make([]int, len(e.Fields)), want: want}
	p.dest = make([]any, 0, 5+len(e.Fields))
	// The record's own members are scanned into the record (scan points
	// the nil destinations at them).
	p.dest = append(p.dest, &p.id, nil, &p.lifecycle, nil, nil)
	for i, f := range e.Fields {
		c := &p.fields[i]
		c.f, c.form = f, formOf(f)
		if f.Type == model.TypeCode && len(f.Values) <= maxSharedCodes {
			for _, v := range f.Values {
				c.codes = append(c.codes, v)
			}
		}
		switch c.form {
		case formInt:
			p.dest = append(p.dest, &c.i)
		case formBool:
			p.dest = append(p.dest, &c.b)
		case formTime:
			p.dest = append(p.dest, &c.t)
		default:
			p.dest = append(p.dest, &c.raw)
		}
	}
	return p
}

// scan reads the current row into a new record.
func (p *pageScanner) scan(rows pgx.Rows) (*Record, error) {
	n := len(p.fields)
	if len(p.block) == 0 {
		p.block = make([]Record, min(max(p.want, 1), 256))
		p.vals = make([]any, len(p.block)*n)
	}
	rec := &p.block[0]
	p.block = p.block[1:]
	rec.Row = p.vals[:n:n]
	p.vals = p.vals[n:]
	p.want--
	p.dest[1], p.dest[3], p.dest[4] = &rec.Revision, &rec.CreatedAt, &rec.UpdatedAt
	if err := rows.Scan(p.dest...); err != nil {
		return nil, fmt.Errorf("store: scan %s record: %w", p.e.ID, err)
	}
	rec.Entity = p.e
	rec.Lifecycle = lifecycleText(p.lifecycle)
	rec.CreatedAt, rec.UpdatedAt = rec.CreatedAt.UTC(), rec.UpdatedAt.UTC()
	// The row's text: its id, then its text-form values.
	p.text = append(p.text[:0], p.id...)
	p.doc = p.doc[:0]
	for i := range p.fields {
		c := &p.fields[i]
		switch c.form {
		case formText:
			if c.code = c.shared(); c.code < 0 {
				p.text = append(p.text, c.raw...)
			}
			p.ends[i] = len(p.text)
		case formJSON:
			p.doc = append(p.doc, c.raw...)
			p.ends[i] = len(p.doc)
		}
	}
	text := string(p.text)
	var doc []byte
	if len(p.doc) > 0 {
		if cap(p.docs)-len(p.docs) < len(p.doc) {
			p.docs = make([]byte, 0, max(len(p.doc), 16<<10))
		}
		at := len(p.docs)
		p.docs = append(p.docs, p.doc...)
		doc = p.docs[at:len(p.docs):len(p.docs)]
	}
	rec.ID = text[:len(p.id)]
	textAt, docAt := len(p.id), 0
	for i := range p.fields {
		c := &p.fields[i]
		var v any
		switch c.form {
		case formText:
			switch {
			case c.code >= 0:
				v = c.codes[c.code]
			case c.raw != nil:
				v = text[textAt:p.ends[i]]
			}
			textAt = p.ends[i]
		case formJSON:
			if c.raw != nil {
				v = json.RawMessage(doc[docAt:p.ends[i]:p.ends[i]])
			}
			docAt = p.ends[i]
		case formInt:
			if c.i.Valid {
				v = c.i.Int64
			}
		case formBool:
			if c.b.Valid {
				v = c.b.Bool
			}
		case formTime:
			if c.t.Valid {
				v = c.t.Time.UTC()
			}
		}
		rec.Row[i] = v
	}
	return rec, nil
}

// shared returns the index of the current row's code in c.codes, or -1
// when the column is not a shared code (or NULL, or not in the vocabulary).
func (c *columnScan) shared() int {
	if c.raw == nil {
		return -1
	}
	for j, v := range c.codes {
		if string(c.raw) == v.(string) {
			return j
		}
	}
	return -1
}

// lifecycleText returns a record's lifecycle column as a string, without
// allocating for the lifecycles the layout knows.
func lifecycleText(b []byte) string {
	switch string(b) {
	case layout.LifecycleActive:
		return layout.LifecycleActive
	case layout.LifecycleTombstoned:
		return layout.LifecycleTombstoned
	}
	return string(b)
}
