package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/store/storetest"
)

// TestDeliveriesReplayByDestinationAndWindow runs the bulk replay as a
// process: a destination that answered 410 leaves dead letters at once;
// --dry-run counts those captured in the window and changes nothing; the
// replay prints the count, then replays them as generation 2, leaving the
// dead letter outside the window; malformed selections exit with code 2.
func TestDeliveriesReplayByDestinationAndWindow(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "package")
	if out, err := exec.Command(binary, "compile", "../../host/testdata/events", "--out", pkg).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "host-key"), bytes.Repeat([]byte{9}, 32), 0o600)
	os.WriteFile(filepath.Join(dir, "secrets", "webhook-key"), bytes.Repeat([]byte("k"), 32), 0o600)
	rcv := &flakyReceiver{failing: http.StatusGone}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	cfg := fmt.Sprintf("version: 1\ndatabase: {url: %q}\npackage: %s\nsecrets: {root: secrets}\nhostKeyRef: secret:file/host-key\n"+
		"instanceId: ops\neventDestinations:\n  receiver: {url: %q, hmacSha256KeyRef: secret:file/webhook-key, classificationCeiling: internal, network: loopback}\n",
		storetest.NewDatabase(t), pkg, srv.URL+"/hooks/registry")
	_, base := startHost(t, cfg, dir)
	cfgPath := filepath.Join(dir, lastConfig(t, dir))
	deadLetters := func() []map[string]any {
		out, err := exec.Command(binary, "deliveries", "list", "--config", cfgPath, "--state", "dead_lettered").Output()
		if err != nil {
			t.Fatalf("deliveries list: %v", err)
		}
		var doc struct{ Deliveries []map[string]any }
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("deliveries list: %v\n%s", err, out)
		}
		return doc.Deliveries
	}
	create := func(code string) {
		if s, _, b := call(t, "POST", base+"/v1/records/parcels", "application/json", `{"data":{"parcelCode":"`+code+`"}}`); s != 201 {
			t.Fatalf("create: %d %s", s, b)
		}
	}
	create("W-0")
	waitFor(t, "the first dead letter", 30*time.Second, func() bool { return len(deadLetters()) == 1 })
	time.Sleep(10 * time.Millisecond)
	since := time.Now().UTC().Format(time.RFC3339Nano)
	create("W-1")
	create("W-2")
	time.Sleep(10 * time.Millisecond)
	until := time.Now().UTC().Format(time.RFC3339Nano)
	waitFor(t, "three dead letters", 30*time.Second, func() bool { return len(deadLetters()) == 3 })
	for _, d := range deadLetters() {
		if d["attempt"] != float64(1) || d["payloadAvailable"] != true {
			t.Fatalf("a 410 dead letter %v", d)
		}
	}

	replay := func(args ...string) (string, error) {
		out, err := exec.Command(binary, append([]string{"deliveries", "replay", "--config", cfgPath, "--operator", "bulk-operator"}, args...)...).CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{
		{"--destination", "receiver", "--event-id", "e"},
		{"--destination", "receiver", "--state", "pending"},
		{"--destination", "receiver", "--since", "yesterday"},
		{"--destination", "receiver", "--since", until, "--until", since},
		{"--dry-run"},
		{"--event-id", "e", "--delivery-id", "d"},
	} {
		out, err := replay(args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Fatalf("replay %v: %v, want exit code 2\n%s", args, err, out)
		}
	}
	window := []string{"--destination", "receiver", "--since", since, "--until", until}
	out, err := replay(append(window, "--dry-run")...)
	if err != nil || !strings.Contains(out, "destination receiver: dead letters matched: 2, replayable: 2") || strings.Contains(out, "replayed as") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if n := len(deadLetters()); n != 3 {
		t.Fatalf("a dry run left %d dead letters", n)
	}
	rcv.mu.Lock()
	rcv.healed = true
	rcv.mu.Unlock()
	out, err = replay(window...)
	if err != nil || !strings.Contains(out, "destination receiver: dead letters matched: 2, replayable: 2") ||
		!strings.Contains(out, "destination receiver: replayed as their next generation: 2, refused (changed meanwhile): 0") {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	waitFor(t, "the replayed deliveries", 30*time.Second, func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		return len(rcv.got) == 5
	})
	rcv.mu.Lock()
	replayed := rcv.got[3:]
	firsts := map[string]string{}
	for _, h := range rcv.got[:3] {
		firsts[h.Get("Ce-Id")] = h.Get("Idempotency-Key")
	}
	rcv.mu.Unlock()
	for _, h := range replayed {
		key, ok := firsts[h.Get("Ce-Id")]
		if !ok || h.Get("X-Registry-Event-Generation") != "2" || h.Get("Idempotency-Key") == key {
			t.Fatalf("replayed delivery %v", h)
		}
	}
	left := deadLetters()
	if len(left) != 1 {
		t.Fatalf("dead letters left %v", left)
	}
	// The one outside the window is still replayable; nothing is left in it.
	if out, err := replay(append(window, "--dry-run")...); err != nil || !strings.Contains(out, "destination receiver: dead letters matched: 0, replayable: 0") {
		t.Fatalf("dry run after the replay: %v\n%s", err, out)
	}
	if out, err := replay("--destination", "receiver", "--until", since, "--dry-run"); err != nil || !strings.Contains(out, "destination receiver: dead letters matched: 1, replayable: 1") {
		t.Fatalf("dry run before the window: %v\n%s", err, out)
	}
}
