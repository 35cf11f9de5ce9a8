package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/store/storetest"
)

// TestRequestsErase runs `registrum requests erase` on a database holding a
// request of two proposals: one proposal, then all, are erased; an entity
// that retains its detail, an unknown request and a bad flag are refused.
func TestRequestsErase(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", "../../host/testdata/requesthistory", "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	dsn := storetest.NewDatabase(t)
	cfg := filepath.Join(dir, "host.yaml")
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), []byte(strings.Repeat("k", 32)), 0o600)
	os.WriteFile(cfg, []byte(fmt.Sprintf("version: 1\nlistener: {address: 127.0.0.1, port: 0}\ndatabase: {url: %q}\npackage: package\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n", dsn)), 0o600)
	if out, err := exec.Command(binary, "migrate", "--config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const id = "6f1c1d7e-0000-4000-8000-000000000001"
	for _, entity := range []string{"note_change", "reviewed_change"} {
		if _, err := conn.Exec(ctx, `INSERT INTO registrum.requests VALUES ($1, $2, 'owner', 'submitted', 2, now())`, entity, id); err != nil {
			t.Fatal(err)
		}
		for v := 1; v <= 2; v++ {
			if _, err := conn.Exec(ctx, `INSERT INTO registrum.request_proposals (entity_id, record_id, proposal_version, record_revision, planner, effect_digest, plan,
    submitter_reference, submitter_actor, submitted_at) VALUES ($1, $2, $3, 1, 'declarative', $4, '{"proposalVersion":1,"writes":[]}', 'owner', 'clerk', now())`,
				entity, id, v, "sha256:"+strings.Repeat("b", 64)); err != nil {
				t.Fatal(err)
			}
		}
	}
	erased := func(entity string) string {
		rows, err := conn.Query(ctx, `SELECT proposal_version, plan IS NULL, detail_erased_at IS NOT NULL FROM registrum.request_proposals
    WHERE entity_id = $1 ORDER BY proposal_version`, entity)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var v int
			var noPlan, stamped bool
			rows.Scan(&v, &noPlan, &stamped)
			out = append(out, fmt.Sprintf("%d:%t/%t", v, noPlan, stamped))
		}
		return strings.Join(out, " ")
	}
	run := func(args ...string) (int, string) {
		cmd := exec.Command(binary, append([]string{"requests", "erase", "--config", cfg}, args...)...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}

	if code, out := run("--entity", "note_change", "--record", id, "--proposal-version", "1"); code != 0 || !strings.Contains(out, "erased the detail of 1 proposal(s)") {
		t.Fatalf("erase proposal 1: exit %d: %s", code, out)
	}
	if got := erased("note_change"); got != "1:true/true 2:false/false" {
		t.Fatalf("after erasing proposal 1: %s", got)
	}
	if code, out := run("--entity", "note_change", "--record", id); code != 0 || !strings.Contains(out, "erased the detail of 1 proposal(s)") {
		t.Fatalf("erase all: exit %d: %s", code, out)
	}
	if got := erased("note_change"); got != "1:true/true 2:true/true" {
		t.Fatalf("after erasing all: %s", got)
	}
	// Refusals leave the database as it was.
	if code, out := run("--entity", "reviewed_change", "--record", id); code != 1 || !strings.Contains(out, "retention mode") {
		t.Fatalf("erase on a retaining entity: exit %d: %s", code, out)
	}
	if got := erased("reviewed_change"); got != "1:false/false 2:false/false" {
		t.Fatalf("a retaining entity after a refused erase: %s", got)
	}
	if code, out := run("--entity", "note_change", "--record", "6f1c1d7e-0000-4000-8000-000000000009"); code != 1 || !strings.Contains(out, "no such request") {
		t.Fatalf("erase an unknown request: exit %d: %s", code, out)
	}
	if code, out := run("--entity", "note_change", "--record", id, "--proposal-version", "7"); code != 1 || !strings.Contains(out, "no such request or proposal") {
		t.Fatalf("erase an unknown proposal: exit %d: %s", code, out)
	}
	if code, out := run("--entity", "child", "--record", id); code != 1 || !strings.Contains(out, "not a request entity") {
		t.Fatalf("erase on a plain entity: exit %d: %s", code, out)
	}
	if code, out := run("--entity", "note_change"); code != 2 {
		t.Fatalf("erase without --record: exit %d: %s", code, out)
	}
}
