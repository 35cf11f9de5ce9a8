package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// TestCompileAndWriteRefuseTheSameDate shows, through the binary, that the
// compiler and the host judge a value with one checker: an impossible date
// is refused by `registrum compile` as a constraint literal and by an HTTP
// write as a field value.
func TestCompileAndWriteRefuseTheSameDate(t *testing.T) {
	raw, err := os.ReadFile("../../project/testdata/minimal/registry.yaml")
	if err != nil {
		t.Fatal(err)
	}
	field := "      - {id: surveyed, type: boolean}\n"
	withDate := strings.Replace(string(raw), field, field+"      - {id: surveyed-on, type: date}\n", 1)
	withDate = strings.Replace(withDate, "[parcel-code, area, surveyed]", "[parcel-code, area, surveyed, surveyed-on]", 2)
	constraint := "      - {kind: unique, fields: [parcel-code]}\n"
	withLiteral := strings.Replace(withDate, constraint, constraint+"      - {kind: check, field: surveyed-on, operator: le, value: \"2026-02-31\"}\n", 1)
	if withDate == string(raw) || withLiteral == withDate {
		t.Fatal("fixture changed shape")
	}
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "registry.yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// registrum compile refuses the literal.
	out, err := exec.Command(binary, "compile", write("literal", withLiteral), "--check").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "not a valid calendar date [constraint.check]") {
		t.Fatalf("compile with the literal: %v\n%s", err, out)
	}

	// The host refuses the same value in a write.
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", write("plain", withDate), "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"parcels:write"}}, nil)
	host := startServe(t, dir, pkg, storetest.NewDatabase(t), is.HostAuthentication())
	bearer = is.Token(t, issuertest.StandardClientID)
	t.Cleanup(func() { bearer = "" })
	s, _, b := call(t, "POST", host+"/v1/records/parcels", "application/json", `{"data":{"parcelCode":"P-1","surveyedOn":"2026-02-31"}}`)
	var problem struct{ Code string }
	if err := json.Unmarshal([]byte(b), &problem); err != nil || s != 400 || !strings.Contains(b, "not a valid calendar date") {
		t.Fatalf("write of 2026-02-31: %d %s (code %q)", s, b, problem.Code)
	}
	if s, _, b := call(t, "POST", host+"/v1/records/parcels", "application/json", `{"data":{"parcelCode":"P-2","surveyedOn":"2026-02-28"}}`); s != 201 {
		t.Fatalf("write of 2026-02-28: %d %s", s, b)
	}
}
