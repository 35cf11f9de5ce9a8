package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/internal/binarytest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/storetest"
)

// benchCase is row i of the report's source: a case of the example
// registry, the same values for the import and for the COPY baseline.
func benchCase(i int) (number, support, national, district, status string, opened time.Time) {
	supports := []string{"maintenance", "medical-care", "special-needs"}
	districts := []string{"north", "south", "east", "west"}
	return fmt.Sprintf("CS-%08d", i), supports[i%3], fmt.Sprintf("NID-%07d", i), districts[i%4], "open",
		time.Date(2026, time.Month(1+i%12), 1+i%28, 0, 0, 0, 0, time.UTC)
}

// procCPU returns the CPU time (user + system) process pid has used.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ
}

// syscalls counts a process's read and write system calls.
type syscalls struct{ reads, writes int64 }

func (s syscalls) minus(o syscalls) syscalls { return syscalls{s.reads - o.reads, s.writes - o.writes} }

// procSyscalls reads the system calls process pid has made from /proc.
func procSyscalls(t *testing.T, pid int) syscalls {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatal(err)
	}
	var s syscalls
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			s.reads = n
		case "syscw":
			s.writes = n
		}
	}
	return s
}

// clusterCPU is the CPU time (user + system) that the PostgreSQL cluster
// whose postmaster is pid has used: the postmaster and its live children,
// read from /proc. The machine may run other clusters; they are not
// counted. Backends that ended are not counted either, so a phase reads it
// over connections that stay open.
func clusterCPU(t *testing.T, postmaster int) time.Duration {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var total time.Duration
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(p, "/proc/"), "/stat"))
		if ppid, _ := strconv.Atoi(f[1]); ppid == postmaster || pid == postmaster {
			total += procCPU(t, pid)
		}
	}
	return total
}

// postmasterOf returns the pid of the postmaster that serves conn.
func postmasterOf(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var backend int
	if err := conn.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", backend))
	if err != nil {
		t.Fatal(err)
	}
	ppid, _ := strconv.Atoi(strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))[1])
	return ppid
}

// profileImport samples the host's and the importer's stacks with perf
// while the import runs, when REGISTRUM_INGEST_BENCH_PROFILE names a
// folder: the recording is written there as ingest.perf.data (read it with
// perf report -i FILE --comm registrum --no-children, or --children for
// the cumulative view). Go binaries keep frame pointers, so no debug
// information is needed. It returns the function that ends the recording.
func profileImport(t *testing.T, pids ...int) func() {
	t.Helper()
	dir := os.Getenv("REGISTRUM_INGEST_BENCH_PROFILE")
	if dir == "" {
		return func() {}
	}
	list := make([]string, len(pids))
	for i, p := range pids {
		list[i] = strconv.Itoa(p)
	}
	return perfRecord(t, filepath.Join(dir, "ingest.perf.data"), "-F", "997", "-p", strings.Join(list, ","))
}

// perfRecord starts perf record -g writing to file with the target args
// (-p PIDS, -a, a sampling rate) and returns the function that ends the
// recording; it fails the test when perf cannot start.
func perfRecord(t *testing.T, file string, args ...string) func() {
	t.Helper()
	perf := exec.Command("perf", append([]string{"record", "-g", "-o", file}, args...)...)
	var out bytes.Buffer
	perf.Stdout, perf.Stderr = &out, &out
	if err := perf.Start(); err != nil {
		t.Fatalf("the report's profile needs perf (linux-perf): %v", err)
	}
	return func() {
		perf.Process.Signal(os.Interrupt)
		if err := perf.Wait(); err != nil {
			t.Logf("perf record: %v\n%s", err, out.String())
		}
	}
}

