package pglocal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func query(t *testing.T, dsn, sql string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var out string
	if err := conn.QueryRow(ctx, sql).Scan(&out); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	// A zombie still answers kill(0); read its state.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}

func TestThrowawayClusterStartsServesAndLeavesNothing(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pid, dir := c.PID(), c.Dir()
	if got := query(t, c.DSN("postgres"), "select current_setting('fsync')"); got != "off" {
		t.Errorf("throwaway fsync = %s, want off", got)
	}
	if got := query(t, c.DSN("postgres"), "select current_setting('listen_addresses')"); got != "" {
		t.Errorf("listen_addresses = %q, want socket only", got)
	}
	if got := query(t, c.DSN("postgres"), "select current_user"); got != SuperUser {
		t.Errorf("user = %s", got)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if processAlive(pid) {
		t.Errorf("postmaster %d still running after Stop", pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("throwaway folder %s not removed: %v", dir, err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestPersistentClusterKeepsDataAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	root, err := os.MkdirTemp("", "rgpgp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "cluster")

	c, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := query(t, c.DSN("postgres"), "select current_setting('fsync')"); got != "on" {
		t.Errorf("persistent fsync = %s, want on", got)
	}
	exec1 := func(sql string) {
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec1("create table kept(v text)")
	exec1("insert into kept values ('survives')")
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		t.Fatalf("data folder not kept: %v", err)
	}

	c2, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Stop()
	if got := query(t, c2.DSN("postgres"), "select v from kept"); got != "survives" {
		t.Fatalf("after restart got %q", got)
	}
}

func TestTCPListenerNeedsThePassword(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{TCP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	url := c.TCPURL("postgres")
	if !strings.Contains(url, "@127.0.0.1:") {
		t.Fatalf("TCP URL %q is not on loopback", url)
	}
	if got := query(t, url, "select 'tcp'"); got != "tcp" {
		t.Fatalf("got %q", got)
	}
	wrong := strings.Replace(url, c.password, "wrong", 1)
	conn, err := pgx.Connect(ctx, wrong)
	if err == nil {
		conn.Close(ctx)
		t.Fatal("a wrong password was accepted on the TCP listener")
	}
}

func TestClusterDiesWithItsParent(t *testing.T) {
	if os.Getenv("PGLOCAL_CHILD") == "1" {
		return // the child body runs from TestMain
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestClusterDiesWithItsParent$")
	cmd.Env = append(os.Environ(), "PGLOCAL_CHILD=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("child said nothing: %v", err)
	}
	var pid int
	var dir string
	if _, err := fmt.Sscanf(line, "postmaster %d %s", &pid, &dir); err != nil {
		cmd.Process.Kill()
		t.Fatalf("child said %q: %v", line, err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if !processAlive(pid) {
		t.Fatalf("postmaster %d not running while its parent lives", pid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("postmaster %d outlived its killed parent", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// childMain starts a cluster, reports it, and waits to be killed.
func childMain() {
	c, err := Start(context.Background(), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Printf("postmaster %d %s\n", c.PID(), c.Dir())
	time.Sleep(time.Minute)
	os.Exit(4)
}

func TestMain(m *testing.M) {
	if os.Getenv("PGLOCAL_CHILD") == "1" {
		childMain()
	}
	os.Exit(m.Run())
}

func TestMissingBinariesNameWhatToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	old := packagedRoot
	packagedRoot = t.TempDir()
	t.Cleanup(func() { packagedRoot = old })
	_, err := FindBinaries()
	if !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("err = %v, want ErrNoBinaries", err)
	}
	if !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Errorf("error does not say what to install: %v", err)
	}
	_, err = Start(context.Background(), Options{})
	if !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("Start err = %v, want ErrNoBinaries", err)
	}
}

func TestBadBinaryFolderIsNamed(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("REGISTRUM_PG_BIN", dir)
	_, err := FindBinaries()
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("err = %v, want it to name %s", err, dir)
	}
}

func TestNewestPackagedVersionWins(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9.6", "15", "13"} {
		bin := filepath.Join(root, v, "bin")
		os.MkdirAll(bin, 0o755)
		for _, name := range []string{"initdb", "postgres"} {
			os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755)
		}
	}
	t.Setenv("PATH", t.TempDir())
	old := packagedRoot
	packagedRoot = root
	t.Cleanup(func() { packagedRoot = old })
	b, err := FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	if got := filepath.Base(filepath.Dir(b.Dir)); got != "15" {
		t.Fatalf("picked version %s, want 15", got)
	}
}
