package dev

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/project"
	"github.com/registrum/registrum/store/layout"
)

// --event-destinations FILE binds the example's hooks to the operator's
// own receivers instead of the example receiver, with a default instanceId.
func TestOwnEventDestinations(t *testing.T) {
	res, err := project.Compile("../../../../examples/childsupport", project.Options{Fingerprint: layout.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	file := filepath.Join(t.TempDir(), "destinations.yaml")
	block := "eventDestinations:\n  casework-events:\n    url: http://127.0.0.1:9090/registry-events\n    hmacSha256KeyRef: secret:file/my-key\n    classificationCeiling: internal\n    network: loopback\n"
	os.WriteFile(file, []byte(block), 0o600)
	// Its secret is checked before anything starts.
	if _, err := readOwnEvents(Options{EventDestinations: file}, data); err == nil || !strings.Contains(err.Error(), file+":4") ||
		!strings.Contains(err.Error(), "hmacSha256KeyRef") || !strings.Contains(err.Error(), filepath.Join(data, "secrets")) {
		t.Fatalf("a missing secret: %v", err)
	}
	os.MkdirAll(filepath.Join(data, "secrets"), 0o700)
	os.WriteFile(filepath.Join(data, "secrets", "my-key"), make([]byte, 32), 0o600)
	own, err := readOwnEvents(Options{EventDestinations: file}, data)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := startEvents(context.Background(), own, data, res.Package)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.close()
	if ev.srv != nil || !strings.Contains(ev.config, "instanceId: dev\n"+block) {
		t.Fatalf("config %q (example receiver started: %v)", ev.config, ev.srv != nil)
	}
	// Without the flag: the example receiver, on an address kept for the next run.
	ev2, err := startEvents(context.Background(), nil, data, res.Package)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := os.ReadFile(filepath.Join(data, receiverAddrName))
	ev2.close()
	if !strings.Contains(ev2.config, "casework-events:\n    url: http://"+strings.TrimSpace(string(addr))+receiverPath) {
		t.Fatalf("config %q", ev2.config)
	}
	ev3, err := startEvents(context.Background(), nil, data, res.Package)
	if err != nil {
		t.Fatal(err)
	}
	ev3.close()
	if ev3.config != ev2.config {
		t.Fatalf("the example receiver moved: %q then %q", ev2.config, ev3.config)
	}
}
