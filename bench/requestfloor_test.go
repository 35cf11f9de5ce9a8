package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/planners"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
)

// requestFloor is the database work the specification makes a change
// request's submit and apply cost, done with pgx alone: no HTTP, no reads,
// no locks, no planner, no snapshot. Per request, on a draft prepared
// (untimed) as the host creates one, two transactions, each sent as one
// batch from BEGIN to COMMIT:
//
//   - submit: the idempotency key's INSERT, the frozen proposal's INSERT,
//     the request's state UPDATE (submitted), the touch of the request
//     record (UPDATE of its table, its revision and its audit entry), and
//     the stored outcome's UPDATE (store.Writer.SubmitRequest, Touch,
//     Store.Write);
//   - apply: the idempotency key's INSERT, the effect's item (INSERT, its
//     revision and audit entry), the application receipt's INSERT, the
//     request's state UPDATE (applied), the touch of the request record and
//     the stored outcome's UPDATE (store.Writer.Create, ApplyRequest,
//     Touch, Store.Write).
//
// The statements are the store's own, by the names it gives them
// (store.SQLTakeKey, SQLAppendRevision, …, SQLCreateRecord,
// SQLTouchRecord); the plan is frozen by planners.Plan.Freeze as the host
// freezes it, and the stored outcomes are the host's own (read from one
// request the host phases wrote) with this request's ids put in. Each draft is used by one request only, so no
// statement waits for another: the floor bounds any host from above. The
// host checks the row counts of its UPDATEs before COMMIT; a batch that
// carries its COMMIT cannot, so the floor checks them after and counts a
// request whose counts are wrong as failed.
//
// As references, in the same style: creates of the item with an
// idempotency key (key INSERT, item INSERT, revision, audit, outcome
// UPDATE) and without one (item, revision, audit: what the report's
// plain-create phase, which sends no Idempotency-Key, makes the host write).
type requestFloor struct {
	t *testing.T
	// admin prepares drafts and reads; conns are the clients', one each.
	admin *pgx.Conn
	conns []*pgx.Conn
	pkg   *model.Package
	// req is the request entity (the tengo planner's), item its effect's.
	req, item *model.Entity
	seq       *atomic.Int64
	// principal is the owner, submitter and applier reference the host
	// stored for its requests.
	principal string
	host      floorSample
	// ready holds the prepared drafts of the current phase.
	ready chan *floorDraft
	// sample is one request and one keyed create the floor completed.
	sample, createSample atomic.Pointer[string]
	// sql are the statements, built as the store builds them.
	touch, itemInsert string
}

// floorSample is one request (and one keyed create) the host wrote: the
// templates of the stored outcomes, and the sizes the report compares.
type floorSample struct {
	recordID, applicationID, effectDigest, createID string
	submitOutcome, applyOutcome, createOutcome      store.Outcome
	sizes                                           floorSizes
}

// floorSizes are the sizes, as text and as stored, of what a request and a
// keyed create store beyond the rows' fixed columns.
type floorSizes struct {
	plan, submitOutcome, applyOutcome, results, createOutcome [2]int
}

func (s floorSizes) row(i int) [2]int {
	return [][2]int{s.plan, s.submitOutcome, s.applyOutcome, s.results, s.createOutcome}[i]
}

// floorDraft is one prepared draft and what its submit and apply write.
type floorDraft struct {
	id, code, data, recordRef      string
	amount                         int64
	plan, effectDigest             string
	itemID, itemRef, applicationID string
	results                        string
	submitOutcome, applyOutcome    []byte
}

// floorStatement is one statement of a floor transaction and the rows it
// must affect.
type floorStatement struct {
	sql  string
	args []any
	rows int64
}

