package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// TestHistoryEraseOverCLIAndHTTP imports items with `registrum ingest`,
// patches one, and erases its revision written by the import with
// `registrum history erase --before <the patch's commit>`: the import
// chunk's receipt then answers 410 ingestion.receipt_erased (the other
// chunk's stays), every snapshot at or after the import's commit answers
// 503 source.unavailable (the patch's and a fresh capture included) while
// one from before it still reads, revision reads leave the erased revision
// out, and the audit trail records the erasure under the printed trace.
func TestHistoryEraseOverCLIAndHTTP(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", "testdata/history", "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	dsn := storetest.NewDatabase(t)
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"stock:write"}}, nil)
	token := is.Token(t, issuertest.StandardClientID)
	bearer = token
	t.Cleanup(func() { bearer = "" })
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte(token+"\n"), 0o600)
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), bytes.Repeat([]byte{9}, 32), 0o600)
	cfg := fmt.Sprintf("version: 1\ndatabase: {url: %q}\npackage: %s\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n%s",
		dsn, pkg, is.HostAuthentication())
	_, base := startHost(t, cfg, dir)
	cfgPath := filepath.Join(dir, "host-"+base[strings.LastIndex(base, ":")+1:]+".yaml") // the host's own configuration
	db, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())

	snapshotOf := func(body string) string {
		t.Helper()
		var env struct {
			Data struct {
				Snapshot string `json:"snapshot"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &env); err != nil || env.Data.Snapshot == "" {
			t.Fatalf("no data.snapshot in %s", body)
		}
		return env.Data.Snapshot
	}
	s, _, b := call(t, "POST", base+"/v1/records/items", "application/json", `{"data":{"code":"BEFORE"}}`)
	if s != 201 {
		t.Fatalf("create: %d %s", s, b)
	}
	beforeImport := snapshotOf(b)

	file := filepath.Join(dir, "items.jsonl")
	os.WriteFile(file, []byte(`{"operation":"create","data":{"code":"K-0","qty":0}}
{"operation":"create","data":{"code":"K-1","qty":1}}
{"operation":"create","data":{"code":"K-2","qty":2}}
{"operation":"create","data":{"code":"K-3","qty":3}}
`), 0o600)
	if out, err := exec.Command(binary, "ingest", "--url", base, "--route", "items", "--profile", "clerk", "--token-file", tokenFile, file).CombinedOutput(); err != nil {
		t.Fatalf("ingest: %v\n%s", err, out)
	}
	var runID, id string
	if err := db.QueryRow(context.Background(), `SELECT run_id::text FROM registrum.ingestion_runs`).Scan(&runID); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(context.Background(), `SELECT record_id::text FROM registrum_data.e_item WHERE f_code = 'K-0'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	receipt := func(chunk int) (int, string) {
		s, _, b := call(t, "GET", fmt.Sprintf("%s/v1/records/items/ingestion-runs/%s/chunks/%d/receipt", base, runID, chunk), "", "")
		return s, b
	}
	if s, b := receipt(0); s != 200 {
		t.Fatalf("receipt before the erasure: %d %s", s, b)
	}
	s, h, b := call(t, "GET", base+"/v1/records/items/"+id, "", "")
	if s != 200 {
		t.Fatalf("read: %d %s", s, b)
	}
	s, _, b = call(t, "PATCH", base+"/v1/records/items/"+id, "application/json-patch+json", `[{"op":"replace","path":"/data/qty","value":7}]`, "If-Match", h.Get("ETag"))
	if s != 200 {
		t.Fatalf("patch: %d %s", s, b)
	}
	afterPatch := snapshotOf(b)
	// A record created under an Idempotency-Key and patched: the stored
	// answer of its create holds the values the erasure below removes.
	keyed := `{"data":{"code":"KEYED","qty":5}}`
	s, kh, kb := call(t, "POST", base+"/v1/records/items", "application/json", keyed, "Idempotency-Key", "create-keyed")
	if s != 201 || !strings.Contains(kb, `"qty":5`) {
		t.Fatalf("keyed create: %d %s", s, kb)
	}
	keyedID := kh.Get("Location")[strings.LastIndex(kh.Get("Location"), "/")+1:]
	if s, _, b := call(t, "PATCH", base+"/v1/records/items/"+keyedID, "application/json-patch+json", `[{"op":"replace","path":"/data/qty","value":6}]`, "If-Match", kh.Get("ETag")); s != 200 {
		t.Fatalf("keyed patch: %d %s", s, b)
	}
	if s, _, b := call(t, "POST", base+"/v1/records/items", "application/json", keyed, "Idempotency-Key", "create-keyed"); s != 201 || b != kb {
		t.Fatalf("keyed replay before the erasure: %d %s", s, b)
	}
	snapshot := func(tok string) (int, string) {
		q := ""
		if tok != "" {
			q = "?snapshot=" + url.QueryEscape(tok)
		}
		s, _, b := call(t, "GET", base+"/v1/records/items:snapshot"+q, "", "")
		return s, b
	}
	for _, tok := range []string{beforeImport, afterPatch, ""} {
		if s, b := snapshot(tok); s != 200 {
			t.Fatalf("snapshot %q before the erasure: %d %s", tok, s, b)
		}
	}

	// The operator lists the record's revisions and erases those before the patch.
	hist := func(args ...string) (string, error) {
		out, err := exec.Command(binary, append([]string{"history"}, args...)...).CombinedOutput()
		return string(out), err
	}
	list, err := hist("list", "--config", cfgPath, "--entity", "item", "--record", id)
	if err != nil {
		t.Fatalf("history list: %v\n%s", err, list)
	}
	m := regexp.MustCompile(`(?m)^2 active ([0-9a-f-]{36}) `).FindStringSubmatch(list)
	if m == nil || !strings.HasPrefix(list, "1 active ") {
		t.Fatalf("history list:\n%s", list)
	}
	out, err := hist("erase", "--config", cfgPath, "--entity", "item", "--record", id, "--before", m[1])
	trace := regexp.MustCompile(`audit trace ([0-9a-f]{32})`).FindStringSubmatch(out)
	if err != nil || !strings.Contains(out, "erased 1 revision(s) of item/"+id+" before revision 2; 1 ingestion receipt(s) erased") || trace == nil {
		t.Fatalf("history erase: %v\n%s", err, out)
	}

	if s, b := receipt(0); s != 410 || !strings.Contains(b, "ingestion.receipt_erased") {
		t.Errorf("the erased chunk's receipt: %d %s", s, b)
	}
	if s, b := receipt(1); s != 200 {
		t.Errorf("the other chunk's receipt: %d %s", s, b)
	}
	if s, b := snapshot(beforeImport); s != 200 || !strings.Contains(b, "BEFORE") || strings.Contains(b, "K-0") {
		t.Errorf("a snapshot before the erased commit: %d %s", s, b)
	}
	for name, tok := range map[string]string{"after the patch": afterPatch, "captured now": ""} {
		if s, b := snapshot(tok); s != 503 || !strings.Contains(b, "source.unavailable") {
			t.Errorf("a snapshot %s: %d %s", name, s, b)
		}
	}
	s, _, b = call(t, "GET", base+"/v1/records/items/"+id+"/revisions", "", "")
	if s != 200 || strings.Contains(b, `"revisionIdentifier":"1"`) || !strings.Contains(b, `"revisionIdentifier":"2"`) {
		t.Errorf("revisions after the erasure: %d %s", s, b)
	}
	if s, _, b := call(t, "GET", base+"/v1/records/items/"+id+"/revisions/1", "", ""); s != 404 {
		t.Errorf("the erased revision: %d %s", s, b)
	}
	if s, _, b := call(t, "GET", base+"/v1/records/items/"+id, "", ""); s != 200 || !strings.Contains(b, `"qty":7`) {
		t.Errorf("the current state after the erasure: %d %s", s, b)
	}
	// The audit entry names the record by its keyed reference, as the
	// entries of its writes do.
	rc, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	root, err := rc.HostKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := records.DeriveKeys(root)
	if err != nil {
		t.Fatal(err)
	}
	var audited, written int
	db.QueryRow(context.Background(), `SELECT count(*) FROM registrum.audit WHERE operation = 'history.erase' AND trace_id = $1 AND record_reference = $2`,
		trace[1], keys.RecordReference("item", id)).Scan(&audited)
	db.QueryRow(context.Background(), `SELECT count(*) FROM registrum.audit WHERE operation <> 'history.erase' AND record_reference = $1`,
		keys.RecordReference("item", id)).Scan(&written)
	if audited != 1 || written == 0 {
		t.Errorf("audit entries of the erasure naming the record: %d (entries of its writes: %d)", audited, written)
	}
	list, _ = hist("list", "--config", cfgPath, "--entity", "item", "--record", id)
	if !regexp.MustCompile(`(?m)^1 active [0-9a-f-]{36} \S+ erased$`).MatchString(list) {
		t.Errorf("history list after the erasure:\n%s", list)
	}

	// Erasing the keyed record's first revision erases the stored answer
	// of its create: a replay of the key no longer returns the values.
	klist, err := hist("list", "--config", cfgPath, "--entity", "item", "--record", keyedID)
	km := regexp.MustCompile(`(?m)^2 active ([0-9a-f-]{36}) `).FindStringSubmatch(klist)
	if err != nil || km == nil {
		t.Fatalf("history list of the keyed record: %v\n%s", err, klist)
	}
	if out, err := hist("erase", "--config", cfgPath, "--entity", "item", "--record", keyedID, "--before", km[1]); err != nil || !strings.Contains(out, "; 1 stored answer(s) erased;") {
		t.Fatalf("erase of the keyed record: %v\n%s", err, out)
	}
	if s, _, b := call(t, "POST", base+"/v1/records/items", "application/json", keyed, "Idempotency-Key", "create-keyed"); s != 409 ||
		!strings.Contains(b, "idempotency.outcome_erased") || strings.Contains(b, "KEYED") {
		t.Errorf("keyed replay after the erasure: %d %s", s, b)
	}
	var keyedRecords int
	db.QueryRow(context.Background(), `SELECT count(*) FROM registrum_data.e_item WHERE f_code = 'KEYED'`).Scan(&keyedRecords)
	if keyedRecords != 1 {
		t.Errorf("the replay after the erasure wrote again: %d records", keyedRecords)
	}

	// Nothing left to erase, an unknown commit, a bad record id: refused.
	if out, err := hist("erase", "--config", cfgPath, "--entity", "item", "--record", id, "--before", m[1]); err == nil || !strings.Contains(out, "no retained revision before") {
		t.Errorf("erase again: %v %s", err, out)
	}
	if out, err := hist("erase", "--config", cfgPath, "--entity", "item", "--record", id, "--before", "0b0e5f46-8c1c-4d8e-9d55-2f0e3c2a9a11"); err == nil || !strings.Contains(out, "wrote no revision") {
		t.Errorf("erase before an unknown commit: %v %s", err, out)
	}
	if out, err := hist("erase", "--config", cfgPath, "--entity", "item", "--record", "x", "--before", m[1]); err == nil || !strings.Contains(out, "not a record id") {
		t.Errorf("erase with a bad record id: %v %s", err, out)
	}
}
