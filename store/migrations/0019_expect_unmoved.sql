-- registrum.expect_unmoved fails the statement that calls it when held is
-- false: a write that decided on rows it read before its transaction
-- locks them in the transaction's first round trip with a statement that
-- calls it (Writer.ExpectRequest), so that, when they moved, PostgreSQL
-- skips everything queued after it, COMMIT included, and nothing is
-- written. RGMV1 is the store's ErrMoved.
CREATE FUNCTION registrum.expect_unmoved(held boolean, what text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF held IS NOT TRUE THEN
        RAISE EXCEPTION '% moved since it was read', what USING ERRCODE = 'RGMV1';
    END IF;
    RETURN true;
END
$$;
