package replay

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestUseOnce(t *testing.T) {
	c := New(256)
	now := time.Unix(1000, 0)
	if err := c.Use("a\x00j1", now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	if err := c.Use("a\x00j1", now.Add(time.Minute), now.Add(59*time.Second)); !errors.Is(err, ErrReplayed) {
		t.Fatalf("second use before expiry: %v, want ErrReplayed", err)
	}
	if err := c.Use("b\x00j1", now.Add(time.Minute), now); err != nil {
		t.Fatalf("same jti for another client: %v", err)
	}
	// At expiry the entry is dropped (the assertion can no longer be valid).
	if err := c.Use("a\x00j1", now.Add(2*time.Minute), now.Add(time.Minute)); err != nil {
		t.Fatalf("use after expiry: %v", err)
	}
}

func TestFullRefusesAndNeverEvictsLive(t *testing.T) {
	c := New(256)
	now := time.Unix(1000, 0)
	for i := range 256 {
		if err := c.Use(fmt.Sprint("k", i), now.Add(time.Duration(i+1)*time.Second), now); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Use("extra", now.Add(time.Hour), now); !errors.Is(err, ErrFull) {
		t.Fatalf("257th live entry: %v, want ErrFull", err)
	}
	// Every live entry is still refused as a replay.
	for i := range 256 {
		if err := c.Use(fmt.Sprint("k", i), now.Add(time.Hour), now); !errors.Is(err, ErrReplayed) {
			t.Fatalf("k%d: %v, want ErrReplayed (a live entry was evicted)", i, err)
		}
	}
	// Once the earliest entry expires, exactly one slot frees up.
	later := now.Add(time.Second)
	if err := c.Use("extra", now.Add(time.Hour), later); err != nil {
		t.Fatalf("after one expiry: %v", err)
	}
	if err := c.Use("extra2", now.Add(time.Hour), later); !errors.Is(err, ErrFull) {
		t.Fatalf("extra2: %v, want ErrFull", err)
	}
}
