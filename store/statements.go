package store

import (
	"strconv"
	"strings"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/layout"
)

// The statements of a write that the store sends as they are, named once so
// that what repeats them (the performance reports' database floors, in
// bench/) sends the same text: a floor then measures what the store sends,
// and follows it when it changes. The store's other statements stay where
// they are used.
const (
	// SQLTakeKey takes an idempotency key as the first statement of a
	// write: $1 key reference, $2 request digest, $3 the write's commit id.
	// A key taken before fails it with a unique violation.
	SQLTakeKey = `INSERT INTO registrum.idempotency (key_reference, request_digest, commit_id) VALUES ($1, $2, $3)`

	// SQLStoreOutcome stores a write's outcome ($2, JSON) under its key
	// ($1), in the write's transaction.
	SQLStoreOutcome = `UPDATE registrum.idempotency SET outcome = $2 WHERE key_reference = $1`

	// SQLAppendRevision appends the revision of one write: $1 entity id,
	// $2 record id, $3 revision, $4 lifecycle, $5 data (canonical JSON),
	// $6 package revision, $7 operation id, $8 commit id, $9 time, $10
	// change context (JSON or NULL).
	SQLAppendRevision = `INSERT INTO registrum.revisions
    (entity_id, record_id, revision, lifecycle, data, package_revision, operation_id, commit_id, created_at, change_context)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

	// SQLAppendAudit appends the audit entry of one successful write: $1
	// operation, $2 entity id, $3 record reference, $4 revision, $5
	// principal reference ('' for none), $6 trace id.
	SQLAppendAudit = `INSERT INTO registrum.audit
    (operation, outcome, entity_id, record_reference, revision, principal_reference, trace_id)
    VALUES ($1, 'succeeded', $2, $3, $4, nullif($5, ''), $6)`

	// SQLFreezeProposal stores a request's frozen proposal at submit: $1
	// entity id, $2 record id, $3 proposal version, $4 record revision, $5
	// planner, $6 module digest ('' for none), $7 effect digest, $8 plan
	// (canonical JSON), $9 submitter reference, $10 submitter actor, $11
	// time, $12 attachments (JSON or NULL).
	SQLFreezeProposal = `INSERT INTO registrum.request_proposals
    (entity_id, record_id, proposal_version, record_revision, planner, module_digest, effect_digest, plan, submitter_reference, submitter_actor, submitted_at, attachments)
    VALUES ($1, $2, $3, $4, $5, nullif($6, ''), $7, $8, $9, $10, $11, $12)`

	// SQLSetRequestState moves a request ($1 entity id, $2 record id) to
	// state $3 at proposal version $4, at time $5; it must affect one row.
	SQLSetRequestState = `UPDATE registrum.requests SET state = $3, proposal_version = $4, updated_at = $5 WHERE entity_id = $1 AND record_id = $2`

	// SQLStoreApplication stores a request's application receipt: $1
	// application id, $2 entity id, $3 record id, $4 proposal version, $5
	// effect digest, $6 applier reference, $7 applier actor, $8 reason, $9
	// whether a reason was given, $10 results (JSON), $11 time.
	SQLStoreApplication = `INSERT INTO registrum.request_applications
    (application_id, entity_id, record_id, proposal_version, effect_digest, applier_reference, applier_actor, reason, reason_present, results, applied_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

	// SQLStoreChunk stores an ingestion chunk's receipt: $1 run id, $2
	// chunk index, $3 chunk digest, $4 prefix digest, $5 item count, $6
	// end item, $7 commit id, $8 receipt, $9 time.
	SQLStoreChunk = `INSERT INTO registrum.ingestion_run_chunks
    (run_id, chunk_index, chunk_digest, prefix_digest, item_count, end_item, commit_id, receipt, created_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`

	// SQLAdvanceRun advances an open ingestion run ($1) past chunk $2: $3
	// committed items, $4 committed prefix digest, $5 status (open or
	// complete), $6 time. It affects no row when the run's checkpoint is
	// not at chunk $2.
	SQLAdvanceRun = `UPDATE registrum.ingestion_runs SET next_chunk_index = $2 + 1, committed_items = $3,
    committed_prefix_digest = $4, status = $5, last_attempt_outcome = 'committed', last_attempt_chunk_index = $2, updated_at = $6
    WHERE run_id = $1 AND next_chunk_index = $2 AND status = 'open'`
)

// SQLCreateRecord is the INSERT of a new live record of e at revision 1
// that sets fields, in their order: $1 record id, $2 time (created and
// updated), $3 package revision, then one parameter per field from $4.
func SQLCreateRecord(e *model.Entity, fields []*model.Field) string {
	cols := []string{layout.ColRecordID, layout.ColRevision, layout.ColLifecycle, layout.ColCreatedAt, layout.ColUpdatedAt, layout.ColPackageRevision}
	ph := []string{"$1", "1", "'" + layout.LifecycleActive + "'", "$2", "$2", "$3"}
	for i, f := range fields {
		cols = append(cols, layout.Column(f))
		ph = append(ph, "$"+strconv.Itoa(4+i))
	}
	return "INSERT INTO " + layout.Table(e) + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(ph, ", ") + ")"
}

// SQLTouchRecord is the UPDATE that moves a live record of e to its next
// revision with unchanged values: $1 record id, $2 the revision expected,
// $3 time, $4 package revision. It affects no row when the record is not
// live at revision $2.
func SQLTouchRecord(e *model.Entity) string {
	return "UPDATE " + layout.Table(e) + " SET " + layout.ColRevision + " = " + layout.ColRevision + " + 1, " +
		layout.ColUpdatedAt + " = $3, " + layout.ColPackageRevision + " = $4 WHERE " + layout.ColRecordID + " = $1 AND " +
		layout.ColRevision + " = $2 AND " + layout.ColLifecycle + " = '" + layout.LifecycleActive + "'"
}
