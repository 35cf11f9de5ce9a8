-- Package activation (docs/decisions/package-activation.md): the field
-- descriptors (entities, as the compiled package has them) of every package
-- revision the database has served, so that an activation can derive the
-- table changes from the active package, and history written under an
-- older package can be interpreted.
CREATE TABLE registrum.history_schemas (
    package_revision   text        PRIMARY KEY,
    schema_fingerprint text        NOT NULL,
    entities           jsonb       NOT NULL,
    first_active_at    timestamptz NOT NULL DEFAULT now()
);
