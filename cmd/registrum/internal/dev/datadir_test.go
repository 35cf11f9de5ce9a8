package dev

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/store/pglocal"
)

func TestDataDirLockIsTakenOnceAndNamesItsHolder(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	d, err := openDataDir(data)
	if err != nil {
		t.Fatal(err)
	}
	marker, _ := os.ReadFile(filepath.Join(data, markerName))
	_, err = openDataDir(data)
	if err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second open: %v", err)
	}
	if again, _ := os.ReadFile(filepath.Join(data, markerName)); string(again) != string(marker) {
		t.Fatal("the refused open rewrote the marker")
	}
	d.close()
	d, err = openDataDir(data)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	d.close()
}

func TestDataDirAdoptsAFolderFromBeforeTheMarker(t *testing.T) {
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "registrum.yaml"), []byte(configHeader+" on every start.\nversion: 1\n"), 0o600)
	os.MkdirAll(filepath.Join(data, "postgres"), 0o700)
	d, err := openDataDir(data)
	if err != nil {
		t.Fatal(err)
	}
	d.close()
	if _, err := os.Stat(filepath.Join(data, markerName)); err != nil {
		t.Fatalf("no marker written: %v", err)
	}
}

// As root (as in many containers), a working folder under a home folder of
// mode 0700 cannot be entered by the cluster's unprivileged user: dev puts
// the cluster where it can run and finds it again on the next start.
func TestClusterRunsWhenTheDataFolderIsUnderAClosedHome(t *testing.T) {
	home := t.TempDir()
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(home, "work", ".registrum-dev")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := openDataDir(data)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	dir, err := d.clusterDir()
	if err != nil {
		t.Fatal(err)
	}
	if d.marker.ClusterDir != "" {
		t.Cleanup(func() { os.RemoveAll(d.marker.ClusterDir) })
	}
	if os.Geteuid() == 0 && strings.HasPrefix(dir, home) {
		t.Fatalf("as root the cluster stays under the closed home: %s", dir)
	}
	ctx := context.Background()
	c, err := pglocal.Start(ctx, pglocal.Options{Dir: dir})
	if err != nil {
		t.Fatalf("cluster under a closed home: %v", err)
	}
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		c.Stop()
		t.Fatal(err)
	}
	conn.Close(ctx)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}

	// The next start finds the same cluster through the marker.
	d.close()
	d2, err := openDataDir(data)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.close()
	if again, err := d2.clusterDir(); err != nil || again != dir {
		t.Fatalf("second start: cluster in %s (%v), first in %s", again, err, dir)
	}
}