// newRequestFloor opens the floor's connections on dsn and reads the
// host's sample: a request of entity item_request the host applied, and
// the create under idempotency key createID.
func newRequestFloor(ctx context.Context, t *testing.T, dsn, pkgPath string, clients int, seq *atomic.Int64, createID string) *requestFloor {
	t.Helper()
	p, err := model.Load(pkgPath)
	if err != nil {
		t.Fatal(err)
	}
	f := &requestFloor{t: t, pkg: p, req: p.EntityByID("item_request"), item: p.EntityByID("item"), seq: seq}
	if f.req == nil || f.item == nil {
		t.Fatal("the requestperf package has no item_request or item entity")
	}
	if f.admin, err = pgx.Connect(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	for range clients {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		f.conns = append(f.conns, c)
	}
	// Touch and Create, as the store builds them (every field is set).
	f.touch = store.SQLTouchRecord(f.req)
	f.itemInsert = store.SQLCreateRecord(f.item, f.item.Fields)

	h := &f.host
	var plan, results string
	if err := f.admin.QueryRow(ctx, `SELECT a.record_id::text, a.application_id::text, a.effect_digest, r.owner_reference, p.plan::text, a.results::text,
    octet_length(p.plan::text), pg_column_size(p.plan), octet_length(a.results::text), pg_column_size(a.results)
FROM registrum.request_applications a
JOIN registrum.request_proposals p USING (entity_id, record_id, proposal_version)
JOIN registrum.requests r USING (entity_id, record_id)
WHERE a.entity_id = $1 ORDER BY a.applied_at DESC LIMIT 1`, f.req.ID).Scan(&h.recordID, &h.applicationID, &h.effectDigest, &f.principal, &plan, &results,
		&h.sizes.plan[0], &h.sizes.plan[1], &h.sizes.results[0], &h.sizes.results[1]); err != nil {
		t.Fatalf("the host's sample request: %v", err)
	}
	// The outcomes stored with the request record's revisions 2 (submit)
	// and 3 (apply), and with the keyed create's revision 1.
	for _, o := range []struct {
		entity, id string
		revision   int64
		out        *store.Outcome
		size       *[2]int
	}{
		{f.req.ID, h.recordID, 2, &h.submitOutcome, &h.sizes.submitOutcome},
		{f.req.ID, h.recordID, 3, &h.applyOutcome, &h.sizes.applyOutcome},
		{f.item.ID, createID, 1, &h.createOutcome, &h.sizes.createOutcome},
	} {
		var text string
		if err := f.admin.QueryRow(ctx, `SELECT i.outcome::text, octet_length(i.outcome::text), pg_column_size(i.outcome)
FROM registrum.idempotency i JOIN registrum.revisions r ON r.commit_id = i.commit_id
WHERE r.entity_id = $1 AND r.record_id = $2 AND r.revision = $3`, o.entity, o.id, o.revision).Scan(&text, &o.size[0], &o.size[1]); err != nil {
			t.Fatalf("the host's outcome of %s %s revision %d: %v", o.entity, o.id, o.revision, err)
		}
		if err := json.Unmarshal([]byte(text), o.out); err != nil {
			t.Fatalf("the host's outcome of %s %s revision %d: %v", o.entity, o.id, o.revision, err)
		}
	}
	h.createID = createID
	return f
}

// close closes the floor's connections.
func (f *requestFloor) close(ctx context.Context) {
	for _, c := range f.conns {
		c.Close(ctx)
	}
	f.admin.Close(ctx)
}

// floorNow is a transaction's clock reading, as store.Write takes it.
func floorNow() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// floorHex is a fresh random-looking hex digest of n bytes (n ≤ 32).
func floorHex(n int) string {
	id := uuid.New()
	sum := sha256.Sum256(id[:])
	return hex.EncodeToString(sum[:n])
}

// floorRecordRef is a record reference shaped as the host's (a keyed
// digest of the record).
func floorRecordRef(id string) string {
	sum := sha256.Sum256([]byte("record " + id))
	return "hmac-sha256:" + hex.EncodeToString(sum[:])
}

// floorOutcome is the host's stored outcome tmpl with the host's ids
// replaced (pairs old, new) and an ETag of its own.
func floorOutcome(tmpl store.Outcome, replace ...string) ([]byte, error) {
	r := strings.NewReplacer(replace...)
	o := store.Outcome{Status: tmpl.Status, Location: r.Replace(tmpl.Location), Body: []byte(r.Replace(string(tmpl.Body)))}
	if tmpl.ETag != "" {
		o.ETag = `"engine-hmac-sha256:` + floorHex(32) + `"`
	}
	return json.Marshal(o)
}

// settle vacuums the tables the floor writes and checkpoints, so that a
// floor phase does not pay for the dead rows and dirty buffers of the
// phases before it. CHECKPOINT needs a privileged role: it is skipped on a
// server that refuses it.
func (f *requestFloor) settle(ctx context.Context) {
	settleTables(ctx, f.admin, layout.Table(f.item), layout.Table(f.req))
}

// requestTables are the engine's tables a change request and a create
// write, beside their entity tables.
var requestTables = []string{"registrum.revisions", "registrum.audit", "registrum.idempotency",
	"registrum.requests", "registrum.request_proposals", "registrum.request_applications"}

// settleTables vacuums the entity tables named and requestTables, then
// checkpoints: what every phase of the requests report, the host's and the
// floor's alike, starts from. A refused CHECKPOINT (an unprivileged role)
// is skipped.
func settleTables(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, entityTables ...string) {
	for _, table := range append(entityTables, requestTables...) {
		db.Exec(ctx, "VACUUM ANALYZE "+table)
	}
	db.Exec(ctx, "CHECKPOINT")
}

// prepare writes n drafts as the host creates them (the request record at
// revision 1 with its revision and audit entry, the request in state
// draft), in one transaction of COPYs, untimed, and makes them the ones
// the next request phase uses.
func (f *requestFloor) prepare(ctx context.Context, n int) error {
	now := floorNow()
	commitID := uuid.NewString()
	trace := floorHex(16)
	drafts := make([]*floorDraft, n)
	var records, revisions, audit, requests [][]any
	for k := range drafts {
		d, err := f.draft()
		if err != nil {
			return err
		}
		drafts[k] = d
		records = append(records, append([]any{d.id, int64(1), layout.LifecycleActive, now, now, f.pkg.Revision}, fieldArgs(f.req, d.code, d.amount)...))
		revisions = append(revisions, []any{f.req.ID, d.id, int64(1), layout.LifecycleActive, d.data, f.pkg.Revision, uuid.NewString(), commitID, now})
		audit = append(audit, []any{"create", "succeeded", f.req.ID, d.recordRef, int64(1), f.principal, trace})
		requests = append(requests, []any{f.req.ID, d.id, f.principal, store.RequestDraft, int64(1), now})
	}
	recordCols := []string{layout.ColRecordID, layout.ColRevision, layout.ColLifecycle, layout.ColCreatedAt, layout.ColUpdatedAt, layout.ColPackageRevision}
	for _, fd := range f.req.Fields {
		recordCols = append(recordCols, layout.ColumnName(fd))
	}
	tx, err := f.admin.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	for _, table := range []struct {
		name pgx.Identifier
		cols []string
		rows [][]any
	}{
		{pgx.Identifier{layout.Schema, layout.TableName(f.req)}, recordCols, records},
		{pgx.Identifier{"registrum", "revisions"}, []string{"entity_id", "record_id", "revision", "lifecycle", "data", "package_revision", "operation_id", "commit_id", "created_at"}, revisions},
		{pgx.Identifier{"registrum", "audit"}, []string{"operation", "outcome", "entity_id", "record_reference", "revision", "principal_reference", "trace_id"}, audit},
		{pgx.Identifier{"registrum", "requests"}, []string{"entity_id", "record_id", "owner_reference", "state", "proposal_version", "updated_at"}, requests},
	} {
		copied, err := tx.CopyFrom(ctx, table.name, table.cols, pgx.CopyFromRows(table.rows))
		if err != nil {
			return fmt.Errorf("prepare drafts: %s: %w", table.name.Sanitize(), err)
		}
		if copied != int64(n) {
			return fmt.Errorf("prepare drafts: %d rows copied into %s, want %d", copied, table.name.Sanitize(), n)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	f.ready = make(chan *floorDraft, n)
	for _, d := range drafts {
		f.ready <- d
	}
	return nil
}

// draft builds one draft and what its submit and apply write: the plan
// frozen as the host freezes the tengo planner's, the receipt's results in
// their canonical form, and the host's outcomes with this draft's ids.
func (f *requestFloor) draft() (*floorDraft, error) {
	n := f.seq.Add(1)
	d := &floorDraft{id: uuid.NewString(), code: fmt.Sprintf("r-%d", n), amount: n, itemID: uuid.NewString(), applicationID: uuid.NewString()}
	d.data = fmt.Sprintf(`{"amount":%d,"code":%q}`, n, d.code)
	d.recordRef, d.itemRef = floorRecordRef(d.id), floorRecordRef(d.itemID)
	plan := &planners.Plan{Kind: "tengo", ProposalVersion: 1, Writes: []planners.Write{{
		ID: "new_item", Operation: model.EffectCreate, Target: planners.Target{Entity: f.item.ID},
		Set: map[string]planners.Value{"code": {Value: d.code}, "amount": {Value: n}},
	}}}
	if err := plan.Freeze(); err != nil {
		return nil, err
	}
	d.plan, d.effectDigest = string(plan.Canonical), plan.EffectDigest
	d.results = fmt.Sprintf(`[{"effect":"new_item","entity":%q,"recordId":%q,"revision":1}]`, f.item.ID, d.itemID)
	h := &f.host
	var err error
	if d.submitOutcome, err = floorOutcome(h.submitOutcome, h.recordID, d.id, h.effectDigest, d.effectDigest); err != nil {
		return nil, err
	}
	if d.applyOutcome, err = floorOutcome(h.applyOutcome, h.recordID, d.id, h.effectDigest, d.effectDigest, h.applicationID, d.applicationID); err != nil {
		return nil, err
	}
	return d, nil
}

// floorTx sends stmts as one transaction in one round trip, BEGIN first
// and COMMIT last, and checks that each affected its rows and that the
// transaction committed.
func floorTx(ctx context.Context, conn *pgx.Conn, stmts []floorStatement) error {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(stmts)+2)}
	b.BeginTx(pgx.TxOptions{})
	for _, s := range stmts {
		b.Queue(s.sql, s.args...)
	}
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, b)
	err := func() error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("BEGIN: %w", err)
		}
		for _, s := range stmts {
			tag, err := br.Exec()
			if err != nil {
				return fmt.Errorf("%s: %w", statementName(s.sql), err)
			}
			if tag.RowsAffected() != s.rows {
				return fmt.Errorf("%s: %d rows, want %d", statementName(s.sql), tag.RowsAffected(), s.rows)
			}
		}
		tag, err := br.Exec()
		if err == nil && tag.String() != "COMMIT" {
			err = fmt.Errorf("COMMIT answered %s", tag)
		}
		return err
	}()
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if conn.PgConn().TxStatus() != 'I' {
		if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil {
			err = errors.Join(err, rerr)
		}
		if err == nil {
			err = errors.New("the transaction is still open after its COMMIT")
		}
	}
	return err
}

