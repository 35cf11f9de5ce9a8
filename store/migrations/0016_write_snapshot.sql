-- A write's snapshot (store/snapshot.go, sqlWriteSnapshot): read by one
-- statement that may travel with the write's COMMIT, because it refuses, by
-- raising an error that aborts the transaction, what the host would refuse
-- after reading it:
--   RGPK1  the database serves another package than the writing host's
--          (its schema fingerprint is not fingerprint);
--   RGSN1  the snapshot, seen by the writing transaction, lists more than
--          max_in_progress transactions in progress (a snapshot token of at
--          most 4096 bytes names any state within the bound).
-- It returns the transaction's own id, the snapshot, and the history tag.
-- The in-progress count is the host's: the snapshot's list without the
-- transaction itself, and every id from the snapshot's xmax up to the
-- transaction's own when its own is at or past xmax (those were assigned
-- and had not completed).
CREATE FUNCTION registrum.write_snapshot(fingerprint text, max_in_progress integer,
    OUT own text, OUT snapshot text, OUT tag bytea)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    s pg_snapshot := pg_current_snapshot();
    x xid8 := pg_current_xact_id();
    active text;
    listed bigint;
    beyond bigint;
BEGIN
    SELECT p.schema_fingerprint INTO active FROM registrum.package_state p;
    IF active IS DISTINCT FROM fingerprint THEN
        RAISE EXCEPTION 'schema fingerprint %', active USING ERRCODE = 'RGPK1';
    END IF;
    SELECT count(*) INTO listed FROM pg_snapshot_xip(s) AS i WHERE i <> x;
    beyond := greatest(0, x::text::bigint - pg_snapshot_xmax(s)::text::bigint);
    IF listed + beyond > max_in_progress THEN
        RAISE EXCEPTION '% transactions in progress, more than %', listed + beyond, max_in_progress
            USING ERRCODE = 'RGSN1';
    END IF;
    SELECT h.tag INTO tag FROM registrum.history_state h;
    own := x::text;
    snapshot := s::text;
END
$$;
