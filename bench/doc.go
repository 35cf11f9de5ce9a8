// Package bench holds Registrum's opt-in performance reports, apart from
// the behaviour tests: each is a test that measures Registrum and a
// baseline in the same run (raw pgx, bare net/http, COPY, the crypto of one
// token request, River's own jobs) and logs the figures with their ratio.
//
// A report runs only when its environment variable is set, and skips
// otherwise, so `go test ./bench/` only compiles them and runs the unit
// tests of their helpers:
//
//	REGISTRUM_HOST_BENCH=1     TestPerformanceReport      record host creates, reads and pages against the store's SQL with pgx and the bare net/http read (needs wrk)
//	REGISTRUM_REQUEST_BENCH=1  TestChangeRequestReport    change requests, their database floor and the thinnest HTTP host
//	REGISTRUM_GIS_BENCH=1      TestSpatialAdapterReport   bbox pages of the spatial adapter (needs wrk)
//	REGISTRUM_ATTACH_BENCH=1   TestAttachmentReport       attachment upload and download
//	REGISTRUM_EVENTS_BENCH=1   TestEventDeliveryReport    webhook event delivery
//	REGISTRUM_SNAPSHOT_BENCH=1 TestSnapshotReadReport     snapshot pages over a large history
//	REGISTRUM_INGEST_BENCH=1   TestIngestReport           `registrum ingest` against COPY and the database floor
//	REGISTRUM_ISSUER_BENCH=1   TestThroughputReport       the token issuer with durable audit, its crypto-only ceiling and the thinnest HTTP issuer
//	REGISTRUM_HISTORY_BENCH=1  TestHistoryPageReport      :as-of and :snapshot pages over a long history against the current-state page (needs wrk)
//
// The commands, figures and their reading are in docs/performance.md. The
// reports start the host, the issuer and the binary as the behaviour tests
// do, through host/hosttest, issuer/issuertest and internal/binarytest;
// the database floors send the store's statements by the names package
// store gives them.
package bench
