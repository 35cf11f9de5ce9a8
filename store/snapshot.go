package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/layout"
)

// Snapshot reads (docs/decisions/snapshot-reads.md). Every revision records
// the id of the transaction that wrote it (registrum.revisions.xid); a
// snapshot is a PostgreSQL snapshot, and the state at it is each record's
// latest revision whose transaction the snapshot sees. No lock orders the
// writers: PostgreSQL's own visibility is the order.

// Snapshot is a PostgreSQL snapshot (pg_snapshot): the transactions below
// Xmin had completed when it was taken, those at or above Xmax had not, and
// those listed in Xip (ascending, within [Xmin, Xmax)) were in progress. A
// transaction is visible in it when it had completed.
type Snapshot struct {
	Xmin, Xmax uint64
	Xip        []uint64
}

// Valid reports whether s is a well-formed snapshot.
func (s Snapshot) Valid() bool {
	if s.Xmin == 0 || s.Xmin > s.Xmax {
		return false
	}
	prev := s.Xmin
	for i, x := range s.Xip {
		if x < s.Xmin || x >= s.Xmax || (i > 0 && x <= prev) {
			return false
		}
		prev = x
	}
	return true
}

// Sees reports whether transaction xid is visible in s.
func (s Snapshot) Sees(xid uint64) bool {
	if xid < s.Xmin {
		return true
	}
	if xid >= s.Xmax {
		return false
	}
	_, found := slices.BinarySearch(s.Xip, xid)
	return !found
}

// String is s in PostgreSQL's text form, xmin:xmax:xip,….
func (s Snapshot) String() string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(s.Xmin, 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatUint(s.Xmax, 10))
	b.WriteByte(':')
	for i, x := range s.Xip {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(x, 10))
	}
	return b.String()
}

// parseSnapshot reads PostgreSQL's text form of a snapshot.
func parseSnapshot(text string) (Snapshot, error) {
	parts := strings.Split(text, ":")
	if len(parts) != 3 {
		return Snapshot{}, fmt.Errorf("store: snapshot %q", text)
	}
	var s Snapshot
	var err error
	if s.Xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return Snapshot{}, fmt.Errorf("store: snapshot %q: %w", text, err)
	}
	if s.Xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return Snapshot{}, fmt.Errorf("store: snapshot %q: %w", text, err)
	}
	if parts[2] != "" {
		for _, f := range strings.Split(parts[2], ",") {
			x, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return Snapshot{}, fmt.Errorf("store: snapshot %q: %w", text, err)
			}
			s.Xip = append(s.Xip, x)
		}
	}
	slices.Sort(s.Xip)
	s.Xip = slices.Compact(s.Xip)
	if !s.Valid() {
		return Snapshot{}, fmt.Errorf("store: snapshot %q is not well-formed", text)
	}
	return s, nil
}

// ErrNoSnapshot means a snapshot is not one of this database's history: it
// sees transactions that had not started when it was read, or history it
// sees was erased.
var ErrNoSnapshot = errors.New("store: the snapshot is not available in this history")

// ErrOtherHistory means a snapshot token's history tag is not the
// database's: the token was taken in another database, or before the
// history was rebased (loadHistoryTag).
var ErrOtherHistory = errors.New("store: a snapshot token of another history")

// HistoryTag returns the tag that binds snapshots to this database's
// history (registrum.history_state), as this store last read it: at
// start, then in every token check (CheckSnapshot, CheckToken) and every
// write's snapshot (Writer.Snapshot). A store never keeps a tag the
// database has replaced, so hosts sharing the database agree on it from
// their next check or write on.
func (s *Store) HistoryTag() [8]byte {
	var tag [8]byte
	binary.BigEndian.PutUint64(tag[:], s.tag.Load())
	return tag
}

// setTag records the history tag the database holds.
func (s *Store) setTag(tag [8]byte) { s.tag.Store(binary.BigEndian.Uint64(tag[:])) }

// adoptTag records the tag b read from registrum.history_state in a
// statement that took a snapshot of this database's counter.
func (s *Store) adoptTag(b []byte) ([8]byte, error) {
	var tag [8]byte
	if len(b) != len(tag) {
		return tag, fmt.Errorf("store: the history tag has %d bytes, want 8", len(b))
	}
	copy(tag[:], b)
	s.setTag(tag)
	return tag, nil
}

// historyOrigin names where this database's transaction ids come from:
// the cluster's system identifier, the database's oid and the current WAL
// timeline (the first eight hex digits of the current WAL file's name).
const historyOrigin = `SELECT (SELECT system_identifier FROM pg_control_system())::text || '/' ||
    (SELECT oid FROM pg_database WHERE datname = current_database())::text || '/' ||
    substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)`

