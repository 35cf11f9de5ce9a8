// Package chunking is the one definition of greedy-canonical-http-batch-v1,
// the chunking contract of ingestion runs: how a JSONL source is cut into
// chunks (the client's planner) and what a chunk's canonical batch body and
// digests are (what the record host checks). The client (sdk/ingest) and
// the host (host/records) both build on it, so they cannot disagree.
//
// The contract: every line of the source is one batch item of the run's
// operation; from each start the chunk takes the most items whose canonical
// batch body JCS({"items":[…]}) is at most maximumBytes long and that are
// at most maximumItems; a chunk's digest is the SHA-256 of that body and its
// prefix digest the SHA-256 of the source bytes through the newline ending
// its last line.
package chunking

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/strictjson"
)

// Version names the contract a run announces.
const Version = "greedy-canonical-http-batch-v1"

// Bounds of a source.
const (
	// MaxItems is the most items a run announces.
	MaxItems = 1_000_000
	// MaxInputLength is the largest source in bytes.
	MaxInputLength = 256 << 20
)

// EmptyDigest is the SHA-256 of no bytes: the committed prefix of a new run.
const EmptyDigest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Operations an ingestion run binds.
const (
	Create = "create"
	Patch  = "patch"
)

// Bounds are the compiled batch bounds of an entity, which every chunk
// respects.
type Bounds struct {
	MaximumItems int
	MaximumBytes int64
}

// bodyOpen and bodyClose surround the canonical items of a batch body.
const (
	bodyOpen  = `{"items":[`
	bodyClose = `]}`
)

// BodyLength is the length of the canonical batch body of n items whose
// canonical forms are size bytes long together.
func BodyLength(n int, size int64) int64 {
	if n == 0 {
		return int64(len(bodyOpen) + len(bodyClose))
	}
	return int64(len(bodyOpen)+len(bodyClose)+n-1) + size
}

// AppendBody appends the canonical batch body of items, each already in its
// canonical form: JCS({"items": items}).
func AppendBody(buf []byte, items [][]byte) []byte {
	buf = append(buf, bodyOpen...)
	for i, it := range items {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, it...)
	}
	return append(buf, bodyClose...)
}

// Body returns the canonical batch body of decoded items (as
// strictjson.Decode returns them), the bytes a chunk's digest covers.
func Body(items []any) ([]byte, error) {
	buf := append(make([]byte, 0, 256*len(items)), bodyOpen...)
	for i, it := range items {
		if i > 0 {
			buf = append(buf, ',')
		}
		var err error
		if buf, err = canonjson.AppendValue(buf, it); err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
	}
	return append(buf, bodyClose...), nil
}

// Digest is the lowercase hex SHA-256 of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// LineError is a refusal of one source line, counted from 1.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ErrItemTooLarge is the refusal of an item whose batch body alone is over
// maximumBytes.
var ErrItemTooLarge = errors.New("the item alone is over the batch's maximumBytes")

// Item checks one source line (without its newline; one trailing '\r' is
// stripped) as a batch item of op and returns its canonical form: strict
// JSON (no duplicate member), an object with exactly the members of the
// operation — create {operation, data}, patch {operation, id, ifMatch,
// patch}. Field values are the host's to check.
func Item(line []byte, op string) ([]byte, error) {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) == 0 {
		return nil, errors.New("an empty line is not an item")
	}
	doc, err := strictjson.Decode(line)
	if err != nil {
		return nil, err
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("an item is a JSON object")
	}
	if got, _ := m["operation"].(string); got != op {
		return nil, fmt.Errorf("operation must be %q, as for every item of this run", op)
	}
	var members []string
	switch op {
	case Create:
		members = []string{"operation", "data"}
		if _, ok := m["data"].(map[string]any); !ok {
			return nil, errors.New("data must be an object")
		}
	case Patch:
		members = []string{"operation", "id", "ifMatch", "patch"}
		for _, k := range []string{"id", "ifMatch"} {
			if _, ok := m[k].(string); !ok {
				return nil, fmt.Errorf("%s must be a string", k)
			}
		}
		if _, ok := m["patch"].([]any); !ok {
			return nil, errors.New("patch must be a JSON Patch array")
		}
	default:
		return nil, fmt.Errorf("operation %q is neither create nor patch", op)
	}
	if len(m) != len(members) {
		for k := range m {
			known := false
			for _, w := range members {
				known = known || k == w
			}
			if !known {
				return nil, fmt.Errorf("unknown member %q of a %s item", k, op)
			}
		}
	}
	return canonjson.AppendValue(make([]byte, 0, len(line)), m)
}

// Chunk is one planned chunk: the items [FirstItem, FirstItem+Items) of
// the source, found in its bytes [Offset, Offset+Length).
type Chunk struct {
	Index     int
	FirstItem int
	Items     int
	Offset    int64
	Length    int64
	// BodyLength is the length of the canonical batch body.
	BodyLength int64
	// Digest is the SHA-256 of the canonical batch body, PrefixDigest of
	// the source bytes [0, Offset+Length), both lowercase hex.
	Digest, PrefixDigest string
}

// Plan is a source cut into chunks.
type Plan struct {
	Operation   string
	Bounds      Bounds
	InputDigest string
	InputLength int64
	ItemCount   int
	Chunks      []Chunk
}

// Planner cuts a source into chunks as it reads it, holding one chunk's
// items at a time.
type Planner struct {
	op     string
	bounds Bounds
	plan   Plan
	input  hash.Hash
	// the open chunk
	open  Chunk
	body  hash.Hash
	size  int64
	items int
}

