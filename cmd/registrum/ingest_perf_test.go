package main

import (
	"bufio"
	"bytes"
	"context"
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
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/model"
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
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", "../../examples/childsupport", "--out", pkg).CombinedOutput(); err != nil {
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
	host, base := startHost(t, cfg, dir)

	file := filepath.Join(dir, "cases.jsonl")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range rows {
		n, s, id, d, st, o := benchCase(i)
		fmt.Fprintf(w, `{"operation":"create","data":{"caseNumber":%q,"supportType":%q,"applicantNationalId":%q,"healthDistrict":%q,"status":%q,"openedOn":%q}}`+"\n",
			n, s, id, d, st, o.Format(time.DateOnly))
	}
	w.Flush()
	f.Close()

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

	cpu0 := procCPU(t, host.Process.Pid)
	cmd := exec.Command(binary, "ingest", "--url", base, "--route", "cases", "--profile", "caseworker", file)
	cmd.Env = append(os.Environ(), "REGISTRUM_TOKEN="+token)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start = time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("ingest: %v\n%s", err, out.String())
	}
	ingestTook := time.Since(start)
	hostCPU := procCPU(t, host.Process.Pid) - cpu0
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
	t.Logf("ratio %.3f; host CPU %v, %.1f µs per row", copyTook.Seconds()/ingestTook.Seconds(), hostCPU, float64(hostCPU.Microseconds())/float64(rows))
}
