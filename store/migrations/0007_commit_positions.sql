-- Commit positions (docs/decisions/snapshot-reads.md): a total order of the
-- committed write transactions, for :snapshot reads. A position is taken as
-- the last step of a write transaction under a transaction-scoped advisory
-- lock, so positions are visible in commit order.
CREATE TABLE registrum.commits (
    position  bigint PRIMARY KEY CHECK (position > 0),
    commit_id uuid   NOT NULL UNIQUE
);
INSERT INTO registrum.commits (position, commit_id)
SELECT row_number() OVER (ORDER BY min(created_at), commit_id), commit_id
FROM registrum.revisions GROUP BY commit_id;