// journal is the revision and audit entry of one write (store.Writer.journal).
func (f *requestFloor) journal(e *model.Entity, id string, revision int64, data, operation, ref, commitID, trace string, now time.Time) []floorStatement {
	return []floorStatement{
		{store.SQLAppendRevision, []any{e.ID, id, revision, layout.LifecycleActive, data, f.pkg.Revision, uuid.NewString(), commitID, now, nil}, 1},
		{store.SQLAppendAudit, []any{operation, e.ID, ref, revision, f.principal, trace}, 1},
	}
}

// request submits and applies a prepared draft on conn: done only when
// both transactions committed.
func (f *requestFloor) request(ctx context.Context, conn *pgx.Conn) error {
	d, err := f.nextDraft()
	if err != nil {
		return err
	}
	if err := f.submit(ctx, conn, d); err != nil {
		return err
	}
	if err := f.apply(ctx, conn, d); err != nil {
		return err
	}
	f.sample.CompareAndSwap(nil, &d.id)
	return nil
}

// nextDraft takes a prepared draft.
func (f *requestFloor) nextDraft() (*floorDraft, error) {
	select {
	case d := <-f.ready:
		return d, nil
	default:
		return nil, errors.New("the floor's prepared drafts ran out; prepare more")
	}
}

// submit is the floor's submit transaction of draft d.
func (f *requestFloor) submit(ctx context.Context, conn *pgx.Conn, d *floorDraft) error {
	now, commitID, trace, key := floorNow(), uuid.NewString(), floorHex(16), floorHex(32)
	stmts := []floorStatement{
		{store.SQLTakeKey, []any{key, "sha256:" + floorHex(32), commitID}, 1},
		{store.SQLFreezeProposal, []any{f.req.ID, d.id, int64(1), int64(1), "tengo", "", d.effectDigest, d.plan, f.principal, "bench", now, nil}, 1},
		{store.SQLSetRequestState, []any{f.req.ID, d.id, store.RequestSubmitted, int64(1), now}, 1},
		{f.touch, []any{d.id, int64(1), now, f.pkg.Revision}, 1},
	}
	stmts = append(stmts, f.journal(f.req, d.id, 2, d.data, model.OpSubmitRequest, d.recordRef, commitID, trace, now)...)
	stmts = append(stmts, floorStatement{store.SQLStoreOutcome, []any{key, d.submitOutcome}, 1})
	if err := floorTx(ctx, conn, stmts); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	return nil
}