// loadHistoryTag reads the history tag, first rebasing history written
// under another transaction counter. A restore into another database or
// cluster, a point-in-time recovery or a promoted replica carries the
// stored transaction ids into a counter they do not belong to: the new
// counter may not have reached them, or may hand them out again, or hand
// out ids that snapshot tokens taken under the old counter would see.
// So when the origin of the ids (historyOrigin) changed since the last
// start, or a stored id is ahead of the counter, revisions ahead move to
// the current transaction and the tag changes, so that every earlier
// snapshot token is refused rather than misread. A database whose origin
// was never recorded (the first start after the migration that added it)
// records it and keeps its tag.
func loadHistoryTag(ctx context.Context, tx pgx.Tx) ([8]byte, string, error) {
	var tag [8]byte
	var ahead bool
	var recorded *string
	var origin string
	// A stored id is ahead when the statement's own snapshot could not have
	// seen its transaction: at or past the snapshot's xmax. Comparing with
	// this transaction's id instead took writes for foreign ids whenever
	// the id was assigned before the snapshot (PostgreSQL may assign it
	// while planning the statement) and another write committed in
	// between under a later id.
	if err := tx.QueryRow(ctx, `SELECT origin, (`+historyOrigin+`),
    EXISTS (SELECT 1 FROM registrum.revisions WHERE xid >= pg_snapshot_xmax(pg_current_snapshot()))
    FROM registrum.history_state FOR UPDATE`).Scan(&recorded, &origin, &ahead); err != nil {
		return tag, "", fmt.Errorf("store: check the history's transaction ids: %w", err)
	}
	if ahead {
		if _, err := tx.Exec(ctx, `UPDATE registrum.revisions SET xid = pg_current_xact_id() WHERE xid >= pg_snapshot_xmax(pg_current_snapshot())`); err != nil {
			return tag, "", fmt.Errorf("store: rebase history: %w", err)
		}
	}
	moved := recorded != nil && *recorded != origin
	if ahead || moved {
		if _, err := tx.Exec(ctx, `UPDATE registrum.history_state SET tag = substr(decode(md5(gen_random_uuid()::text), 'hex'), 1, 8)`); err != nil {
			return tag, "", fmt.Errorf("store: rebase history: %w", err)
		}
	}
	if recorded == nil || moved {
		if _, err := tx.Exec(ctx, `UPDATE registrum.history_state SET origin = $1`, origin); err != nil {
			return tag, "", fmt.Errorf("store: record the history's origin: %w", err)
		}
	}
	var b []byte
	if err := tx.QueryRow(ctx, `SELECT tag FROM registrum.history_state`).Scan(&b); err != nil || len(b) != len(tag) {
		return tag, "", fmt.Errorf("store: read the history tag: %v", err)
	}
	copy(tag[:], b)
	return tag, origin, nil
}

// CurrentSnapshot captures the latest committed state.
func (s *Store) CurrentSnapshot(ctx context.Context) (_ Snapshot, err error) {
	ctx, span := startOp(ctx, spanRead, "CurrentSnapshot")
	defer func() { endOp(span, err) }()
	var text string
	if err := s.pool.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&text); err != nil {
		return Snapshot{}, fmt.Errorf("store: capture a snapshot: %w", err)
	}
	return parseSnapshot(text)
}

// CheckSnapshot returns ErrNoSnapshot unless snap can be read here: it sees
// no transaction that had not started by now (a snapshot of another
// history, or of the future, would gain revisions later), and none whose
// revisions were erased (a snapshot at or after the earliest erased commit,
// docs/decisions/history-erasure.md). The same statement reads the
// database's history tag, which HistoryTag returns from then on.
func (s *Store) CheckSnapshot(ctx context.Context, snap Snapshot) (err error) {
	ctx, span := startOp(ctx, spanRead, "CheckSnapshot")
	defer func() { endOp(span, err) }()
	_, err = s.checkSnapshot(ctx, snap)
	return err
}

// CheckToken returns ErrOtherHistory unless tag, the history tag of a
// snapshot token, is the database's tag now, and otherwise what
// CheckSnapshot returns for its snapshot snap. The tag is compared with
// the one read in the statement that checks snap, not with the one the
// store read at start: a token another host issued after the history was
// rebased is accepted by every host, and one of before by none.
func (s *Store) CheckToken(ctx context.Context, tag [8]byte, snap Snapshot) (err error) {
	ctx, span := startOp(ctx, spanRead, "CheckToken")
	defer func() { endOp(span, err) }()
	current, err := s.checkSnapshot(ctx, snap)
	if err != nil && !errors.Is(err, ErrNoSnapshot) {
		return err
	}
	if current != tag {
		return ErrOtherHistory
	}
	return err
}