// TestIngestReport imports REGISTRUM_INGEST_BENCH_ROWS (default
// 1,000,000) cases of the example registry with `registrum ingest`
// against a running `registrum serve`, and the same rows with
// pgx.CopyFrom into the same table (no revisions, no audit), in one run.
// Opt-in: REGISTRUM_INGEST_BENCH=1.
func TestIngestReport(t *testing.T) {
	if os.Getenv("REGISTRUM_INGEST_BENCH") == "" {
		t.Skip("set REGISTRUM_INGEST_BENCH=1 to run the ingestion report")
	}
	rows := 1_000_000
	if v := os.Getenv("REGISTRUM_INGEST_BENCH_ROWS"); v != "" {
		rows, _ = strconv.Atoi(v)
	}
	dir := t.TempDir()
	// The real binary, built as cmd/registrum's process tests build it.
	binary, err := binarytest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", "../examples/childsupport", "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	p, err := model.Load(pkg)
	if err != nil {
		t.Fatal(err)
	}
	e := p.EntityByRoute("cases")
	dsn := storetest.NewDatabase(t)
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"childsupport:casework"},
		Claims: map[string]string{"purpose": "child-support-administration", "health_districts": "north south east west"}}, nil)
	token := is.Token(t, issuertest.StandardClientID)
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), bytes.Repeat([]byte{9}, 32), 0o600)
	// The example's http verifier needs its credential to open; nothing here
	// uploads, so no scanner runs.
	os.WriteFile(filepath.Join(dir, "secrets", "eicar-scanner-token"), []byte("unused"), 0o600)
	cfg := fmt.Sprintf("version: 1\ndatabase: {url: %q}\npackage: %s\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n%s",
		dsn, pkg, is.HostAuthentication())
	host, base := binarytest.Serve(t, binary, cfg, dir)

	file := writeCases(t, filepath.Join(dir, "cases.jsonl"), 0, rows)

	// The baseline: the same rows copied into the same table, then removed.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	cols := []string{layout.ColumnName(e.Field("case-number")), layout.ColumnName(e.Field("support-type")), layout.ColumnName(e.Field("applicant-national-id")),
		layout.ColumnName(e.Field("health-district")), layout.ColumnName(e.Field("status")), layout.ColumnName(e.Field("opened-on"))}
	now := time.Now().UTC()
	start := time.Now()
	i := 0
	copied, err := conn.CopyFrom(ctx, pgx.Identifier{"registrum_data", layout.TableName(e)},
		append([]string{layout.ColRecordID, layout.ColRevision, layout.ColLifecycle, layout.ColCreatedAt, layout.ColUpdatedAt, layout.ColPackageRevision}, cols...),
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == rows {
				return nil, nil
			}
			n, s, id, d, st, o := benchCase(i)
			i++
			return []any{uuid.Must(uuid.NewV7()), 1, layout.LifecycleActive, now, now, p.Revision, n, s, id, d, st, o}, nil
		}))
	copyTook := time.Since(start)
	if err != nil || copied != int64(rows) {
		t.Fatalf("copy: %d rows, %v", copied, err)
	}
	if _, err := conn.Exec(ctx, "TRUNCATE "+layout.Table(e)+" CASCADE"); err != nil {
		t.Fatal(err)
	}
	conn.Exec(ctx, "VACUUM ANALYZE "+layout.Table(e))

	// The database floor: what the contract's chunks cost the database
	// alone, each variant timed over all rows and then removed.
	fl := &dbFloor{conn: conn, e: e, pkg: p, cols: cols, rows: rows, per: e.Batch.MaximumItems,
		principal: fmt.Sprintf("hmac-sha256:%x", sha256.Sum256([]byte("database floor"))), postmaster: postmasterOf(t, conn)}
	fl.settle(ctx)
	copyFloor := fl.run(ctx, t, true)
	fl.remove(ctx, t, copyFloor)
	batchFloor := fl.run(ctx, t, false)
	fl.remove(ctx, t, batchFloor)
	// The same batches with random (version 4) record ids, as the host
	// gives its records: what the ids' order costs the database.
	fl.randomIDs = true
	randomFloor := fl.run(ctx, t, false)
	fl.remove(ctx, t, randomFloor)

	// The host's warm-up, unmeasured, as the floors' connection is warm
	// (it did the COPY before them): an import of as many rows (at most
	// 100,000), then removed, so that the measured import runs on database
	// connections that have prepared their statements, filled their caches
	// and touched the shared buffers, as a serving host's have. Without it
	// the host's backends paid a page fault at the first touch of each
	// shared buffer they extended a table into: a third of a millisecond
	// per chunk, which the floor's backend no longer paid.
	warm := writeCases(t, filepath.Join(dir, "warm-up.jsonl"), rows, min(rows, 100_000))
	warmUp := exec.Command(binary, "ingest", "--url", base, "--route", "cases", "--profile", "caseworker", warm)
	warmUp.Env = append(os.Environ(), "REGISTRUM_TOKEN="+token)
	if out, err := warmUp.CombinedOutput(); err != nil {
		t.Fatalf("warm-up import: %v\n%s", err, out)
	}
	fl.removeImport(ctx, t)

	cpu0, db0, io0 := procCPU(t, host.Process.Pid), clusterCPU(t, fl.postmaster), procSyscalls(t, host.Process.Pid)
	cmd := exec.Command(binary, "ingest", "--url", base, "--route", "cases", "--profile", "caseworker", file)
	cmd.Env = append(os.Environ(), "REGISTRUM_TOKEN="+token)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("ingest: %v", err)
	}
	stopProfile := profileImport(t, host.Process.Pid, cmd.Process.Pid)
	err = cmd.Wait()
	ingestTook := time.Since(start)
	stopProfile()
	if err != nil {
		t.Fatalf("ingest: %v\n%s", err, out.String())
	}
	hostCPU, dbCPU, hostIO := procCPU(t, host.Process.Pid)-cpu0, clusterCPU(t, fl.postmaster)-db0, procSyscalls(t, host.Process.Pid).minus(io0)
	importerCPU := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	var records int
	conn.QueryRow(ctx, "SELECT count(*) FROM "+layout.Table(e)).Scan(&records)
	if records != rows {
		t.Fatalf("%d records after the import of %d", records, rows)
	}
	summary := regexp.MustCompile(`complete: .*`).FindString(out.String())
	plan := regexp.MustCompile(`planned in [^)]*`).FindString(out.String())
	t.Logf("rows %d", rows)
	t.Logf("registrum ingest: %v, %.0f rows/s (%s; %s)", ingestTook.Round(time.Millisecond), float64(rows)/ingestTook.Seconds(), summary, plan)
	t.Logf("pgx.CopyFrom:     %v, %.0f rows/s", copyTook.Round(time.Millisecond), float64(rows)/copyTook.Seconds())
	chunks := (rows + fl.per - 1) / fl.per
	t.Logf("ratio %.3f; host CPU %v, %.1f µs per row; importer CPU %v, %.1f µs per row; PostgreSQL CPU %v, %.2f ms per chunk (floor: %.2f)",
		copyTook.Seconds()/ingestTook.Seconds(), hostCPU, float64(hostCPU.Microseconds())/float64(rows),
		importerCPU, float64(importerCPU.Microseconds())/float64(rows),
		dbCPU, float64(dbCPU.Microseconds())/1000/float64(chunks), float64(batchFloor.dbCPU.Microseconds())/1000/float64(chunks))
	t.Logf("host system calls per chunk: %.1f writes, %.1f reads (an HTTP answer and each round trip to PostgreSQL are a write each)",
		float64(hostIO.writes)/float64(chunks), float64(hostIO.reads)/float64(chunks))
	for _, f := range []struct {
		name string
		r    floorResult
	}{
		{fmt.Sprintf("COPY per table, one chunk of %d per transaction", fl.per), copyFloor},
		{fmt.Sprintf("multi-row INSERTs, BEGIN to COMMIT in one batch, one chunk of %d per transaction", fl.per), batchFloor},
	} {
		t.Logf("database floor (%s): %v, %.0f rows/s, ratio %.3f to CopyFrom (%.2f ms per chunk, building the rows in Go %v); registrum ingest reaches %.2f of it",
			f.name, f.r.took.Round(time.Millisecond), float64(rows)/f.r.took.Seconds(), copyTook.Seconds()/f.r.took.Seconds(),
			float64(f.r.took.Microseconds())/1000/float64((rows+fl.per-1)/fl.per), f.r.build.Round(time.Millisecond), f.r.took.Seconds()/ingestTook.Seconds())
	}
	t.Logf("the batch floor with random record ids (the host's): %v, %.0f rows/s, %.2f ms per chunk, PostgreSQL CPU %.2f ms per chunk; registrum ingest reaches %.2f of it",
		randomFloor.took.Round(time.Millisecond), float64(rows)/randomFloor.took.Seconds(), float64(randomFloor.took.Microseconds())/1000/float64(chunks),
		float64(randomFloor.dbCPU.Microseconds())/1000/float64(chunks), randomFloor.took.Seconds()/ingestTook.Seconds())
	// What the floor wrote against what the host stores (the import's rows
	// are the only ones left): the mean receipt of a full chunk and the mean
	// revision data, as text and as stored.
	var receipt, receiptStored, data, dataStored int
	if err := conn.QueryRow(ctx, `SELECT avg(octet_length(receipt))::int, avg(pg_column_size(receipt))::int FROM registrum.ingestion_run_chunks
    WHERE item_count = $1`, fl.per).Scan(&receipt, &receiptStored); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT avg(octet_length(data::text))::int, avg(pg_column_size(data))::int FROM registrum.revisions WHERE entity_id = $1`,
		e.ID).Scan(&data, &dataStored); err != nil {
		t.Fatal(err)
	}
	t.Logf("receipt of a chunk of %d: host %d bytes (%d stored), floor %d bytes (%d stored)",
		fl.per, receipt, receiptStored, batchFloor.receipt, batchFloor.receiptStored)
	t.Logf("revision data: host %d bytes (%d stored), floor %d bytes (%d stored)", data, dataStored, batchFloor.data, batchFloor.dataStored)
}

// dbFloor is the database work the ingestion contract requires of a run of
// creates, done with pgx alone (no HTTP, no host, no validation): per chunk,
// strictly one after the other, one transaction that writes the chunk's
// record rows, revision rows and audit rows, its receipt row, the run's
// checkpoint UPDATE and the chunk's audit row (store.Writer.CreateMany and
// CommitChunk). It leaves out the host's reads (LockRun, the replay check,
// the snapshot) and gives the rows the cheapest keys a host could choose
// (UUIDv7 record and commit ids), so it bounds any host from above.
type dbFloor struct {
	conn *pgx.Conn
	e    *model.Entity
	pkg  *model.Package
	// cols are the record table's field columns, as the baseline copies them.
	cols      []string
	rows, per int
	principal string
	// postmaster is the pid of the cluster's postmaster (clusterCPU).
	postmaster int
	// randomIDs gives the records random (version 4) ids, as the host
	// does, instead of time-ordered ones.
	randomIDs bool
}

// floorResult is one timed floor run.
type floorResult struct {
	took time.Duration
	// dbCPU is the CPU time PostgreSQL spent meanwhile.
	dbCPU time.Duration
	// build is the part of took spent building the chunks' rows.
	build     time.Duration
	runID     string
	commitIDs []string
	// The mean sizes, in bytes, of a full chunk's receipt and of a
	// revision's data, as text and as stored.
	receipt, receiptStored, data, dataStored int
}

// floorChunk is one chunk's rows.
type floorChunk struct {
	index, end                int64
	last                      bool
	digest, prefix            string
	commitID, trace           string
	now                       time.Time
	records, revisions, audit [][]any
	receipt                   []byte
}

var (
	floorRevisionCols = []string{"entity_id", "record_id", "revision", "lifecycle", "data", "package_revision", "operation_id", "commit_id", "created_at"}
	floorAuditCols    = []string{"operation", "outcome", "entity_id", "record_reference", "revision", "principal_reference", "trace_id"}
)

// floorInputDigest is the run's input digest, the final chunk's prefix digest.
const floorInputDigest = "f1002f1002f1002f1002f1002f1002f1002f1002f1002f1002f1002f1002f100"

// floorCheckpoint advances the run with CommitChunk's statement
// (store.SQLAdvanceRun) and fails the statement, and so the transaction,
// when the checkpoint moved (a failed cast that names it): a transaction
// sent whole with its COMMIT cannot look at the row count before
// committing.
const floorCheckpoint = `WITH u AS (` + store.SQLAdvanceRun + ` RETURNING 1)
SELECT CASE count(*) WHEN 1 THEN 1 ELSE ('the checkpoint moved: ' || count(*) || ' runs advanced')::int END FROM u`

// floorReceipt stores the chunk's receipt as CommitChunk does.
const floorReceipt = store.SQLStoreChunk

// settle vacuums the tables the floor and the import write and
// checkpoints, so that a phase does not pay for the dead rows and dirty
// buffers of the one before. CHECKPOINT needs a privileged role: it is
// skipped on a server that refuses it.
func (f *dbFloor) settle(ctx context.Context) {
	for _, table := range []string{layout.Table(f.e), "registrum.revisions", "registrum.audit", "registrum.ingestion_run_chunks", "registrum.ingestion_runs"} {
		f.conn.Exec(ctx, "VACUUM ANALYZE "+table)
	}
	f.conn.Exec(ctx, "CHECKPOINT")
}

// run writes all rows through the floor, with CopyFrom per table (viaCopy)
// or one batch of multi-row INSERTs per chunk, and checks the result.
func (f *dbFloor) run(ctx context.Context, t *testing.T, viaCopy bool) floorResult {
	t.Helper()
	chunks := (f.rows + f.per - 1) / f.per
	res := floorResult{runID: uuid.Must(uuid.NewV7()).String(), commitIDs: make([]string, 0, chunks)}
	// The run as records.Service creates one (store.CreateRun): the active
	// binding, the entity's batch bounds, the chunking algorithm and the
	// empty prefix digest; the input's digest and length are stand-ins.
	if _, err := f.conn.Exec(ctx, `INSERT INTO registrum.ingestion_runs
    (run_id, principal_reference, entity_id, operation, profile_id, package_revision, schema_fingerprint,
     input_digest, input_length, item_count, chunk_count, chunk_algorithm_version, maximum_items, maximum_bytes,
     status, committed_prefix_digest, created_at, updated_at)
    VALUES ($1, $2, $3, 'create', 'caseworker', $4, $5, $6, $7, $8, $9, 'greedy-canonical-http-batch-v1', $10, $11, 'open',
     'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', now(), now())`,
		res.runID, f.principal, f.e.ID, f.pkg.Revision, f.pkg.SchemaFingerprint, floorInputDigest, int64(f.rows)*170, int64(f.rows), int64(chunks),
		int64(f.per), f.e.Batch.MaximumBytes); err != nil {
		t.Fatalf("floor run: %v", err)
	}
	recordCols := append([]string{layout.ColRecordID, layout.ColRevision, layout.ColLifecycle, layout.ColCreatedAt, layout.ColUpdatedAt, layout.ColPackageRevision}, f.cols...)
	inserts := map[int][3]string{} // by chunk size: the records, revisions and audit INSERTs
	start, db0 := time.Now(), clusterCPU(t, f.postmaster)
	for index := range chunks {
		built := time.Now()
		c := f.chunk(int64(index), index*f.per, min(f.per, f.rows-index*f.per), chunks)
		res.build += time.Since(built)
		res.commitIDs = append(res.commitIDs, c.commitID)
		var err error
		if viaCopy {
			err = f.commitCopy(ctx, res.runID, c, recordCols)
		} else {
			sql, ok := inserts[len(c.records)]
			if !ok {
				sql = [3]string{
					multiRowInsert(layout.Table(f.e), recordCols, len(c.records)),
					multiRowInsert("registrum.revisions", floorRevisionCols, len(c.revisions)),
					multiRowInsert("registrum.audit", floorAuditCols, len(c.audit)),
				}
				inserts[len(c.records)] = sql
			}
			err = f.commitBatch(ctx, res.runID, c, sql)
		}
		if err != nil {
			t.Fatalf("floor chunk %d: %v", index, err)
		}
	}
	res.took = time.Since(start)
	res.dbCPU = clusterCPU(t, f.postmaster) - db0

	var records, revisions, audit int
	var status string
	var next int64
	if err := f.conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+layout.Table(f.e)+`),
    (SELECT count(*) FROM registrum.revisions WHERE commit_id = ANY($1::uuid[])),
    (SELECT count(*) FROM registrum.audit WHERE principal_reference = $2),
    (SELECT status FROM registrum.ingestion_runs WHERE run_id = $3), (SELECT next_chunk_index FROM registrum.ingestion_runs WHERE run_id = $3)`,
		res.commitIDs, f.principal, res.runID).Scan(&records, &revisions, &audit, &status, &next); err != nil {
		t.Fatal(err)
	}
	if records != f.rows || revisions != f.rows || audit != f.rows+chunks || status != "complete" || next != int64(chunks) {
		t.Fatalf("floor wrote %d records, %d revisions, %d audit entries, run %s at chunk %d; want %d, %d, %d, complete at %d",
			records, revisions, audit, status, next, f.rows, f.rows, f.rows+chunks, chunks)
	}
	if err := f.conn.QueryRow(ctx, `SELECT avg(octet_length(receipt))::int, avg(pg_column_size(receipt))::int FROM registrum.ingestion_run_chunks
    WHERE run_id = $1 AND item_count = $2`, res.runID, f.per).Scan(&res.receipt, &res.receiptStored); err != nil {
		t.Fatal(err)
	}
	if err := f.conn.QueryRow(ctx, `SELECT avg(octet_length(data::text))::int, avg(pg_column_size(data))::int FROM registrum.revisions WHERE commit_id = ANY($1::uuid[])`,
		res.commitIDs).Scan(&res.data, &res.dataStored); err != nil {
		t.Fatal(err)
	}
	return res
}

// remove deletes what a floor run wrote, so that the next phase starts
// from the state the floor found.
func (f *dbFloor) remove(ctx context.Context, t *testing.T, res floorResult) {
	t.Helper()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"TRUNCATE " + layout.Table(f.e) + " CASCADE", nil},
		{"DELETE FROM registrum.revisions WHERE commit_id = ANY($1::uuid[])", []any{res.commitIDs}},
		{"DELETE FROM registrum.audit WHERE principal_reference = $1", []any{f.principal}},
		{"DELETE FROM registrum.ingestion_run_chunks WHERE run_id = $1", []any{res.runID}},
		{"DELETE FROM registrum.ingestion_runs WHERE run_id = $1", []any{res.runID}},
	} {
		if _, err := f.conn.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("remove the floor's rows: %v", err)
		}
	}
	f.settle(ctx)
}

// removeImport deletes what the host's imports wrote (the floors' rows
// are removed already): the entity's records, revisions and audit entries,
// and every run with its chunks.
func (f *dbFloor) removeImport(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"TRUNCATE " + layout.Table(f.e) + " CASCADE", nil},
		{"DELETE FROM registrum.revisions WHERE entity_id = $1", []any{f.e.ID}},
		{"DELETE FROM registrum.audit WHERE entity_id = $1", []any{f.e.ID}},
		{"DELETE FROM registrum.ingestion_run_chunks", nil},
		{"DELETE FROM registrum.ingestion_runs", nil},
	} {
		if _, err := f.conn.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("remove the warm-up import: %v", err)
		}
	}
	f.settle(ctx)
}

// writeCases writes n cases from the first'th on as the JSONL source of an
// import at path, and returns path.
func writeCases(t *testing.T, path string, first, n int) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := first; i < first+n; i++ {
		num, s, id, d, st, o := benchCase(i)
		fmt.Fprintf(w, `{"operation":"create","data":{"caseNumber":%q,"supportType":%q,"applicantNationalId":%q,"healthDistrict":%q,"status":%q,"openedOn":%q}}`+"\n",
			num, s, id, d, st, o.Format(time.DateOnly))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// chunk builds chunk index of chunks, rows [from, from+n): the rows the
// host writes for it, with revision data in the host's canonical JSON
// (authored field ids, sorted) and a receipt shaped as the host's batch
// response.
func (f *dbFloor) chunk(index int64, from, n, chunks int) *floorChunk {
	trace := uuid.New()
	c := &floorChunk{index: index, end: int64(from + n), last: int(index) == chunks-1,
		commitID: uuid.Must(uuid.NewV7()).String(), trace: hex.EncodeToString(trace[:]), now: time.Now().UTC().Truncate(time.Microsecond)}
	sum := sha256.Sum256(strconv.AppendInt([]byte("chunk "), index, 10))
	c.digest = hex.EncodeToString(sum[:])
	sum = sha256.Sum256(strconv.AppendInt([]byte("prefix "), index, 10))
	c.prefix = hex.EncodeToString(sum[:])
	if c.last {
		c.prefix = floorInputDigest
	}
	c.records = make([][]any, n)
	c.revisions = make([][]any, n)
	c.audit = make([][]any, 0, n+1)
	receipt := make([]byte, 0, 64+n*400)
	receipt = append(receipt, `{"snapshot":"s1.`...)
	receipt = base64.RawURLEncoding.AppendEncode(receipt, sum[:16])
	receipt = append(receipt, `","results":[`...)
	for k := range n {
		number, support, national, district, status, opened := benchCase(from + k)
		id := uuid.Must(uuid.NewV7())
		if f.randomIDs {
			id = uuid.New()
		}
		data := make([]byte, 0, 192)
		data = append(data, `{"applicant-national-id":"`...)
		data = append(data, national...)
		data = append(data, `","case-number":"`...)
		data = append(data, number...)
		data = append(data, `","health-district":"`...)
		data = append(data, district...)
		data = append(data, `","opened-on":"`...)
		data = opened.AppendFormat(data, time.DateOnly)
		data = append(data, `","status":"`...)
		data = append(data, status...)
		data = append(data, `","support-type":"`...)
		data = append(data, support...)
		data = append(data, `"}`...)
		c.records[k] = []any{id, int64(1), layout.LifecycleActive, c.now, c.now, f.pkg.Revision, number, support, national, district, status, opened}
		c.revisions[k] = []any{f.e.ID, id, int64(1), layout.LifecycleActive, string(data), f.pkg.Revision, uuid.New(), c.commitID, c.now}
		ref := sha256.Sum256(append([]byte("record"), id[:]...))
		c.audit = append(c.audit, []any{"create", "succeeded", f.e.ID, "hmac-sha256:" + hex.EncodeToString(ref[:]), int64(1), f.principal, c.trace})

		if k > 0 {
			receipt = append(receipt, ',')
		}
		etag := sha256.Sum256(append([]byte("etag"), id[:]...))
		receipt = append(receipt, `{"operation":"create","id":"`...)
		receipt = append(receipt, id.String()...)
		receipt = append(receipt, `","revision":1,"etag":"\"engine-hmac-sha256:`...)
		receipt = hex.AppendEncode(receipt, etag[:])
		receipt = append(receipt, `\"","data":{"applicantNationalId":"`...)
		receipt = append(receipt, national...)
		receipt = append(receipt, `","application":null,"caseNumber":"`...)
		receipt = append(receipt, number...)
		receipt = append(receipt, `","healthDistrict":"`...)
		receipt = append(receipt, district...)
		receipt = append(receipt, `","openedOn":"`...)
		receipt = opened.AppendFormat(receipt, time.DateOnly)
		receipt = append(receipt, `","status":"`...)
		receipt = append(receipt, status...)
		receipt = append(receipt, `","supportType":"`...)
		receipt = append(receipt, support...)
		receipt = append(receipt, `"}}`...)
	}
	c.receipt = append(receipt, "]}"...)
	// The chunk's own audit entry (CommitChunk) travels with its items'.
	c.audit = append(c.audit, []any{"ingestion_chunk", "succeeded", f.e.ID, nil, nil, f.principal, c.trace})
	return c
}

