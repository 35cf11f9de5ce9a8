-- The change context a batch shares (kind, reason code and text, source
-- references), kept with every revision the batch wrote.
ALTER TABLE registrum.revisions ADD COLUMN change_context jsonb;
