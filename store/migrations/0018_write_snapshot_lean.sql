-- registrum.write_snapshot (migration 0016) with the same answers and
-- refusals, in fewer statements: every write calls it once, so its cost is
-- paid by every create, patch, action and chunk.
--   * The active package's fingerprint and the history tag are read by one
--     statement instead of two.
--   * The in-progress list is counted only when it could exceed the bound:
--     it holds ids from the snapshot's xmin up to its xmax, so with fewer
--     than max_in_progress of those (and of the ids from xmax up to the
--     transaction's own) it is within the bound without counting. The
--     bounds are read with expressions PL/pgSQL evaluates without running
--     a query.
CREATE OR REPLACE FUNCTION registrum.write_snapshot(fingerprint text, max_in_progress integer,
    OUT own text, OUT snapshot text, OUT tag bytea)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    s pg_snapshot := pg_current_snapshot();
    x xid8 := pg_current_xact_id();
    active text;
    lo bigint := pg_snapshot_xmin(s)::text::bigint;
    hi bigint := pg_snapshot_xmax(s)::text::bigint;
    beyond bigint := greatest(0, x::text::bigint - hi);
    listed bigint;
BEGIN
    SELECT (SELECT p.schema_fingerprint FROM registrum.package_state p),
           (SELECT h.tag FROM registrum.history_state h)
        INTO active, tag;
    IF active IS DISTINCT FROM fingerprint THEN
        RAISE EXCEPTION 'schema fingerprint %', active USING ERRCODE = 'RGPK1';
    END IF;
    IF hi - lo + beyond > max_in_progress THEN
        listed := cardinality(array_remove(array(SELECT pg_snapshot_xip(s)), x));
        IF listed + beyond > max_in_progress THEN
            RAISE EXCEPTION '% transactions in progress, more than %', listed + beyond, max_in_progress
                USING ERRCODE = 'RGSN1';
        END IF;
    END IF;
    own := x::text;
    snapshot := s::text;
END
$$;
