// Package soak is the soak-and-fault harness of the record host (issue #28):
// an opt-in test that runs a private PostgreSQL, an issuer, two `registrum
// serve` hosts and one `registrum worker` as real processes, with a webhook
// receiver, a review authority and an http verifier, all over loopback;
// drives mixed traffic from many clients (immediate actions among it) and
// an ingestion run through the real `registrum ingest`, while it kills
// hosts, the worker and the importer, stops a host with SIGTERM, restarts
// the database and takes the receiver, the authority and the verifier
// down; and then checks, from the database and the receiver rather than
// from what the clients saw, that nothing acknowledged was lost, nothing
// was applied twice, every event arrived once per generation, every
// ingested row is present once and nothing is stuck.
//
//	REGISTRUM_SOAK=60s go test -count=1 -run TestSoak -v -timeout 15m ./soak/
//
// Without REGISTRUM_SOAK the soak is skipped; the invariant checker's own
// test (TestCheckerReportsBrokenState) always runs. See docs/reliability.md.
//
// With REGISTRUM_SOAK_POOLER=pgbouncer the hosts and the worker connect
// through PgBouncer in transaction mode (database.url), and to the cluster
// itself only for what needs a session (database.directUrl); see
// docs/record-host.md, "Connection poolers". A missing pgbouncer skips the
// run unless REGISTRUM_REQUIRE_PGBOUNCER is set.
//
// The package's non-test files hold what the soak decides with, so that it
// can be tested apart from a run: the invariant checker (Check, over a
// State) and the webhook receiver (Receiver).
package soak