// checkSnapshot is CheckSnapshot; it returns the database's history tag.
func (s *Store) checkSnapshot(ctx context.Context, snap Snapshot) ([8]byte, error) {
	return s.judgeSnapshot(s.pool.QueryRow(ctx, sqlCheckSnapshot, s.checkArgs(snap)...))
}

// sqlCheckSnapshot answers whether a snapshot can be read here (checkArgs)
// and the database's history tag. The origin is compared too: a host that
// outlives a failover or a recovery without restarting holds the origin of
// the history before it.
const sqlCheckSnapshot = `SELECT $1::xid8 <= pg_snapshot_xmax(pg_current_snapshot())
  AND NOT EXISTS (SELECT 1 FROM registrum.history_erasures e, unnest(e.xids) x WHERE pg_visible_in_snapshot(x, $2::pg_snapshot))
  AND (` + historyOrigin + `) = $3, h.tag
  FROM registrum.history_state h`

// checkArgs are the arguments of sqlCheckSnapshot for snap.
func (s *Store) checkArgs(snap Snapshot) []any {
	return []any{strconv.FormatUint(snap.Xmax, 10), snap.String(), s.origin}
}

// judgeSnapshot reads the row of sqlCheckSnapshot: ErrNoSnapshot unless the
// snapshot can be read here, with the database's history tag.
func (s *Store) judgeSnapshot(row pgx.Row) ([8]byte, error) {
	var ok bool
	var b []byte
	if err := row.Scan(&ok, &b); err != nil {
		return [8]byte{}, fmt.Errorf("store: check a snapshot: %w", err)
	}
	tag, err := s.adoptTag(b)
	if err != nil {
		return tag, err
	}
	if !ok {
		return tag, ErrNoSnapshot
	}
	return tag, nil
}

// CheckedSnapshotRecords is CheckSnapshot of snap (with tag nil) or
// CheckToken of tag and snap, then SnapshotRecords, in one round trip: the
// records are returned only when the check passes, and its error
// otherwise.
func (s *Store) CheckedSnapshotRecords(ctx context.Context, tag *[8]byte, e *model.Entity, snap Snapshot, after string, limit int) (_ []SnapshotRecord, err error) {
	ctx, span := startOp(ctx, spanRead, "CheckedSnapshotRecords")
	defer func() { endOp(span, err) }()
	var b pgx.Batch
	b.Queue(sqlCheckSnapshot, s.checkArgs(snap)...)
	q, args := s.SnapshotStatement(e, snap, after, limit)
	b.Queue(q, args...)
	br := s.pool.SendBatch(ctx, &b)
	defer br.Close()
	current, err := s.judgeSnapshot(br.QueryRow())
	if err != nil && !errors.Is(err, ErrNoSnapshot) {
		return nil, err
	}
	if tag != nil && current != *tag {
		return nil, ErrOtherHistory
	}
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	return collectSnapshotRecords(rows, err, e, limit)
}

// SnapshotRecord is a record's state in a snapshot (SnapshotRecords): its
// latest revision whose transaction the snapshot sees.
type SnapshotRecord struct {
	RecordID string
	Revision int64
	// PackageRevision is the package revision the revision was written
	// under: the origin of its field descriptors.
	PackageRevision string
	// Values is the state in storage form by field id (as Get reads it),
	// read from the record's row when the transaction that wrote the row
	// is visible in the snapshot: the row is then the revision. Nil
	// otherwise, and Data holds the state.
	Values map[string]any
	// Current is the record's values in its row now, in storage form by
	// field id, whether or not the snapshot sees them: what Get would read
	// (row boundaries are judged on the current state).
	Current map[string]any
	// Data is the revision's stored values in wire form by authored field
	// id (a JSON object; a field not present was null) when Values is nil.
	Data []byte
}