// apply is the floor's apply transaction of draft d, once submitted.
func (f *requestFloor) apply(ctx context.Context, conn *pgx.Conn, d *floorDraft) error {
	now, commitID, trace, key := floorNow(), uuid.NewString(), floorHex(16), floorHex(32)
	stmts := []floorStatement{
		{store.SQLTakeKey, []any{key, "sha256:" + floorHex(32), commitID}, 1},
		{f.itemInsert, append([]any{d.itemID, now, f.pkg.Revision}, fieldArgs(f.item, d.code, d.amount)...), 1},
	}
	stmts = append(stmts, f.journal(f.item, d.itemID, 1, d.data, "create", d.itemRef, commitID, trace, now)...)
	stmts = append(stmts,
		floorStatement{store.SQLStoreApplication, []any{d.applicationID, f.req.ID, d.id, int64(1), d.effectDigest, f.principal, "bench", nil, false, d.results, now}, 1},
		floorStatement{store.SQLSetRequestState, []any{f.req.ID, d.id, store.RequestApplied, int64(1), now}, 1},
		floorStatement{f.touch, []any{d.id, int64(2), now, f.pkg.Revision}, 1})
	stmts = append(stmts, f.journal(f.req, d.id, 3, d.data, model.OpApplyRequest, d.recordRef, commitID, trace, now)...)
	stmts = append(stmts, floorStatement{store.SQLStoreOutcome, []any{key, d.applyOutcome}, 1})
	if err := floorTx(ctx, conn, stmts); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	return nil
}

