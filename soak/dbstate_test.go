package soak

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The harness reads the database directly, as an auditor would, so that
// what it checks does not go through the code under test. These are
// read-only statements over the engine's own tables (store/migrations) and
// the current-state tables (schema registrum_data, columns record_id,
// revision, lifecycle: store/layout).

// readDB reads the state the invariants are checked on.
func readDB(ctx context.Context, dsn string) (DB, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return DB{}, fmt.Errorf("soak: connect: %w", err)
	}
	defer conn.Close(ctx)
	db := DB{Current: map[RecordKey]Current{}}
	rows, _ := conn.Query(ctx, `SELECT entity_id, record_id::text, revision, lifecycle, data, commit_id::text FROM registrum.revisions`)
	for rows.Next() {
		var r Revision
		var data []byte
		if err := rows.Scan(&r.Entity, &r.Record, &r.Revision, &r.Lifecycle, &data, &r.Commit); err != nil {
			return db, fmt.Errorf("soak: read revisions: %w", err)
		}
		if err := json.Unmarshal(data, &r.Data); err != nil {
			return db, fmt.Errorf("soak: revision data: %w", err)
		}
		db.Revisions = append(db.Revisions, r)
	}
	if err := rows.Err(); err != nil {
		return db, fmt.Errorf("soak: read revisions: %w", err)
	}
	var tables []string
	rows, _ = conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'registrum_data' AND table_name LIKE 'e\_%' ORDER BY 1`)
	if tables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return db, fmt.Errorf("soak: list entity tables: %w", err)
	}
	for _, tbl := range tables {
		entity := tbl[2:]
		rows, _ := conn.Query(ctx, `SELECT record_id::text, revision, lifecycle FROM registrum_data.`+pgx.Identifier{tbl}.Sanitize())
		for rows.Next() {
			var id string
			var c Current
			if err := rows.Scan(&id, &c.Revision, &c.Lifecycle); err != nil {
				return db, fmt.Errorf("soak: read %s: %w", tbl, err)
			}
			db.Current[RecordKey{entity, id}] = c
		}
		if err := rows.Err(); err != nil {
			return db, fmt.Errorf("soak: read %s: %w", tbl, err)
		}
	}
	rows, _ = conn.Query(ctx, `SELECT operation, outcome, entity_id, coalesce(revision, 0), trace_id FROM registrum.audit`)
	for rows.Next() {
		var a AuditRow
		if err := rows.Scan(&a.Operation, &a.Outcome, &a.Entity, &a.Revision, &a.TraceID); err != nil {
			return db, fmt.Errorf("soak: read audit: %w", err)
		}
		db.Audit = append(db.Audit, a)
	}
	if err := rows.Err(); err != nil {
		return db, fmt.Errorf("soak: read audit: %w", err)
	}
	rows, _ = conn.Query(ctx, `SELECT d.event_id::text, d.hook_id, d.entity_id, d.handler_kind, d.state, d.generation, d.attempt,
	    (SELECT count(*) FROM registrum.event_delivery_attempts a
	      WHERE a.delivery_id = d.delivery_id AND a.generation = d.generation AND a.attempt < d.attempt AND a.status_code IS NOT NULL)
	  FROM registrum.event_deliveries d`)
	for rows.Next() {
		var d EventDelivery
		if err := rows.Scan(&d.EventID, &d.Hook, &d.Entity, &d.Handler, &d.State, &d.Generation, &d.Attempt, &d.AnsweredBefore); err != nil {
			return db, fmt.Errorf("soak: read deliveries: %w", err)
		}
		db.Deliveries = append(db.Deliveries, d)
	}
	if err := rows.Err(); err != nil {
		return db, fmt.Errorf("soak: read deliveries: %w", err)
	}
	rows, _ = conn.Query(ctx, `SELECT id, kind, state::text, coalesce(errors[array_upper(errors, 1)]->>'error', '') FROM registrum_jobs.river_job`)
	for rows.Next() {
		var j Job
		if err := rows.Scan(&j.ID, &j.Kind, &j.State, &j.Error); err != nil {
			return db, fmt.Errorf("soak: read jobs: %w", err)
		}
		db.Jobs = append(db.Jobs, j)
	}
	if err := rows.Err(); err != nil {
		return db, fmt.Errorf("soak: read jobs: %w", err)
	}
	// The automatic application's own state (migration 0014), when the
	// schema has it.
	var auto bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('registrum.request_auto_applications') IS NOT NULL`).Scan(&auto); err != nil {
		return db, fmt.Errorf("soak: look up request_auto_applications: %w", err)
	}
	autoCols, autoJoin := `'', ''`, ``
	if auto {
		autoCols = `coalesce(a.state, ''), coalesce(a.attention, '')`
		autoJoin = ` LEFT JOIN registrum.request_auto_applications a
      ON a.entity_id = r.entity_id AND a.record_id = r.record_id AND a.proposal_version = r.proposal_version`
	}
	rows, _ = conn.Query(ctx, `SELECT r.entity_id, r.record_id::text, r.state, coalesce(s.state, ''), coalesce(s.delivery_state, ''), coalesce(s.attention, ''), `+autoCols+`
    FROM registrum.requests r LEFT JOIN registrum.review_submissions s
      ON s.entity_id = r.entity_id AND s.record_id = r.record_id AND s.proposal_version = r.proposal_version`+autoJoin)
	for rows.Next() {
		var q Request
		if err := rows.Scan(&q.Entity, &q.Record, &q.State, &q.Submission, &q.Delivery, &q.Attention, &q.Application, &q.ApplicationAttention); err != nil {
			return db, fmt.Errorf("soak: read requests: %w", err)
		}
		db.Requests = append(db.Requests, q)
	}
	if err := rows.Err(); err != nil {
		return db, fmt.Errorf("soak: read requests: %w", err)
	}
	rows, _ = conn.Query(ctx, `SELECT sha256, content_type, verdict, attempts FROM registrum.attachment_verifications`)
	for rows.Next() {
		var v Verification
		if err := rows.Scan(&v.SHA256, &v.ContentType, &v.Verdict, &v.Attempts); err != nil {
			return db, fmt.Errorf("soak: read verifications: %w", err)
		}
		db.Verifications = append(db.Verifications, v)
	}
	if err := rows.Err(); err != nil {
		return db, fmt.Errorf("soak: read verifications: %w", err)
	}
	rows, _ = conn.Query(ctx, `SELECT run_id::text, entity_id, status, item_count, chunk_count, committed_items, next_chunk_index FROM registrum.ingestion_runs`)
	for rows.Next() {
		var r IngestRun
		if err := rows.Scan(&r.RunID, &r.Entity, &r.Status, &r.ItemCount, &r.ChunkCount, &r.CommittedItems, &r.NextChunk); err != nil {
			return db, fmt.Errorf("soak: read ingestion runs: %w", err)
		}
		db.IngestRuns = append(db.IngestRuns, r)
	}
	if err := rows.Err(); err != nil {
		return db, fmt.Errorf("soak: read ingestion runs: %w", err)
	}
	rows, _ = conn.Query(ctx, `SELECT run_id::text, commit_id::text, chunk_index, item_count, end_item FROM registrum.ingestion_run_chunks`)
	for rows.Next() {
		var c IngestChunk
		if err := rows.Scan(&c.RunID, &c.Commit, &c.Index, &c.Items, &c.EndItem); err != nil {
			return db, fmt.Errorf("soak: read ingestion chunks: %w", err)
		}
		db.IngestChunks = append(db.IngestChunks, c)
	}
	if err := rows.Err(); err != nil {
		return db, fmt.Errorf("soak: read ingestion chunks: %w", err)
	}
	return db, nil
}