// receiptArgs are the arguments of floorReceipt and floorCheckpoint for c.
func (f *dbFloor) receiptArgs(runID string, c *floorChunk) (receipt, checkpoint []any) {
	status := "open"
	if c.last {
		status = "complete"
	}
	return []any{runID, c.index, c.digest, c.prefix, int64(len(c.records)), c.end, c.commitID, c.receipt, c.now},
		[]any{runID, c.index, c.end, c.prefix, status, c.now}
}

// commitCopy commits c with one CopyFrom per table: BEGIN, the checkpoint
// and the receipt in one round trip, the three COPYs, then COMMIT.
func (f *dbFloor) commitCopy(ctx context.Context, runID string, c *floorChunk, recordCols []string) error {
	receipt, checkpoint := f.receiptArgs(runID, c)
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(floorCheckpoint, checkpoint...)
	b.Queue(floorReceipt, receipt...)
	br := f.conn.SendBatch(ctx, b)
	tx := br.Tx()
	defer tx.Rollback(ctx)
	if err := br.Close(); err != nil {
		return err
	}
	for _, table := range []struct {
		name pgx.Identifier
		cols []string
		rows [][]any
	}{
		{pgx.Identifier{"registrum_data", layout.TableName(f.e)}, recordCols, c.records},
		{pgx.Identifier{"registrum", "revisions"}, floorRevisionCols, c.revisions},
		{pgx.Identifier{"registrum", "audit"}, floorAuditCols, c.audit},
	} {
		n, err := tx.CopyFrom(ctx, table.name, table.cols, pgx.CopyFromRows(table.rows))
		if err != nil {
			return err
		}
		if n != int64(len(table.rows)) {
			return fmt.Errorf("copied %d rows into %s, want %d", n, table.name.Sanitize(), len(table.rows))
		}
	}
	return tx.Commit(ctx)
}

