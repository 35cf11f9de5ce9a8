// Package audit is the token issuer's keyed, append-only audit chain.
//
// Every issuer decision (a released token or a denial) becomes one line of a
// JSONL file. Each line is a canonical JSON object (RFC 8785) that carries the
// decision, the segment sequence and line number it was written at, the MAC of
// the previous record, and its own HMAC-SHA-256 under a key derived from the
// operator's hash key. Removing, reordering, truncating or editing any record
// therefore breaks the chain at a point [Verify] names by segment and line.
//
// A [Writer] is the single owner of a chain: [Open] takes an exclusive lock
// beside the chain file for the writer's life, refuses files and folders that
// group or other can read, verifies the active segment and continues the chain
// from its last record. [Writer.Append] returns only once the record is on
// disk (file and folder fsynced); concurrent appends are group-committed so
// that one fsync serves a whole batch. Any write, fsync or file-identity
// failure poisons the writer: that append and all later ones fail.
//
// When an append would make the active segment exceed
// [Config.MaximumFileBytes], the segment is sealed by renaming it to
// Path + "." + an eight-digit sequence number and a fresh active segment is
// opened; the chain continues across segments. Sealed segments are never
// deleted.
//
// Records are value-free: they hold operation ids, token ids, key ids,
// expiry, delegation status, value-free denial categories and keyed
// pseudonyms ([Writer.Pseudonym]), never raw client ids, principals, actors,
// subjects, assertions or tokens.
//
// The line format, durability and recovery rules are written down in
// docs/issuer-audit.md.
package audit