// create creates one item on conn, under an idempotency key when keyed.
func (f *requestFloor) create(ctx context.Context, conn *pgx.Conn, keyed bool) error {
	n := f.seq.Add(1)
	id, code := uuid.NewString(), fmt.Sprintf("i-%d", n)
	now, commitID, trace, key := floorNow(), uuid.NewString(), floorHex(16), floorHex(32)
	var stmts []floorStatement
	if keyed {
		stmts = append(stmts, floorStatement{store.SQLTakeKey, []any{key, "sha256:" + floorHex(32), commitID}, 1})
	}
	stmts = append(stmts, floorStatement{f.itemInsert, append([]any{id, now, f.pkg.Revision}, fieldArgs(f.item, code, n)...), 1})
	stmts = append(stmts, f.journal(f.item, id, 1, fmt.Sprintf(`{"amount":%d,"code":%q}`, n, code), "create", floorRecordRef(id), commitID, trace, now)...)
	if keyed {
		out, err := floorOutcome(f.host.createOutcome, f.host.createID, id)
		if err != nil {
			return err
		}
		stmts = append(stmts, floorStatement{store.SQLStoreOutcome, []any{key, out}, 1})
	}
	if err := floorTx(ctx, conn, stmts); err != nil {
		return err
	}
	if keyed {
		f.createSample.CompareAndSwap(nil, &id)
	}
	return nil
}

