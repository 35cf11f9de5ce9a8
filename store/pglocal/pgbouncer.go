package pglocal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoPgBouncer means the pgbouncer binary is not installed (Debian's
// package pgbouncer).
var ErrNoPgBouncer = errors.New("pgbouncer is not installed (apt-get install pgbouncer)")

// PgBouncer is a private PgBouncer in transaction mode in front of a
// cluster's Unix socket, listening on 127.0.0.1 on a free port: for tests
// of the host behind a pooler (docs/record-host.md, "Connection poolers").
type PgBouncer struct {
	dir    string
	port   int
	user   string
	cmd    *exec.Cmd
	log    *boundedBuffer
	exited chan struct{}
}

// FindPgBouncer returns the path of the pgbouncer binary or ErrNoPgBouncer.
func FindPgBouncer() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", ErrNoPgBouncer
}

// StartPgBouncer starts PgBouncer (pool_mode = transaction, auth_type =
// trust, server_login_retry = 1: after a failed server login PgBouncer
// refuses every client for that long, 15 s by default, which would
// outlast a restart of the server) in front of the server of dsn, a connection string naming a
// cluster's Unix socket folder (Cluster.DSN). When the caller is root it
// runs as the owner of that folder, as PgBouncer refuses root and only the
// cluster's user may enter the folder.
func StartPgBouncer(ctx context.Context, dsn string) (*PgBouncer, error) {
	bin, err := FindPgBouncer()
	if err != nil {
		return nil, err
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pglocal: pgbouncer: %w", err)
	}
	if !strings.HasPrefix(cfg.Host, "/") {
		return nil, fmt.Errorf("pglocal: pgbouncer: the connection string names no Unix socket folder")
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		fi, err := os.Stat(cfg.Host)
		if err != nil {
			return nil, fmt.Errorf("pglocal: pgbouncer: %w", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		cred = &syscall.Credential{Uid: st.Uid, Gid: st.Gid, Groups: []uint32{}}
	}
	dir, err := os.MkdirTemp("", "rgpgb")
	if err != nil {
		return nil, fmt.Errorf("pglocal: pgbouncer: %w", err)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
server_login_retry = 1
max_client_conn = 1000
default_pool_size = 20
pidfile =
logfile =
log_connections = 0
log_disconnections = 0
`, cfg.Host, cfg.Port, port, filepath.Join(dir, "userlist.txt"))
	files := map[string]string{"pgbouncer.ini": ini, "userlist.txt": fmt.Sprintf("%q \"\"\n", cfg.User)}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pglocal: pgbouncer: %w", err)
		}
	}
	for _, p := range []string{dir, filepath.Join(dir, "pgbouncer.ini"), filepath.Join(dir, "userlist.txt")} {
		if err := chownTo(p, cred); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	b := &PgBouncer{dir: dir, port: port, user: cfg.User, log: newBoundedBuffer(1 << 20), exited: make(chan struct{})}
	b.cmd = exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	b.cmd.Dir = dir
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	if err := b.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pglocal: start pgbouncer: %w", err)
	}
	go func() { b.cmd.Wait(); close(b.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.addr(), time.Second)
		if err == nil {
			c.Close()
			return b, nil
		}
		select {
		case <-b.exited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pglocal: pgbouncer exited at start: %s", strings.TrimSpace(b.log.String()))
		case <-ctx.Done():
			b.Stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Stop()
			return nil, fmt.Errorf("pglocal: pgbouncer did not listen within 30 s: %s", strings.TrimSpace(b.log.String()))
		}
	}
}

func (b *PgBouncer) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

// DSN returns the connection string of database through PgBouncer.
func (b *PgBouncer) DSN(database string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable", b.port, b.user, database)
}

// Log returns what PgBouncer wrote (its last megabyte).
func (b *PgBouncer) Log() string { return b.log.String() }

// Stop stops PgBouncer at once (SIGINT, then SIGKILL after 5 s) and
// removes its folder.
func (b *PgBouncer) Stop() error {
	select {
	case <-b.exited:
	default:
		b.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-b.exited:
		case <-time.After(5 * time.Second):
			b.cmd.Process.Kill()
			<-b.exited
		}
	}
	return os.RemoveAll(b.dir)
}