// SnapshotRecords returns, in record id order after record id after (""
// for the start), at most limit records of e that are live in snap: each
// record's latest revision whose transaction snap sees, when that revision
// is not a tombstone.
//
// A record whose row was last written by a transaction snap sees is read
// from its row alone: every write of a record changes its row and appends
// its revision in one transaction, so that row is the latest revision snap
// sees. Only the records written since (or by transactions snap saw in
// progress) are looked up in the revisions. The row's writer is its
// PostgreSQL xmin, a 32-bit transaction id, which the statement widens to
// the 64-bit id snapshots hold against its own snapshot's next id: a row
// visible to the statement was written before that. The store writes
// records in top-level transactions only (no savepoint), so that xmin is a
// transaction a snapshot lists; a row frozen by VACUUM keeps its xmin
// (PostgreSQL 9.4 and later).
func (s *Store) SnapshotRecords(ctx context.Context, e *model.Entity, snap Snapshot, after string, limit int) (_ []SnapshotRecord, err error) {
	ctx, span := startOp(ctx, spanRead, "SnapshotRecords")
	defer func() { endOp(span, err) }()
	q, args := s.SnapshotStatement(e, snap, after, limit)
	rows, err := s.pool.Query(ctx, q, args...)
	return collectSnapshotRecords(rows, err, e, limit)
}

// SnapshotStatement returns the statement SnapshotRecords sends for its
// arguments, and the statement's arguments (a report shows its plan).
func (s *Store) SnapshotStatement(e *model.Entity, snap Snapshot, after string, limit int) (string, []any) {
	if after == "" {
		after = "00000000-0000-0000-0000-000000000000"
	}
	xip := make([]int64, len(snap.Xip))
	for i, x := range snap.Xip {
		xip[i] = int64(x)
	}
	return s.snapshotSQL(e, limit), []any{e.ID, snap.String(), after, int64(snap.Xmin), int64(snap.Xmax), xip}
}

// collectSnapshotRecords reads the rows of snapshotSQL, at most limit.
func collectSnapshotRecords(rows pgx.Rows, err error, e *model.Entity, limit int) ([]SnapshotRecord, error) {
	if err != nil {
		return nil, fmt.Errorf("store: snapshot of %s: %w", e.ID, err)
	}
	defer rows.Close()
	out := make([]SnapshotRecord, 0, max(0, min(limit, 1024)))
	// One list of scan destinations serves every row.
	var (
		r       SnapshotRecord
		fromRow bool
		rev     *int64
		data    []byte
		pkg     *string
	)
	raw := make([]any, len(e.Fields))
	dest := make([]any, 0, 7+len(raw))
	dest = append(dest, &r.RecordID, &fromRow, &r.Revision, &r.PackageRevision)
	for i := range raw {
		dest = append(dest, &raw[i])
	}
	dest = append(dest, &rev, &data, &pkg)
	for rows.Next() {
		r, fromRow, rev, data, pkg = SnapshotRecord{}, false, nil, nil, nil
		clear(raw)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("store: snapshot of %s: %w", e.ID, err)
		}
		r.Current = make(map[string]any, len(e.Fields))
		for i, f := range e.Fields {
			r.Current[f.ID] = fromStorage(f, raw[i])
		}
		if fromRow {
			r.Values = r.Current
		} else {
			if rev == nil || data == nil || pkg == nil {
				return nil, fmt.Errorf("store: snapshot of %s: record %s has no revision in the snapshot", e.ID, r.RecordID)
			}
			r.Revision, r.Data, r.PackageRevision = *rev, data, *pkg
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: snapshot of %s: %w", e.ID, err)
	}
	return out, nil
}

// rowWriter is the 64-bit id of the transaction that wrote a row t of an
// entity's table (rowWriterOf its t.xmin).
var rowWriter = rowWriterOf("t.xmin")

// rowWriterOf is the 64-bit id of the transaction whose 32-bit id is the
// xid expression xid: the id below the next id M of the statement's own
// snapshot, by 1 to 2³², whose low 32 bits are xid's. Its distance below M
// is M − xid modulo 2³², which age() gives without a conversion per row:
// age counts back from one reference id per transaction in 32-bit
// arithmetic, so age(xid) − age(M) is that distance modulo 2³² whatever the
// reference (one-time subqueries read M and age(M)). The earlier form,
// xid::text::bigint widened by M's epoch, converted the id through text
// twice per use, and the plan used it 12 times per row.
func rowWriterOf(xid string) string {
	return `(SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint) - 1
    - ((age(` + xid + `)::bigint - (SELECT age(pg_snapshot_xmax(pg_current_snapshot())::xid)) - 1) & 4294967295)`
}

