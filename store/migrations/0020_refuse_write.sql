-- registrum.refuse_write raises a write's refusal: the error code and
-- message it is given. A write's snapshot (store/snapshot.go,
-- writeSnapshotOf) is read by SQL that calls it only to refuse (RGPK1,
-- RGSN1, as registrum.write_snapshot raised them), so that the snapshot of
-- every write is read without a PL/pgSQL call (about 14 µs of execution
-- a write). registrum.write_snapshot stays for hosts of earlier releases
-- during a rolling upgrade.
CREATE FUNCTION registrum.refuse_write(code text, message text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message;
END
$$;
