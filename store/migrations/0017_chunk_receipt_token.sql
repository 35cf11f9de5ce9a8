-- An ingestion chunk reads its snapshot in the round trip that carries its
-- COMMIT (store/snapshot.go, sqlStoreChunkWithSnapshot): its receipt is
-- stored without the snapshot token, which is made again on every read from
-- what the token is made of, stored beside it: where the token goes in the
-- receipt ("at"), the transaction's own id ("own"), the snapshot ("of") and
-- the history tag in hex ("tag"), as write_snapshot answered them. Chunks
-- committed before this migration store the whole receipt and no token.
ALTER TABLE registrum.ingestion_run_chunks ADD COLUMN receipt_token jsonb;