// snapshotSQL is SnapshotRecords' statement for e and a page of limit
// records, built once per entity and limit: $1 entity, $2 the snapshot, $3
// the record id to start after, $4 to $6 the snapshot's xmin, xmax and
// in-progress ids as bigints. Each record's row is read with whether the
// snapshot sees its writer (seen); only a record not seen looks up its
// latest revision the snapshot sees. seen is computed apart (OFFSET 0):
// else PostgreSQL writes its expression into each of its three uses, the
// row's select list, the filter and the lookup's one-time filter, and
// evaluates it three times per row. The limit is written in the text, as
// a page's is (store/querysql): with a parameter PostgreSQL would plan
// every execution anew (a generic plan with an unknown limit costs more
// than any custom one), and planning this statement costs more than
// running it.
func (s *Store) snapshotSQL(e *model.Entity, limit int) string {
	key := snapshotKey{e, limit}
	if q, ok := s.snapshotReads.Load(key); ok {
		return q.(string)
	}
	id := "t." + layout.ColRecordID
	sel := []string{id + "::text", "v.seen", "t." + layout.ColRevision, "t." + layout.ColPackageRevision}
	for _, f := range e.Fields {
		sel = append(sel, "t."+selectExpr(f))
	}
	sel = append(sel, "r.revision", "r.data::text", "r.package_revision")
	q := `SELECT ` + strings.Join(sel, ", ") + `
FROM ` + layout.Table(e) + ` t
CROSS JOIN LATERAL (
  SELECT w.x >= 0 AND (w.x < $4 OR (w.x < $5 AND w.x <> ALL ($6::bigint[]))) AS seen
  FROM (SELECT ` + rowWriter + ` AS x) w
  OFFSET 0
) v
LEFT JOIN LATERAL (
  SELECT r.revision, r.lifecycle, r.data, r.package_revision FROM registrum.revisions r
  WHERE NOT v.seen AND r.entity_id = $1 AND r.record_id = ` + id + ` AND pg_visible_in_snapshot(r.xid, $2::pg_snapshot)
  ORDER BY r.revision DESC LIMIT 1
) r ON true
WHERE ` + id + ` > $3::uuid
  AND CASE WHEN v.seen THEN t.` + layout.ColLifecycle + ` = '` + layout.LifecycleActive + `' ELSE r.lifecycle = '` + layout.LifecycleActive + `' END
ORDER BY ` + id + ` LIMIT ` + strconv.Itoa(limit)
	q2, _ := s.snapshotReads.LoadOrStore(key, q)
	return q2.(string)
}

// snapshotKey names a statement of snapshotSQL.
type snapshotKey struct {
	e     *model.Entity
	limit int
}

// MaxSnapshotTokenBytes bounds a snapshot token.
const MaxSnapshotTokenBytes = 4096

// SnapshotTokenPrefix starts every snapshot token: engine2_ and the
// base64url (no padding) encoding of the history tag and the snapshot.
const SnapshotTokenPrefix = "engine2_"

// ErrSnapshotTokenTooLong means a state has too many transactions in
// progress to be named by a token of at most MaxSnapshotTokenBytes.
var ErrSnapshotTokenTooLong = errors.New("store: the snapshot token would exceed 4096 bytes")

// SnapshotToken encodes snap of the history tagged tag as a snapshot token
// (docs/history.md): the 8-byte tag, then unsigned varints of xmin,
// xmax - xmin, the number of in-progress transactions and each one's
// distance from its predecessor (from xmin for the first, less one after
// it). It fails when the token would be longer than MaxSnapshotTokenBytes.
// The host parses tokens (records.ParseSnapshotToken); the store writes
// them into the answers of writes (Writer.TokenAtCommit).
func SnapshotToken(tag [8]byte, snap Snapshot) (string, error) {
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
	tok := SnapshotTokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	if len(tok) > MaxSnapshotTokenBytes {
		return "", ErrSnapshotTokenTooLong
	}
	return tok, nil
}

// MaxWriteInProgress bounds the transactions a write's snapshot may list as
// in progress. A write whose snapshot lists more is refused (ErrSnapshotTooWide)
// and writes nothing: a client names the state after a write by a token of at
// most 4096 bytes, and any snapshot within this bound fits one (six
// hundred in-progress ids of at most five varint bytes each). PostgreSQL
// lists only transactions of open sessions and prepared transactions, so the
// bound is reached only by a server allowing over 600 of them.
const MaxWriteInProgress = 600

// ErrSnapshotTooWide means a write's snapshot listed more than
// MaxWriteInProgress transactions in progress; the write was refused.
var ErrSnapshotTooWide = errors.New("store: the write's snapshot lists more transactions in progress than a token names")

