package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/strictjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/store"
)

// Change-context bounds from the specification's limits.
const (
	MaxReasonCodeBytes      = 64
	MaxReasonTextBytes      = 4096
	MaxSourceReferences     = 16
	MaxSourceReferenceBytes = 256
	MaxContextKindBytes     = 64
)

// BatchResponse is the answer of a batch: the commit's snapshot token and
// one result per item, in item order. WriteBatch writes it by hand, the
// bytes json.Marshal writes for it.
type BatchResponse struct {
	Snapshot string        `json:"snapshot"`
	Results  []BatchResult `json:"results"`
}

// BatchResult is one item's outcome, with the older identifier names.
type BatchResult struct {
	Operation string         `json:"operation"`
	ID        string         `json:"id"`
	Revision  int64          `json:"revision"`
	ETag      string         `json:"etag"`
	Data      map[string]any `json:"data"`
}

// BatchItem is one checked item of a batch or of an ingestion chunk: a
// create with its storage values, or a patch of a record under its ifMatch.
type BatchItem struct {
	operation string
	id        string
	ifMatch   string
	values    map[string]any // create
	patch     *patchOps      // patch
}

// Batch writes every item in one transaction, in item order: one stale
// ifMatch or one violated constraint (checked on the final state) rolls
// back every item. The body is judged once the grant is decided.
func (s *Service) Batch(ctx context.Context, c Call, e *model.Entity, in Body) (*Result, error) {
	if e.Batch == nil {
		return nil, problem.NotFound()
	}
	grant, err := s.Decide(ctx, c, model.OpBatch, e)
	if err != nil {
		return nil, err
	}
	body, err := in.Bytes()
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > e.Batch.MaximumBytes {
		return nil, problem.At(problem.RequestInvalid, "", "the batch is larger than %d bytes", e.Batch.MaximumBytes)
	}
	idem, err := s.Idempotency(c, grant, "batch", e.ID, string(body))
	if err != nil {
		return nil, err
	}
	items, changeContext, err := s.parseBatch(ctx, c, e, grant, body)
	if err != nil {
		return nil, err
	}
	return s.Write(ctx, e, idem, func(w *store.Writer) (*store.Outcome, error) {
		return s.WriteBatch(ctx, w, c, e, grant, items, changeContext)
	})
}

