package dev

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/strictyaml"
)

// A fragment refuses a key it is not for, naming the file and the line; a
// refusal of the generated configuration that the fragment's lines caused
// names the fragment's file and line instead of registrum.yaml.
func TestFragmentNamesItsOwnFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "review.yaml")
	os.WriteFile(file, []byte("reviewAuthorities:\n  casework:\n    endpoint: http://127.0.0.1:1\nlistener:\n  port: 1\n"), 0o600)
	_, err := readFragment("--review-config", file, []string{"reviewAuthorities", "executors"}, dir, nil)
	if err == nil || !strings.Contains(err.Error(), file+":4") || !strings.Contains(err.Error(), "listener") {
		t.Fatalf("a foreign key: %v", err)
	}

	os.WriteFile(file, []byte("# mine\neventDestinations:\n  d:\n    url: http://127.0.0.1:1/x\n"), 0o600)
	f, err := readFragment("--event-destinations", file, []string{"eventDestinations", "instanceId"}, dir, map[string]string{"instanceId": "instanceId: dev"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "registrum.yaml")
	os.WriteFile(cfg, []byte("version: 1\nlistener:\n  port: 1\n"+f.text), 0o600)
	// url is line 9 of registrum.yaml: 3 lines, a blank, instanceId, then
	// the file's 4 lines, url the last.
	refusal := &strictyaml.Error{File: cfg, Pos: strictyaml.Position{Line: 9, Column: 5}, Path: "eventDestinations.d.url", Message: "must be https"}
	got := f.blame(refusal, cfg).Error()
	if !strings.HasPrefix(got, "dev: --event-destinations: "+file+":4: eventDestinations.d.url: must be https") || strings.Contains(got, cfg) {
		t.Fatalf("blamed: %s", got)
	}
	other := &strictyaml.Error{File: cfg, Pos: strictyaml.Position{Line: 2, Column: 1}, Path: "listener.port", Message: "taken"}
	if got := f.blame(other, cfg); !errors.Is(got, other) || got.Error() != other.Error() {
		t.Fatalf("another key's refusal: %v", got)
	}
}