// sqlWriteSnapshot reads a write's snapshot (writeSnapshotOf): its own
// transaction id, the snapshot and the history tag, after checking that the
// database still serves this host's package ($1, its schema fingerprint)
// and that the snapshot is within MaxWriteInProgress ($2). Either check
// failing raises an error, which aborts the transaction: so the statement
// can travel with COMMIT.
var sqlWriteSnapshot = `SELECT s.own, s.snapshot, s.tag FROM ` + writeSnapshotOf("$1", "$2") + ` s WHERE s.ok`

// writeSnapshotOf is a subquery of one row, the snapshot of a write read
// just before its COMMIT: own (the transaction's id), snapshot (its
// snapshot as text), tag (the history tag) and ok, which is true or raises
// the write's refusal through registrum.refuse_write (migration 0020): RGPK1
// when the database serves another package than the one whose schema
// fingerprint is the placeholder fingerprint, RGSN1 when the snapshot lists
// more than the placeholder maxInProgress transactions in progress besides the
// transaction itself, counting every id from the snapshot's xmax up to the
// transaction's own when its own is at or past xmax (those were assigned
// and had not completed). The list is counted only when it could exceed
// the bound: it holds ids from the snapshot's xmin up to its xmax. A
// statement that reads it filters on ok, so that the refusals are raised
// whatever the planner would make of a column no one reads. The answers
// and refusals are those of registrum.write_snapshot (migrations 0016 and
// 0018), which a PL/pgSQL call made cost 14 µs of execution more per
// write. The snapshot and the transaction's id are read once (OFFSET 0
// keeps PostgreSQL from copying their calls into each use).
func writeSnapshotOf(fingerprint, maxInProgress string) string {
	beyond := `greatest(0, a.x::text::bigint - pg_snapshot_xmax(a.s)::text::bigint)`
	listed := `cardinality(array_remove(array(SELECT pg_snapshot_xip(a.s)), a.x))`
	return `(SELECT a.x::text AS own, a.s::text AS snapshot, a.tag,
    CASE WHEN a.active IS DISTINCT FROM ` + fingerprint + `::text
           THEN registrum.refuse_write('` + sqlstatePackageChanged + `', 'schema fingerprint ' || coalesce(a.active, '<NULL>'))
         WHEN pg_snapshot_xmax(a.s)::text::bigint - pg_snapshot_xmin(a.s)::text::bigint + ` + beyond + ` > ` + maxInProgress + `::int
          AND ` + listed + ` + ` + beyond + ` > ` + maxInProgress + `::int
           THEN registrum.refuse_write('` + sqlstateSnapshotWide + `', (` + listed + ` + ` + beyond + `)::text
             || ' transactions in progress, more than ' || ` + maxInProgress + `::int)
         ELSE true END AS ok
  FROM (SELECT pg_current_snapshot() AS s, pg_current_xact_id() AS x,
          (SELECT p.schema_fingerprint FROM registrum.package_state p) AS active,
          (SELECT h.tag FROM registrum.history_state h) AS tag
        OFFSET 0) a)`
}

// SQLSTATEs of a write's refusals (writeSnapshotOf).
const (
	sqlstatePackageChanged = "RGPK1"
	sqlstateSnapshotWide   = "RGSN1"
)

// writeSnapshotError turns a write's refusals (writeSnapshotOf) into ErrPackageChanged
// and ErrSnapshotTooWide.
func writeSnapshotError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case sqlstatePackageChanged:
			return fmt.Errorf("%w (%s)", ErrPackageChanged, pgErr.Message)
		case sqlstateSnapshotWide:
			return fmt.Errorf("%w (%s)", ErrSnapshotTooWide, pgErr.Message)
		}
	}
	return fmt.Errorf("store: snapshot of a write: %w", err)
}

// sqlStoreOutcomeWithSnapshot stores a keyed write's outcome, its body
// without the token, together with what the token is made of, read by
// writeSnapshotOf in the same statement (so that it travels with COMMIT):
// $1 key reference, $2 the outcome, $3 where the token goes in its body,
// $4 schema fingerprint, $5 the in-progress bound. A replay makes the
// token again from the stored snapshot (storedOutcome).
var sqlStoreOutcomeWithSnapshot = `UPDATE registrum.idempotency i
    SET outcome = $2::jsonb || jsonb_build_object('snapshot',
        jsonb_build_object('at', $3::int, 'own', s.own, 'of', s.snapshot, 'tag', encode(s.tag, 'hex')))
    FROM ` + writeSnapshotOf("$4", "$5") + ` s
    WHERE i.key_reference = $1 AND s.ok
    RETURNING s.own, s.snapshot, s.tag`