// unsettled counts what the end of the run waits for: deliveries not yet
// ended, jobs not yet finished (the periodic reaper aside) and attachment
// verdicts still pending.
func unsettled(ctx context.Context, dsn string) (deliveries, jobs, verifications int, err error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("soak: connect: %w", err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM registrum.event_deliveries WHERE state IN ('pending', 'leased')`).Scan(&deliveries); err != nil {
		return 0, 0, 0, fmt.Errorf("soak: count deliveries: %w", err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM registrum_jobs.river_job WHERE state NOT IN ('completed', 'cancelled', 'discarded') AND kind <> $1`, kindReap).Scan(&jobs); err != nil {
		return 0, 0, 0, fmt.Errorf("soak: count jobs: %w", err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM registrum.attachment_verifications WHERE verdict = 'pending'`).Scan(&verifications); err != nil {
		return 0, 0, 0, fmt.Errorf("soak: count verifications: %w", err)
	}
	return deliveries, jobs, verifications, nil
}

// breakAcknowledged deletes, for the harness's closing self-check, the
// journal row of one acknowledged revision and the audit row of another,
// as a host that acknowledged before commit (or lost a write) would leave
// them.
func breakAcknowledged(ctx context.Context, dsn string, rev Written, auditTrace string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("soak: connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DELETE FROM registrum.revisions WHERE entity_id = $1 AND record_id = $2 AND revision = $3`, rev.Entity, rev.Record, rev.Revision); err != nil {
		return fmt.Errorf("soak: delete a revision: %w", err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM registrum.audit WHERE trace_id = $1`, auditTrace); err != nil {
		return fmt.Errorf("soak: delete an audit row: %w", err)
	}
	return nil
}

// historyTag reads the tag that binds snapshot tokens to the database's
// history (registrum.history_state), in hex, with the recorded origin.
func historyTag(ctx context.Context, dsn string) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", fmt.Errorf("soak: connect: %w", err)
	}
	defer conn.Close(ctx)
	var tag string
	if err := conn.QueryRow(ctx, `SELECT encode(tag, 'hex') || ' ' || coalesce(origin, '') FROM registrum.history_state`).Scan(&tag); err != nil {
		return "", fmt.Errorf("soak: read the history tag: %w", err)
	}
	return tag, nil
}
