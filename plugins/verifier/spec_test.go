package verifier_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/testslack"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins/verifier"
)

// writePackage writes a package.json with the given verifiers member (and
// members of other owners that must be ignored) into dir.
func writePackage(t *testing.T, dir, verifiers string) string {
	t.Helper()
	doc := `{"packageRevision":"sha256:00","modules":[{"id":"m","engine":"wasm","kind":"planner","path":"m.wasm","sha256":"x","extra":1}],` +
		`"verifiers":` + verifiers + `}`
	path := filepath.Join(dir, "package.json")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const zeroDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

func TestReadPackageChecksEveryMember(t *testing.T) {
	dir := t.TempDir()
	ok := []string{
		`[]`,
		`null`,
		`[{"id":"av","kind":"go-plugin","path":"bin/av","sha256":"` + zeroDigest + `"}]`,
		`[{"id":"scan","kind":"http","endpoint":"https://scan.example/v1","authorizationRef":"secret:file/scan-token","timeoutMilliseconds":100,"maximumBytes":16777216}]`,
		`[{"id":"scan","kind":"http","endpoint":"http://127.0.0.1:8080","authorizationRef":"secret:file/t","timeoutMilliseconds":60000,"maximumBytes":1}]`,
	}
	for _, v := range ok {
		if _, _, err := verifier.ReadPackage(writePackage(t, dir, v)); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	gp := func(extra string) string {
		return `[{"id":"av","kind":"go-plugin","path":"av","sha256":"` + zeroDigest + `"` + extra + `}]`
	}
	bad := map[string]string{
		gp(`,"bogus":1`):                      `unknown field "bogus"`,
		gp(`,"id":"again"`):                   "duplicate",
		gp(`,"endpoint":"https://x.example"`): "verifiers[0]: endpoint: not allowed",
		gp(`,"timeoutMilliseconds":99`):       "verifiers[0]: timeoutMilliseconds: 99",
		gp(`,"timeoutMilliseconds":60001`):    "timeoutMilliseconds: 60001",
		gp(`,"maximumBytes":16777217`):        "maximumBytes: 16777217",
		`[{"id":"av","kind":"go-plugin","path":"/usr/bin/av","sha256":"` + zeroDigest + `"}]`:                                           "path:",
		`[{"id":"av","kind":"go-plugin","path":"../av","sha256":"` + zeroDigest + `"}]`:                                                 "path:",
		`[{"id":"av","kind":"go-plugin","path":"av","sha256":"0000"}]`:                                                                  "verifiers[0]: sha256:",
		`[{"id":"av","kind":"wasm","path":"av","sha256":"` + zeroDigest + `"}]`:                                                         `kind: "wasm"`,
		`[{"id":"Av","kind":"go-plugin","path":"av","sha256":"` + zeroDigest + `"}]`:                                                    "verifiers[0]: id:",
		`[{"id":"s","kind":"http","endpoint":"http://scan.example","authorizationRef":"secret:file/t"}]`:                                "verifiers[0]: endpoint:",
		`[{"id":"s","kind":"http","endpoint":"https://scan.example","authorizationRef":"/etc/token"}]`:                                  "verifiers[0]: authorizationRef:",
		`[{"id":"s","kind":"http","endpoint":"https://scan.example","authorizationRef":"secret:file/t","sha256":"` + zeroDigest + `"}]`: "sha256: not allowed",
		gp(``)[:len(gp(``))-1] + `,{"id":"av","kind":"go-plugin","path":"b","sha256":"` + zeroDigest + `"}]`:                            `verifiers[1].id: "av" already used by verifiers[0]`,
		`{"id":"av"}`: "cannot unmarshal",
	}
	for v, want := range bad {
		_, _, err := verifier.ReadPackage(writePackage(t, dir, v))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", v, err, want)
		}
	}
	if _, _, err := verifier.ReadPackage(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing package: %v", err)
	}
}

// packageWithEICAR lays out a package folder holding the EICAR verifier binary.
func packageWithEICAR(t *testing.T, pinned string, extra ...model.Verifier) string {
	t.Helper()
	dir := t.TempDir()
	path, digest := binary(t, "eicar-verifier")
	if err := os.MkdirAll(filepath.Join(dir, "verifiers"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, path, filepath.Join(dir, "verifiers", "eicar"))
	if pinned == "" {
		pinned = digest
	}
	specs := append([]model.Verifier{{ID: "eicar", Kind: model.VerifierGoPlugin, Path: "verifiers/eicar", SHA256: pinned}}, extra...)
	b, err := json.Marshal(specs)
	if err != nil {
		t.Fatal(err)
	}
	return writePackage(t, dir, string(b))
}

func TestCheckPackagePinsEveryBinary(t *testing.T) {
	if _, err := verifier.CheckPackage(packageWithEICAR(t, ""), ""); err != nil {
		t.Fatalf("good package: %v", err)
	}
	file := packageWithEICAR(t, zeroDigest, model.Verifier{ID: "gone", Kind: model.VerifierGoPlugin, Path: "verifiers/gone", SHA256: zeroDigest})
	_, err := verifier.CheckPackage(file, "")
	if err == nil {
		t.Fatal("mismatching package accepted")
	}
	msg := err.Error()
	for _, want := range []string{"verifiers[0] (eicar)", "digest mismatch", filepath.Join("verifiers", "eicar"), "verifiers[1] (gone)", "no such file"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	// With a secret root, http credentials are checked too.
	cred := credential(t, testCredential)
	file = packageWithEICAR(t, "", model.Verifier{ID: "scan", Kind: model.VerifierHTTP, Endpoint: "https://scan.example", AuthorizationRef: "secret:file/absent"})
	if _, err := verifier.CheckPackage(file, ""); err != nil {
		t.Fatalf("without a secret root: %v", err)
	}
	if _, err := verifier.CheckPackage(file, cred.SecretRoot); err == nil || !strings.Contains(err.Error(), "secret:file/absent") {
		t.Fatalf("absent credential: %v", err)
	}
}

func TestOpenPackageRunsBothKindsBehindOneInterface(t *testing.T) {
	srv := httptest.NewServer(&scanner{t: t, answer: verdictAnswer})
	defer srv.Close()
	cred := credential(t, testCredential)
	file := packageWithEICAR(t, "", model.Verifier{ID: "scan", Kind: model.VerifierHTTP, Endpoint: srv.URL, AuthorizationRef: cred.CredentialRef, TimeoutMilliseconds: 2000})
	set, err := verifier.OpenPackage(file, verifier.OpenOptions{SecretRoot: cred.SecretRoot})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, v := range set {
			v.Close()
		}
	}()
	if len(set) != 2 {
		t.Fatalf("opened %d verifiers", len(set))
	}
	sig := append([]byte("header "), eicar()...)
	for id, v := range set {
		got, err := verify(t, v, 10*time.Second, attachment("evidence", []byte("clean")), bytes.NewReader([]byte("clean")))
		if err != nil || got.Outcome != verifier.Approved {
			t.Fatalf("%s clean: %+v, %v", id, got, err)
		}
		got, err = verify(t, v, 10*time.Second, attachment("evidence", sig), bytes.NewReader(sig))
		if err != nil || got.Outcome != verifier.Rejected {
			t.Fatalf("%s eicar: %+v, %v", id, got, err)
		}
	}
	// A mismatching binary refuses the whole start-up.
	if _, err := verifier.OpenPackage(packageWithEICAR(t, zeroDigest), verifier.OpenOptions{}); err == nil || !strings.Contains(err.Error(), "digest mismatch") {
		t.Fatalf("mismatch: %v", err)
	}
}

func TestOpenByIDAndOpenBinary(t *testing.T) {
	file := packageWithEICAR(t, "")
	v, err := verifier.OpenByID(file, "eicar", verifier.OpenOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if got, err := verify(t, v, 10*time.Second, attachment("evidence", []byte("x")), bytes.NewReader([]byte("x"))); err != nil || got.Outcome != verifier.Approved {
		t.Fatalf("by id: %+v, %v", got, err)
	}
	if _, err := verifier.OpenByID(file, "absent", verifier.OpenOptions{}); err == nil || !strings.Contains(err.Error(), `no verifier "absent"`) {
		t.Fatalf("unknown id: %v", err)
	}
	path, _ := binary(t, "eicar-verifier")
	p, err := verifier.OpenBinary(path, "", time.Second) // pinned to its own digest
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got, err := verify(t, p, 10*time.Second, attachment("evidence", []byte("x")), bytes.NewReader([]byte("x"))); err != nil || got.Outcome != verifier.Approved {
		t.Fatalf("binary: %+v, %v", got, err)
	}
	if _, err := verifier.OpenBinary(path, zeroDigest, time.Second); err == nil {
		t.Fatal("wrong pin accepted")
	}
}

func TestProcessTimeoutFromThePackageBoundsACall(t *testing.T) {
	// 2 s, not less: the same timeout bounds the warm-up call, which a busy
	// two-core machine can slow past a few hundred milliseconds. The
	// caller's own deadline (10 s) lies past the timeout and its slack, so
	// only the package's timeout can end the hanging call in time.
	const timeout = 2 * time.Second
	path, digest := binary(t, "hostile")
	p, err := verifier.NewProcess(verifier.ProcessConfig{ID: "h", Path: path, SHA256: digest, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := verify(t, p, 10*time.Second, attachment("ok", []byte("x")), bytes.NewReader([]byte("x"))); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	v, err := verify(t, p, 3*timeout+testslack.Scheduling, attachment("hang", []byte("x")), bytes.NewReader([]byte("x")))
	wantRetry(t, v, err, verifier.CauseDeadline)
	elapsed := time.Since(start)
	if elapsed < timeout {
		t.Fatalf("the call ended after %v, before the configured %v timeout", elapsed, timeout)
	}
	testslack.Stopped(t, "a hanging verifier call", elapsed, timeout)
}