// commitSnapshot is a write's snapshot read with its COMMIT, and what
// waits for its token.
type commitSnapshot struct {
	own, text string
	tag       []byte
	// render receives the token of a write without a key, after COMMIT.
	render func(token string) error
	// marker stands for the token in a stored answer (a keyed write's
	// outcome, a chunk's receipt), rendered before COMMIT; at is where the
	// token goes in the stored body, stored once the statement that stores
	// the answer with the snapshot was queued.
	marker string
	at     int
	stored bool
}

func (c *commitSnapshot) read(row pgx.Row) error {
	if err := row.Scan(&c.own, &c.text, &c.tag); err != nil {
		return writeSnapshotError(err)
	}
	return nil
}

// cut returns body without the marker, which must appear in it exactly
// once, and where the marker stood: what a stored answer holds and where
// its token goes.
func (c *commitSnapshot) cut(body []byte) ([]byte, int, error) {
	i := bytes.Index(body, []byte(c.marker))
	if i < 0 || bytes.Contains(body[i+len(c.marker):], []byte(c.marker)) {
		return nil, 0, errors.New("store: a write's stored answer does not carry its token exactly once")
	}
	return slices.Concat(body[:i], body[i+len(c.marker):]), i, nil
}

// queueOutcome queues the statement that stores a keyed write's outcome o
// with its snapshot: o's body without the marker, and where the token goes.
func (c *commitSnapshot) queueOutcome(w *Writer, idem *Idempotency, o *Outcome) error {
	if o == nil {
		return errors.New("store: a keyed write without an outcome")
	}
	stored := *o
	var err error
	if stored.Body, c.at, err = c.cut(o.Body); err != nil {
		return err
	}
	b, err := json.Marshal(&stored)
	if err != nil {
		return fmt.Errorf("store: outcome: %w", err)
	}
	c.stored = true
	w.sendRow(c.read, sqlStoreOutcomeWithSnapshot, idem.KeyReference, b, c.at, w.s.fp, w.s.maxInProgress)
	return nil
}

// deliver makes the committed write's token: a write without a stored
// answer hands it to its caller, a stored answer (a keyed write's outcome,
// a chunk's receipt) gets it where the marker is in o's body.
func (c *commitSnapshot) deliver(w *Writer, o *Outcome) error {
	tag, snap, err := w.ownSnapshot(c.own, c.text, c.tag)
	if err != nil {
		return err
	}
	tok, err := SnapshotToken(tag, snap)
	if err != nil {
		return fmt.Errorf("store: the token of a write's snapshot: %w", err)
	}
	if c.render != nil {
		return c.render(tok)
	}
	// The answer returned is the one stored: the marker is where it was cut.
	if o == nil || c.at+len(c.marker) > len(o.Body) || string(o.Body[c.at:c.at+len(c.marker)]) != c.marker {
		return errors.New("store: a write returned another answer than the one it stored")
	}
	o.Body = slices.Concat(o.Body[:c.at], []byte(tok), o.Body[c.at+len(c.marker):])
	return nil
}

// insertToken returns body with tok inserted at at.
func insertToken(body []byte, at int, tok string) []byte {
	return slices.Concat(body[:at], []byte(tok), body[at:])
}

// storedToken is what a keyed write's stored outcome holds of its token
// (sqlStoreOutcomeWithSnapshot).
type storedToken struct {
	At  int    `json:"at"`
	Own string `json:"own"`
	Of  string `json:"of"`
	Tag string `json:"tag"`
}

// completeBody returns a stored answer's body with the token t is made of
// inserted where it goes.
func completeBody(body []byte, t *storedToken) ([]byte, error) {
	raw, err := hex.DecodeString(t.Tag)
	if err != nil || len(raw) != 8 || t.At < 0 || t.At > len(body) {
		return nil, errors.New("store: a stored answer's token is malformed")
	}
	snap, err := transactionSnapshot(t.Own, t.Of)
	if err != nil {
		return nil, err
	}
	tok, err := SnapshotToken([8]byte(raw), snap)
	if err != nil {
		return nil, fmt.Errorf("store: the token of a stored answer: %w", err)
	}
	return insertToken(body, t.At, tok), nil
}