// WriteBatch writes checked batch items in w's transaction, in item
// order, and returns the batch response.
func (s *Service) WriteBatch(ctx context.Context, w *store.Writer, c Call, e *model.Entity, grant *access.Grant, items []BatchItem, changeContext []byte) (*store.Outcome, error) {
	// The results need nothing more from the database. A batch of creates
	// knows them before it is written: they are rendered while the journal
	// entries and statements are built. Otherwise, without a stored answer
	// (an Idempotency-Key, a chunk's receipt), they are rendered while the
	// round trip that carries the writes, the snapshot and COMMIT is on its
	// way.
	var results []byte
	var renderErr error
	rendered := make(chan struct{})
	render := func(recs []*store.Record) {
		go func() {
			defer close(rendered)
			results, renderErr = s.appendBatchResults(make([]byte, 0, 400*len(items)), e, grant, items, recs)
		}()
	}
	if ids := createIDs(items); ids != nil {
		shown := make([]store.Record, len(items))
		recs := make([]*store.Record, len(items))
		for i, it := range items {
			// The record CreateMany writes, as far as a result shows it.
			shown[i] = store.Record{Entity: e, ID: ids[i], Revision: 1, Values: it.values}
			recs[i] = &shown[i]
		}
		render(recs)
		if err := s.createAll(ctx, w, c, e, grant, items, ids, changeContext); err != nil {
			<-rendered
			return nil, err
		}
	} else {
		recs := make([]*store.Record, len(items))
		for i, it := range items {
			var err error
			if recs[i], err = s.batchItem(ctx, w, c, e, grant, it, changeContext); err != nil {
				return nil, inItem(err, i)
			}
		}
		render(recs)
	}
	out := &store.Outcome{Status: http.StatusOK}
	err := s.WriteSnapshotAtCommit(ctx, w, func(tok string) error {
		<-rendered
		if renderErr != nil {
			return renderErr
		}
		b := make([]byte, 0, len(results)+len(tok)+32)
		b = append(b, `{"snapshot":`...)
		b = AppendJSONString(b, tok)
		b = append(b, `,"results":`...)
		b = append(b, results...)
		out.Body = append(b, '}')
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// createIDs returns the new record ids of a batch of creates only, nil
// when an item is no create.
func createIDs(items []BatchItem) []string {
	ids := make([]string, len(items))
	for i, it := range items {
		if it.operation != model.OpCreate {
			return nil
		}
		ids[i] = uuid.NewString()
	}
	return ids
}

// appendBatchResults appends the results member of a batch response, one
// BatchResult per item, with the bytes json.Marshal writes for them (see
// render.go) but without its reflection: a chunk's receipt is the largest
// body the host writes.
func (s *Service) appendBatchResults(b []byte, e *model.Entity, grant *access.Grant, items []BatchItem, recs []*store.Record) ([]byte, error) {
	b = append(b, '[')
	for i, it := range items {
		rec := recs[i]
		r := BatchResult{
			Operation: it.operation,
			ID:        rec.ID,
			Revision:  rec.Revision,
			ETag:      s.keys.ETag(s.pkg.Revision, e.ID, rec.ID, strconv.FormatInt(rec.Revision, 10), string(JSON)),
			Data:      s.envelope(rec, grant.Readable, JSON).Data.DomainData,
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"operation":`...)
		b = AppendJSONString(b, r.Operation)
		b = append(b, `,"id":`...)
		b = AppendJSONString(b, r.ID)
		b = append(b, `,"revision":`...)
		b = strconv.AppendInt(b, r.Revision, 10)
		b = append(b, `,"etag":`...)
		b = AppendJSONString(b, r.ETag)
		b = append(b, `,"data":`...)
		var err error
		if b, err = AppendDomainData(b, r.Data); err != nil {
			return nil, fmt.Errorf("records: render batch result %d: %w", i, err)
		}
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// createAll writes a batch of creates only, the records ids names, in a
// few multi-row statements (store.Writer.CreateMany): the same rows the
// items' creates one by one write.
func (s *Service) createAll(ctx context.Context, w *store.Writer, c Call, e *model.Entity, grant *access.Grant, items []BatchItem, ids []string, cc []byte) error {
	news := make([]store.NewRecord, len(items))
	for i, it := range items {
		if !grant.Admits(it.values) {
			return problem.NotFound()
		}
		j, err := s.Journal(c, grant, e, ids[i], it.values)
		if err != nil {
			return inItem(err, i)
		}
		j.ChangeContext = cc
		news[i] = store.NewRecord{ID: ids[i], Values: it.values, Journal: j}
	}
	_, err := w.CreateMany(ctx, e, news)
	return err
}

func (s *Service) batchItem(ctx context.Context, w *store.Writer, c Call, e *model.Entity, grant *access.Grant, it BatchItem, cc []byte) (*store.Record, error) {
	switch it.operation {
	case model.OpCreate:
		id := uuid.NewString()
		if !grant.Admits(it.values) {
			return nil, problem.NotFound()
		}
		j, err := s.Journal(c, grant, e, id, it.values)
		if err != nil {
			return nil, err
		}
		j.ChangeContext = cc
		return w.Create(ctx, e, id, it.values, j)
	default:
		cur, err := s.LockCurrent(ctx, w, e, grant, it.id, it.ifMatch)
		if err != nil {
			return nil, err
		}
		next, err := s.applyPatch(e, cur, it.patch)
		if err != nil {
			return nil, err
		}
		if !grant.Admits(next) {
			return nil, problem.NotFound()
		}
		j, err := s.Journal(c, grant, e, it.id, next)
		if err != nil {
			return nil, err
		}
		j.ChangeContext = cc
		return w.Update(ctx, e, it.id, cur.Revision, next, j)
	}
}

// inItem prefixes a refusal's field path with the item it concerns.
func inItem(err error, i int) error {
	pe, ok := err.(*problem.Error)
	if !ok || pe.FieldPath == nil {
		return err
	}
	p := "/items/" + strconv.Itoa(i) + *pe.FieldPath
	cp := *pe
	cp.FieldPath = &p
	return &cp
}

// parseBatch checks the batch body and every item before anything is written.
func (s *Service) parseBatch(ctx context.Context, c Call, e *model.Entity, grant *access.Grant, body []byte) ([]BatchItem, []byte, error) {
	doc, err := strictjson.Decode(body)
	if err != nil {
		return nil, nil, BodyFault(err)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, nil, problem.At(problem.RequestInvalid, "", "a batch body is an object with items")
	}
	for _, k := range sortedKeys(top) {
		if k != "items" && k != "changeContext" {
			return nil, nil, problem.At(problem.RequestInvalid, strictjson.Pointer(k), "unknown member %q: a batch has items and changeContext", k)
		}
	}
	rawItems, ok := top["items"].([]any)
	if !ok {
		return nil, nil, problem.At(problem.RequestInvalid, "/items", "items must be an array")
	}
	if len(rawItems) == 0 {
		return nil, nil, problem.At(problem.RequestInvalid, "/items", "the batch has no items")
	}
	if len(rawItems) > e.Batch.MaximumItems {
		return nil, nil, problem.At(problem.RequestInvalid, "/items", "the batch has more than %d items", e.Batch.MaximumItems)
	}
	var cc []byte
	if raw, has := top["changeContext"]; has {
		if cc, err = changeContext(raw); err != nil {
			return nil, nil, err
		}
	}
	items, err := s.ParseBatchItems(ctx, c, e, grant, rawItems)
	if err != nil {
		return nil, nil, err
	}
	return items, cc, nil
}

// ParseBatchItems checks decoded batch items, each against the entity and the
// grant; a refusal names its item.
func (s *Service) ParseBatchItems(ctx context.Context, c Call, e *model.Entity, grant *access.Grant, rawItems []any) ([]BatchItem, error) {
	items := make([]BatchItem, 0, len(rawItems))
	// Every item of an operation is under the same decision: it is made
	// once per operation, not once per item.
	decided := make(map[string]bool, 2)
	for i, raw := range rawItems {
		it, err := s.parseItem(ctx, c, e, grant, raw, decided)
		if err != nil {
			return nil, inItem(err, i)
		}
		items = append(items, it)
	}
	return items, nil
}

// The members of a batch item, by operation.
var (
	createItemMembers = map[string]bool{"operation": true, "data": true}
	patchItemMembers  = map[string]bool{"operation": true, "id": true, "ifMatch": true, "patch": true}
)

// parseItem checks one item; decided holds the operations already
// decided for this batch, and the item's is added once it is.
func (s *Service) parseItem(ctx context.Context, c Call, e *model.Entity, grant *access.Grant, raw any, decided map[string]bool) (BatchItem, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return BatchItem{}, problem.At(problem.RequestInvalid, "", "each item is an object")
	}
	op, _ := m["operation"].(string)
	var allowed map[string]bool
	switch op {
	case model.OpCreate:
		allowed = createItemMembers
	case model.OpPatch:
		if e.MutationMode == model.CreateOnly {
			return BatchItem{}, problem.At(problem.RequestInvalid, "/operation", "%s records cannot be patched", e.ID)
		}
		allowed = patchItemMembers
	default:
		return BatchItem{}, problem.At(problem.RequestInvalid, "/operation", "operation must be create or patch")
	}
	for _, k := range sortedKeys(m) {
		if !allowed[k] {
			return BatchItem{}, problem.At(problem.RequestInvalid, strictjson.Pointer(k), "unknown member %q in a %s item (a change context is shared by the whole batch)", k, op)
		}
	}
	if !decided[op] {
		if _, err := s.Decide(ctx, c, op, e); err != nil {
			return BatchItem{}, err
		}
		decided[op] = true
	}
	if op == model.OpCreate {
		data, ok := m["data"].(map[string]any)
		if !ok {
			return BatchItem{}, problem.At(problem.RequestInvalid, "/data", "data must be an object of field values")
		}
		values, err := s.decodeFields(e, grant, data)
		if err != nil {
			return BatchItem{}, err
		}
		return BatchItem{operation: op, values: values}, nil
	}
	id, _ := m["id"].(string)
	if !values.IsUUID(id) {
		return BatchItem{}, problem.At(problem.RequestInvalid, "/id", "a patch item needs the record id, a lowercase UUID")
	}
	ifMatch, _ := m["ifMatch"].(string)
	if ifMatch == "" {
		return BatchItem{}, problem.At(problem.RequestInvalid, "/ifMatch", "a patch item needs the record's ETag in ifMatch")
	}
	rawPatch, err := json.Marshal(m["patch"])
	if err != nil {
		return BatchItem{}, err
	}
	ops, err := parsePatch(e, grant, rawPatch)
	if err != nil {
		return BatchItem{}, underPatch(err)
	}
	return BatchItem{operation: op, id: id, ifMatch: ifMatch, patch: ops}, nil
}

// underPatch moves a refusal about the patch document itself (the whole
// document or one operation) under the item's patch member; refusals that
// name a field keep naming it.
func underPatch(err error) error {
	pe, ok := err.(*problem.Error)
	if !ok || pe.FieldPath == nil || strings.HasPrefix(*pe.FieldPath, "/data/") {
		return err
	}
	p := "/patch" + *pe.FieldPath
	cp := *pe
	cp.FieldPath = &p
	return &cp
}

// changeContext checks a batch's change context and returns its canonical form.
func changeContext(raw any) ([]byte, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, problem.At(problem.RequestInvalid, "/changeContext", "changeContext must be an object")
	}
	for _, k := range sortedKeys(m) {
		switch k {
		case "kind", "reasonCode", "reasonText", "sourceReferences":
		default:
			return nil, problem.At(problem.RequestInvalid, "/changeContext/"+k, "unknown member %q of changeContext", k)
		}
	}
	str := func(name string, max int) (string, error) {
		v, has := m[name]
		if !has {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", problem.At(problem.RequestInvalid, "/changeContext/"+name, "%s must be a string", name)
		}
		if len(s) > max {
			return "", problem.At(problem.RequestInvalid, "/changeContext/"+name, "%s is longer than %d bytes", name, max)
		}
		if !utf8.ValidString(s) {
			return "", problem.At(problem.RequestInvalid, "/changeContext/"+name, "%s is not valid UTF-8", name)
		}
		return s, nil
	}
	kind, err := str("kind", MaxContextKindBytes)
	if err != nil {
		return nil, err
	}
	if kind == "" {
		return nil, problem.At(problem.RequestInvalid, "/changeContext/kind", "changeContext needs a kind")
	}
	code, err := str("reasonCode", MaxReasonCodeBytes)
	if err != nil {
		return nil, err
	}
	if _, err := str("reasonText", MaxReasonTextBytes); err != nil {
		return nil, err
	}
	if kind == "correction" && code == "" {
		return nil, problem.At(problem.RequestInvalid, "/changeContext/reasonCode", "a correction needs a nonempty reasonCode")
	}
	if v, has := m["sourceReferences"]; has {
		refs, ok := v.([]any)
		if !ok {
			return nil, problem.At(problem.RequestInvalid, "/changeContext/sourceReferences", "sourceReferences must be an array of strings")
		}
		if len(refs) > MaxSourceReferences {
			return nil, problem.At(problem.RequestInvalid, "/changeContext/sourceReferences", "at most %d source references", MaxSourceReferences)
		}
		for i, r := range refs {
			s, ok := r.(string)
			at := fmt.Sprintf("/changeContext/sourceReferences/%d", i)
			if !ok || s == "" {
				return nil, problem.At(problem.RequestInvalid, at, "a source reference is a nonempty string")
			}
			if len(s) > MaxSourceReferenceBytes {
				return nil, problem.At(problem.RequestInvalid, at, "a source reference is at most %d bytes", MaxSourceReferenceBytes)
			}
		}
	}
	return canonjson.Marshal(m)
}

// NameViolatingItem turns a violated constraint of a chunk's writes into the
// refusal of the item that violates it. Writes are pipelined and some
// constraints are checked only at commit, so the failing statement does
// not tell the item: locateViolation finds it.
func (s *Service) NameViolatingItem(ctx context.Context, c Call, e *model.Entity, grant *access.Grant, items []BatchItem, cc []byte, err error) error {
	var ce *store.ConstraintError
	if !errors.As(err, &ce) || items == nil {
		return err
	}
	if i, ierr := s.locateViolation(ctx, c, e, grant, items, cc); i >= 0 {
		return inItem(s.WriteRefusal(e, ierr), i)
	}
	return err
}

// errDiagnosis unwinds the transaction of locateViolation.
var errDiagnosis = errors.New("records: diagnosis only")

// locateViolation finds the first item of a refused chunk whose write
// violates a constraint that was only checked at commit: it writes the
// items again with every constraint checked at each statement, in a
// transaction it rolls back. It returns -1 when no item alone violates one.
func (s *Service) locateViolation(ctx context.Context, c Call, e *model.Entity, grant *access.Grant, items []BatchItem, cc []byte) (int, error) {
	at, cause := -1, error(nil)
	_, _, _ = s.store.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		w.ConstraintsImmediately()
		for i, it := range items {
			_, err := s.batchItem(ctx, w, c, e, grant, it, cc)
			if err == nil {
				err = w.Flush(ctx)
			}
			if err != nil {
				var ce *store.ConstraintError
				if errors.As(err, &ce) {
					at, cause = i, err
				}
				return nil, errDiagnosis
			}
		}
		return nil, errDiagnosis
	})
	return at, cause
}
