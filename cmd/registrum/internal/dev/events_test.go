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
	ev, err := startEvents(context.Background(), Options{EventDestinations: file}, data, res.Package)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.close()
	if ev.srv != nil || !strings.Contains(ev.config, "instanceId: dev\n"+block) {
		t.Fatalf("config %q (example receiver started: %v)", ev.config, ev.srv != nil)
	}
	// Without the flag: the example receiver, on an address kept for the next run.
	ev2, err := startEvents(context.Background(), Options{}, data, res.Package)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := os.ReadFile(filepath.Join(data, receiverAddrName))
	ev2.close()
	if !strings.Contains(ev2.config, "casework-events:\n    url: http://"+strings.TrimSpace(string(addr))+receiverPath) {
		t.Fatalf("config %q", ev2.config)
	}
	ev3, err := startEvents(context.Background(), Options{}, data, res.Package)
	if err != nil {
		t.Fatal(err)
	}
	ev3.close()
	if ev3.config != ev2.config {
		t.Fatalf("the example receiver moved: %q then %q", ev2.config, ev3.config)
	}
}