// NewPlanner starts a plan for a source of op items under bounds.
func NewPlanner(op string, b Bounds) (*Planner, error) {
	if op != Create && op != Patch {
		return nil, fmt.Errorf("chunking: operation %q is neither create nor patch", op)
	}
	if b.MaximumItems < 1 || b.MaximumBytes < BodyLength(1, 2) {
		return nil, fmt.Errorf("chunking: bounds of %d items and %d bytes take no item", b.MaximumItems, b.MaximumBytes)
	}
	return &Planner{op: op, bounds: b, plan: Plan{Operation: op, Bounds: b}, input: sha256.New(), body: sha256.New()}, nil
}

// Line adds the next source line, with its newline when it has one.
func (p *Planner) Line(line []byte) error {
	lineNo := p.plan.ItemCount + 1
	if p.plan.ItemCount >= MaxItems {
		return &LineError{lineNo, fmt.Errorf("a source has at most %d items", MaxItems)}
	}
	if p.plan.InputLength+int64(len(line)) > MaxInputLength {
		return &LineError{lineNo, fmt.Errorf("a source has at most %d bytes", MaxInputLength)}
	}
	text := line
	if n := len(text); n > 0 && text[n-1] == '\n' {
		text = text[:n-1]
	}
	item, err := Item(text, p.op)
	if err != nil {
		return &LineError{lineNo, err}
	}
	if BodyLength(1, int64(len(item))) > p.bounds.MaximumBytes {
		return &LineError{lineNo, fmt.Errorf("%w: its canonical batch body is %d bytes, over %d", ErrItemTooLarge, BodyLength(1, int64(len(item))), p.bounds.MaximumBytes)}
	}
	if p.items > 0 && (p.items == p.bounds.MaximumItems || BodyLength(p.items+1, p.size+int64(len(item))) > p.bounds.MaximumBytes) {
		p.close()
	}
	if p.items == 0 {
		p.open = Chunk{Index: len(p.plan.Chunks), FirstItem: p.plan.ItemCount, Offset: p.plan.InputLength}
		p.body.Reset()
		p.body.Write([]byte(bodyOpen))
	} else {
		p.body.Write([]byte{','})
	}
	p.body.Write(item)
	p.items++
	p.size += int64(len(item))
	p.input.Write(line)
	p.plan.InputLength += int64(len(line))
	p.plan.ItemCount++
	return nil
}

// close ends the open chunk at the source read so far.
func (p *Planner) close() {
	p.body.Write([]byte(bodyClose))
	c := p.open
	c.Items = p.items
	c.Length = p.plan.InputLength - c.Offset
	c.BodyLength = BodyLength(p.items, p.size)
	c.Digest = hex.EncodeToString(p.body.Sum(nil))
	c.PrefixDigest = hex.EncodeToString(p.input.Sum(nil))
	p.plan.Chunks = append(p.plan.Chunks, c)
	p.items, p.size = 0, 0
}

// Finish ends the plan. A source without items is refused.
func (p *Planner) Finish() (*Plan, error) {
	if p.plan.ItemCount == 0 {
		return nil, errors.New("chunking: the source has no items")
	}
	if p.items > 0 {
		p.close()
	}
	p.plan.InputDigest = hex.EncodeToString(p.input.Sum(nil))
	plan := p.plan
	return &plan, nil
}

// Read plans a whole JSONL source read from r.
func Read(r io.Reader, op string, b Bounds) (*Plan, error) {
	p, err := NewPlanner(op, b)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it whole.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
				if int64(len(long)) > b.MaximumBytes+MaxLineSlack {
					return nil, &LineError{p.plan.ItemCount + 1, ErrItemTooLarge}
				}
			}
			line = long
		}
		if len(line) > 0 {
			if lerr := p.Line(line); lerr != nil {
				return nil, lerr
			}
		}
		if errors.Is(err, io.EOF) {
			return p.Finish()
		}
		if err != nil {
			return nil, fmt.Errorf("chunking: read source: %w", err)
		}
	}
}

// MaxLineSlack is how much longer than maximumBytes a source line may be
// (whitespace its canonical form drops) before it is refused unread.
const MaxLineSlack = 1 << 20

// Rebuild rebuilds the canonical items of chunk c from src, the source bytes
// [c.Offset, c.Offset+c.Length), and checks them against the plan: the same
// item count and the same digest. It returns the canonical batch body.
func Rebuild(c Chunk, src []byte, op string) ([]byte, error) {
	body := make([]byte, 0, c.BodyLength)
	body = append(body, bodyOpen...)
	n := 0
	for len(src) > 0 {
		end := len(src)
		next := end
		for i, ch := range src {
			if ch == '\n' {
				end, next = i, i+1
				break
			}
		}
		item, err := Item(src[:end], op)
		if err != nil {
			return nil, &LineError{c.FirstItem + n + 1, err}
		}
		if n > 0 {
			body = append(body, ',')
		}
		body = append(body, item...)
		n++
		src = src[next:]
	}
	body = append(body, bodyClose...)
	if n != c.Items || Digest(body) != c.Digest {
		return nil, fmt.Errorf("chunking: chunk %d no longer matches its plan: the source changed since it was planned", c.Index)
	}
	return body, nil
}

// AppendSubmission appends the chunk submission of c, whose canonical batch
// body is body: {"chunkIndex", "digest", "items", "prefixDigest"}, the
// items as canonical as the body they come from.
func AppendSubmission(buf []byte, c Chunk, body []byte) []byte {
	buf = append(buf, `{"chunkIndex":`...)
	buf = strconv.AppendInt(buf, int64(c.Index), 10)
	buf = append(buf, `,"digest":"`...)
	buf = append(buf, c.Digest...)
	buf = append(buf, `","prefixDigest":"`...)
	buf = append(buf, c.PrefixDigest...)
	buf = append(buf, `",`...)
	return append(buf, body[1:]...) // "items":[…]}
}