// floorPhase is one timed floor phase.
type floorPhase struct {
	name string
	m    measured
	// warmed is what the warm-up completed and failed.
	warmed, warmFailed int64
	// cpu is this process's CPU (the pgx clients) and db PostgreSQL's.
	cpu, db time.Duration
	first   error
}

func (p floorPhase) perOp(d time.Duration) float64 {
	return float64(d.Microseconds()) / float64(max(p.m.ops, 1))
}

// phase settles the database, then runs op from every connection for 1 s
// (warm-up: connections, statement caches) and for d, timed. With drafts,
// it prepares drafts for each run first (untimed): for the timed run,
// twice what the warm-up's rate needs, and settles again after them.
func (f *requestFloor) phase(ctx context.Context, name string, d time.Duration, drafts bool, op func(context.Context, *pgx.Conn) error) (floorPhase, error) {
	f.settle(ctx)
	res := floorPhase{name: name}
	run := func(d time.Duration) (measured, time.Duration, time.Duration, error) {
		var first atomic.Pointer[error]
		cpu0, db0 := processCPU(), databaseCPU()
		m := measure(len(f.conns), d, func(w, _ int) error {
			err := op(ctx, f.conns[w])
			if err != nil {
				first.CompareAndSwap(nil, &err)
			}
			return err
		})
		var err error
		if p := first.Load(); p != nil {
			err = *p
		}
		return m, processCPU() - cpu0, databaseCPU() - db0, err
	}
	if drafts {
		if err := f.prepare(ctx, 10_000); err != nil {
			return res, err
		}
	}
	warm, _, _, _ := run(time.Second)
	res.warmed, res.warmFailed = warm.ops, warm.failures
	if drafts {
		if err := f.prepare(ctx, max(10_000, int(2*warm.rate()*d.Seconds()))); err != nil {
			return res, err
		}
		// The timed run starts settled, its drafts written, as the host's
		// phases do.
		f.settle(ctx)
	}
	stop := recordSystem(f.t, name)
	res.m, res.cpu, res.db, res.first = run(d)
	stop()
	return res, nil
}

// recordSystem records every process's stacks with perf while a measured
// phase runs, when REGISTRUM_REQUEST_BENCH_PERF names a folder: the
// recording is written there as NAME.perf.data, NAME being the phase's
// name up to its first colon or comma (read it with perf report -i FILE
// --sort comm,dso --no-children to split PostgreSQL's CPU from the
// process's, or --comm postgres for PostgreSQL's functions). It returns
// the function that ends the recording.
func recordSystem(t *testing.T, name string) func() {
	t.Helper()
	dir := os.Getenv("REGISTRUM_REQUEST_BENCH_PERF")
	if dir == "" {
		return func() {}
	}
	if i := strings.IndexAny(name, ":,("); i > 0 {
		name = name[:i]
	}
	name = strings.ReplaceAll(strings.TrimSpace(name), " ", "-")
	return perfRecord(t, filepath.Join(dir, name+".perf.data"), "-a", "-F", "499")
}

// floorCounts are the rows the floor checks that it wrote.
type floorCounts struct{ items, applied int64 }

func (f *requestFloor) counts(ctx context.Context) (floorCounts, error) {
	var c floorCounts
	err := f.admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+layout.Table(f.item)+`),
    (SELECT count(*) FROM registrum.requests WHERE entity_id = $1 AND state = 'applied')`, f.req.ID).Scan(&c.items, &c.applied)
	return c, err
}