// newMarker returns a string that stands for a write's token in its
// stored answer until the token is known: the token's alphabet, random, so that
// no rendered value is ever taken for it.
func newMarker() string {
	var b [32]byte
	rand.Read(b[:])
	return SnapshotTokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// Snapshot returns the snapshot of the state just after w's transaction
// commits: what the database had committed when it was called, and w's own
// writes. It is taken once all the transaction's revisions are written; a
// revision appended afterwards is refused. When the database was moved to
// another package meanwhile it returns an error wrapping
// ErrPackageChanged, and one wrapping ErrSnapshotTooWide when the snapshot
// lists more than MaxWriteInProgress transactions in progress; the write
// then commits nothing. Transactions that commit between this call and w's
// commit are not in it: neither saw the other's writes, so the state is
// that of w committing first. TokenAtCommit saves the round trip.
func (w *Writer) Snapshot(ctx context.Context) (Snapshot, error) {
	if w.snapshot != nil {
		return *w.snapshot, nil
	}
	var own, text string
	var tag []byte
	if err := w.queryRow(ctx, sqlWriteSnapshot, w.s.fp, w.s.maxInProgress).Scan(&own, &text, &tag); err != nil {
		return Snapshot{}, writeSnapshotError(err)
	}
	_, snap, err := w.ownSnapshot(own, text, tag)
	if err != nil {
		return Snapshot{}, err
	}
	w.snapshot = &snap
	return snap, nil
}

// TokenAtCommit hands render the snapshot token (SnapshotToken) of the
// state just after w's transaction commits, the snapshot Snapshot would
// return, read without a round trip of its own: in the statement that
// stores the write's answer (a keyed write's outcome, a chunk's receipt:
// StoresAnswer), else just before COMMIT, in the round trip that carries
// it. A write whose answer is not stored calls render with the token once
// the transaction has committed, before Store.Write returns. A stored
// answer is stored before COMMIT: render runs at once with a marker
// standing for the token, which must appear exactly once in the answer's
// body; Store.Write returns the body with the token in its place, and a
// read of the stored answer makes the token again from the stored
// snapshot. The refusals Snapshot reports come from Store.Write, with
// nothing committed. No revision may be appended after the call.
func (w *Writer) TokenAtCommit(ctx context.Context, render func(token string) error) error {
	if w.atCommit != nil || w.snapshot != nil {
		return errors.New("store: a write's snapshot was asked for twice")
	}
	w.atCommit = &commitSnapshot{}
	if !w.keyed && !w.storesAnswer {
		w.atCommit.render = render
		return nil
	}
	w.atCommit.marker = newMarker()
	return render(w.atCommit.marker)
}

// StoresAnswer tells w, before TokenAtCommit, that its transaction stores
// the answer it returns (an ingestion chunk's receipt, CommitChunk), so
// that the answer is rendered before COMMIT with a stand-in for its token,
// as a keyed write's outcome is.
func (w *Writer) StoresAnswer() { w.storesAnswer = true }

// ownSnapshot reads a write's snapshot (writeSnapshotOf): it adopts the history tag
// (the database's now, even when another host's start replaced it; the
// write's token carries it) and makes the snapshot see the transaction
// itself.
func (w *Writer) ownSnapshot(own, text string, b []byte) ([8]byte, Snapshot, error) {
	tag, err := w.s.adoptTag(b)
	if err != nil {
		return tag, Snapshot{}, err
	}
	snap, err := transactionSnapshot(own, text)
	return tag, snap, err
}

// transactionSnapshot reads the snapshot text of a transaction whose id is
// own (writeSnapshotOf's answer, or its copy in a stored outcome) as the
// snapshot that sees the transaction itself.
func transactionSnapshot(own, text string) (Snapshot, error) {
	snap, err := parseSnapshot(text)
	if err != nil {
		return Snapshot{}, err
	}
	xid, err := strconv.ParseUint(own, 10, 64)
	if err != nil {
		return Snapshot{}, fmt.Errorf("store: transaction id %q: %w", own, err)
	}
	return withOwn(snap, xid), nil
}

// withOwn makes a transaction's snapshot see the transaction itself: a
// snapshot never lists its own transaction as in progress, but its xmax may
// be at or below it. Every id from xmax up to own was then in progress too
// (ids are handed out in order and none of them had completed), so they
// join the in-progress list.
func withOwn(s Snapshot, own uint64) Snapshot {
	if i, found := slices.BinarySearch(s.Xip, own); found {
		s.Xip = slices.Delete(slices.Clone(s.Xip), i, i+1)
	}
	if own >= s.Xmax {
		xip := slices.Clone(s.Xip)
		for x := s.Xmax; x < own; x++ {
			xip = append(xip, x)
		}
		s.Xip, s.Xmax = xip, own+1
	}
	if own < s.Xmin {
		s.Xmin = own
	}
	return s
}
