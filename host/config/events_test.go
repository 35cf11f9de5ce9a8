package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/strictyaml"
)

// destination is an eventDestinations block binding "crm" with extra
// settings appended.
func destination(extra string) string {
	return valid + "instanceId: host-1\neventDestinations:\n  crm:\n    url: https://crm.example.org/hooks\n" +
		"    hmacSha256KeyRef: secret:file/crm-key\n    classificationCeiling: internal\n" + extra
}

// previousHmacSha256KeyRef names a second key during a rotation: a valid
// reference to another secret; its file holds at least 32 bytes, not the
// current key's bytes. Unset, there is no previous key.
func TestAPreviousEventKeyIsAnotherSecretOfTheSameRules(t *testing.T) {
	for _, c := range []struct{ name, extra, rule string }{
		{"not a reference", "    previousHmacSha256KeyRef: crm-key-old\n", ""},
		{"the current reference", "    previousHmacSha256KeyRef: secret:file/crm-key\n", "names the current key"},
	} {
		p := write(t, destination(c.extra))
		_, err := Load(p)
		var ce *strictyaml.Error
		if !errors.As(err, &ce) || ce.Path != "eventDestinations.crm.previousHmacSha256KeyRef" || !strings.Contains(ce.Message, c.rule) {
			t.Fatalf("%s: %v, want a refusal of eventDestinations.crm.previousHmacSha256KeyRef saying %q", c.name, err, c.rule)
		}
	}

	p := write(t, destination("    previousHmacSha256KeyRef: secret:file/crm-key-old\n"))
	secrets := filepath.Join(filepath.Dir(p), "secrets")
	if err := os.Mkdir(secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	current := []byte(strings.Repeat("n", 32) + " \n")
	os.WriteFile(filepath.Join(secrets, "crm-key"), current, 0o600)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PreviousEventKey("crm"); err == nil {
		t.Fatal("a missing previous key file was accepted")
	}
	os.WriteFile(filepath.Join(secrets, "crm-key-old"), []byte(strings.Repeat("o", 31)), 0o600)
	if _, err := c.PreviousEventKey("crm"); err == nil || !strings.Contains(err.Error(), "at least 32 bytes") {
		t.Fatalf("a short previous key: %v", err)
	}
	os.WriteFile(filepath.Join(secrets, "crm-key-old"), current, 0o600)
	if _, err := c.PreviousEventKey("crm"); err == nil || !strings.Contains(err.Error(), "same bytes") {
		t.Fatalf("a previous key equal to the current one: %v", err)
	}
	old := []byte(strings.Repeat("o", 32) + "\n")
	os.WriteFile(filepath.Join(secrets, "crm-key-old"), old, 0o600)
	k, err := c.PreviousEventKey("crm")
	if err != nil || string(k) != string(old) {
		t.Fatalf("previous key %q, %v: want the file's exact bytes", k, err)
	}

	// Without the setting there is no previous key.
	p = write(t, destination(""))
	c, err = Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := c.PreviousEventKey("crm"); k != nil || err != nil {
		t.Fatalf("no previous key configured: %q %v", k, err)
	}
}