// floorSizes reads the sizes of the sample request and keyed create the
// floor wrote.
func (f *requestFloor) sizes(ctx context.Context) (floorSizes, error) {
	var s floorSizes
	id, create := f.sample.Load(), f.createSample.Load()
	if id == nil || create == nil {
		return s, errors.New("the floor completed no request or no keyed create")
	}
	if err := f.admin.QueryRow(ctx, `SELECT octet_length(p.plan::text), pg_column_size(p.plan), octet_length(a.results::text), pg_column_size(a.results)
FROM registrum.request_applications a JOIN registrum.request_proposals p USING (entity_id, record_id, proposal_version)
WHERE a.entity_id = $1 AND a.record_id = $2`, f.req.ID, *id).Scan(&s.plan[0], &s.plan[1], &s.results[0], &s.results[1]); err != nil {
		return s, err
	}
	for _, o := range []struct {
		entity, id string
		revision   int64
		size       *[2]int
	}{
		{f.req.ID, *id, 2, &s.submitOutcome},
		{f.req.ID, *id, 3, &s.applyOutcome},
		{f.item.ID, *create, 1, &s.createOutcome},
	} {
		if err := f.admin.QueryRow(ctx, `SELECT octet_length(i.outcome::text), pg_column_size(i.outcome)
FROM registrum.idempotency i JOIN registrum.revisions r ON r.commit_id = i.commit_id
WHERE r.entity_id = $1 AND r.record_id = $2 AND r.revision = $3`, o.entity, o.id, o.revision).Scan(&o.size[0], &o.size[1]); err != nil {
			return s, err
		}
	}
	return s, nil
}