// commitBatch commits c in one round trip: BEGIN, the checkpoint, the
// three multi-row INSERTs (sql) as CreateMany sends them, the receipt and
// COMMIT in one batch.
func (f *dbFloor) commitBatch(ctx context.Context, runID string, c *floorChunk, sql [3]string) error {
	receipt, checkpoint := f.receiptArgs(runID, c)
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(floorCheckpoint, checkpoint...)
	for i, rows := range [][][]any{c.records, c.revisions, c.audit} {
		args := make([]any, 0, len(rows)*len(rows[0]))
		for _, row := range rows {
			args = append(args, row...)
		}
		b.Queue(sql[i], args...)
	}
	b.Queue(floorReceipt, receipt...)
	b.Queue("COMMIT")
	br := f.conn.SendBatch(ctx, b)
	err := br.Close()
	if err != nil {
		br.Tx().Rollback(ctx)
		return err
	}
	if st := f.conn.PgConn().TxStatus(); st != 'I' {
		return fmt.Errorf("the chunk's transaction is still open (%c) after its COMMIT", st)
	}
	return nil
}

// multiRowInsert is INSERT INTO table (cols) VALUES (…), … for n rows.
func multiRowInsert(table string, cols []string, n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + table + " (")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{c}.Sanitize())
	}
	b.WriteString(") VALUES ")
	for r := range n {
		if r > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for k := range cols {
			if k > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(r*len(cols) + k + 1))
		}
		b.WriteByte(')')
	}
	return b.String()
}