// requestFloorReport runs the floor phases against the host's database
// after the host phases, and returns the report's section. hostRates are
// the host phases' written records per second by phase id (the mean of the
// rounds). createID is an item the host created under an idempotency key,
// whose stored outcome is the floor creates' template.
func requestFloorReport(ctx context.Context, t *testing.T, dsn, pkgPath string, clients int, d time.Duration, seq *atomic.Int64, createID string, hostRates map[string]float64, c *benchClient) string {
	t.Helper()
	f := newRequestFloor(ctx, t, dsn, pkgPath, clients, seq, createID)
	defer f.close(ctx)
	thin := newThinHost(f, c)
	defer thin.close()
	before, err := f.counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var phases []floorPhase
	for _, p := range []struct {
		name   string
		drafts bool
		op     func(context.Context, *pgx.Conn) error
	}{
		{"create with an Idempotency-Key: key INSERT, item INSERT, revision, audit, outcome UPDATE (5 statements)", false,
			func(ctx context.Context, c *pgx.Conn) error { return f.create(ctx, c, true) }},
		{"create without a key: item INSERT, revision, audit (3 statements; the rows of the host's plain-create phase, which sends no Idempotency-Key)", false,
			func(ctx context.Context, c *pgx.Conn) error { return f.create(ctx, c, false) }},
		{"request: submit (7 statements) + apply (11 statements) of a prepared draft, two transactions", true, f.request},
		{"the same request behind the thinnest HTTP host: two net/http exchanges (32 HTTP clients in this process) whose handlers run the two transactions above and answer the host's response bodies, nothing else", true,
			func(context.Context, *pgx.Conn) error { return thin.request() }},
	} {
		ph, err := f.phase(ctx, p.name, d, p.drafts, p.op)
		if err != nil {
			t.Fatalf("database floor, %s: %v", p.name, err)
		}
		phases = append(phases, ph)
	}
	after, err := f.counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var creates, requests int64
	for i, p := range phases {
		if i < 2 {
			creates += p.warmed + p.m.ops
		} else {
			requests += p.warmed + p.m.ops
		}
	}
	if after.items-before.items != creates+requests || after.applied-before.applied != requests {
		t.Errorf("database floor: %d items and %d applied requests written, the phases report %d and %d",
			after.items-before.items, after.applied-before.applied, creates+requests, requests)
	}
	floorSizes, err := f.sizes(ctx)
	if err != nil {
		t.Fatal(err)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\nDatabase floor: only the rows the specification makes each operation write, sent with pgx alone (no HTTP, no reads, no locks, no planner), each transaction one batch from BEGIN to COMMIT; %d goroutines with a connection each, after VACUUM ANALYZE and CHECKPOINT, 1 s warm-up, then %s (the host's pool holds at most %d connections):\n",
		clients, d, hostPoolConns(dsn))
	b.WriteString("| floor phase | operations/s | p50 | p99 | failed (warm-up) | process CPU per operation (the pgx clients) | PostgreSQL CPU per operation |\n|---|---|---|---|---|---|---|\n")
	failed := false
	for _, p := range phases {
		fmt.Fprintf(&b, "| %s | %.0f | %v | %v | %d (%d) | %.0f µs | %.0f µs |\n", p.name, p.m.rate(), p.m.p50.Round(10*time.Microsecond), p.m.p99.Round(10*time.Microsecond),
			p.m.failures, p.warmFailed, p.perOp(p.cpu), p.perOp(p.db))
		if p.first != nil {
			fmt.Fprintf(&b, "first failure of %q: %v\n", p.name, p.first)
		}
		if p.m.failures > 0 || p.warmFailed > 0 {
			failed = true
		}
	}
	create, plain, req, thinReq := phases[0], phases[1], phases[2], phases[3]
	hostCreate := hostRates["create"]
	fmt.Fprintf(&b, "database floor (pgx only, %d clients): create %.0f/s, request (submit + apply) %.0f/s; floor request / host plain create = %.2f (goal 0.40); floor request / floor create = %.2f; PostgreSQL CPU per floor request %.0f µs\n",
		clients, create.m.rate(), req.m.rate(), req.m.rate()/hostCreate, req.m.rate()/create.m.rate(), req.perOp(req.db))
	fmt.Fprintf(&b, "host plain create %.0f/s = %.2f of the floor create without a key (%.0f/s); floor request / floor create without a key = %.2f; host submit + apply of a prepared draft = %.2f (tengo, %.0f/s) and %.2f (WASM, %.0f/s) of the floor request\n",
		hostCreate, hostCreate/plain.m.rate(), plain.m.rate(), req.m.rate()/plain.m.rate(),
		hostRates["tengo-prepared"]/req.m.rate(), hostRates["tengo-prepared"], hostRates["wasm-prepared"]/req.m.rate(), hostRates["wasm-prepared"])
	fmt.Fprintf(&b, "thinnest HTTP host (the floor request behind two bare net/http exchanges): %.0f/s = %.2f of the host's plain create (goal 0.40), %.2f of the floor request; CPU per request %.0f µs in this process (HTTP clients, server, pgx) + %.0f µs in PostgreSQL; host submit + apply of a prepared draft = %.2f (tengo) and %.2f (WASM) of it\n",
		thinReq.m.rate(), thinReq.m.rate()/hostCreate, thinReq.m.rate()/req.m.rate(), thinReq.perOp(thinReq.cpu), thinReq.perOp(thinReq.db),
		hostRates["tengo-prepared"]/thinReq.m.rate(), hostRates["wasm-prepared"]/thinReq.m.rate())
	b.WriteString("stored sizes, bytes as text (as stored), host / floor:")
	for i, name := range []string{"frozen plan", "submit outcome", "apply outcome", "application results", "keyed create outcome"} {
		hs, fs := f.host.sizes.row(i), floorSizes.row(i)
		fmt.Fprintf(&b, " %s %d (%d) / %d (%d);", name, hs[0], hs[1], fs[0], fs[1])
	}
	b.WriteString("\n")
	if failed {
		t.Errorf("database floor: some operations failed")
	}
	return b.String()
}

// hostPoolConns is the size of the host's connection pool on dsn: that of
// a pool store.Connect opens on it (store.DefaultMaxConns unless the DSN
// sets pool_max_conns); 0 when none opens.
func hostPoolConns(dsn string) int32 {
	pool, err := store.Connect(context.Background(), dsn)
	if err != nil {
		return 0
	}
	defer pool.Close()
	return pool.Config().MaxConns
}

// fieldArgs are the values of e's fields code and amount, in the order of
// its fields (the order of its table's field columns).
func fieldArgs(e *model.Entity, code string, amount int64) []any {
	return fieldValues(e, map[string]any{"code": code, "amount": amount})
}

// fieldValues are the values of e's fields in the order of its fields (the
// order of its table's field columns, as store.SQLCreateRecord sets them
// from $4): values by field id, nil for a field absent from values.
func fieldValues(e *model.Entity, values map[string]any) []any {
	out := make([]any, 0, len(e.Fields))
	for _, f := range e.Fields {
		out = append(out, values[f.ID])
	}
	return out
}

// statementName is the first words of a statement, for its errors.
func statementName(sql string) string {
	w := strings.Fields(sql)
	return strings.Join(w[:min(3, len(w))], " ")
}
