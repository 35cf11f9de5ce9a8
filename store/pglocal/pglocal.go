// Package pglocal runs a private PostgreSQL cluster from the machine's own
// PostgreSQL binaries, for `registrum dev` and for tests.
//
// A cluster is either persistent (a data folder that survives restarts) or
// throwaway (a temporary folder, durability turned off, removed on Stop). It
// listens on a Unix socket in a folder of its own, optionally also on a free
// loopback TCP port, never on a fixed or public address. When the calling
// process runs as root, the cluster runs as an unprivileged system user
// (PostgreSQL refuses to run as root). The postmaster is a direct child in its
// own process group: a terminal's Ctrl-C reaches only the parent, which stops
// the cluster in order, and the kernel stops the cluster if the parent dies.
package pglocal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// SuperUser is the name of the cluster's superuser role.
const SuperUser = "registrum"

// socketPort names the socket file (.s.PGSQL.<port>) when no TCP port is used.
const socketPort = 5432

// Options configure a cluster.
type Options struct {
	// Dir is the cluster's folder for a persistent cluster: the data folder is
	// Dir/data and the server log Dir/postgres.log. Empty means a throwaway
	// cluster in a new temporary folder.
	Dir string
	// TCP also listens on 127.0.0.1 on a free port, with password
	// authentication (the password is kept in Dir/password, owner-only).
	TCP bool
	// User is the system user the cluster runs as when the caller is root.
	// Empty means $REGISTRUM_PG_USER, else "postgres", else a system user
	// "registrum-pg" created on first use.
	User string
	// StartTimeout bounds how long Start waits for the server. Default 60s.
	StartTimeout time.Duration
	// Stderr receives the server's log lines in addition to the log file or
	// buffer; nil discards them.
	Stderr io.Writer
}

// Cluster is a running private PostgreSQL server.
type Cluster struct {
	dir       string
	dataDir   string
	socketDir string
	ownSocket bool // socketDir was created separately and is removed on Stop
	throwaway bool
	port      int
	password  string
	cmd       *exec.Cmd
	log       *boundedBuffer
	logFile   *os.File
	exited    chan struct{}
	waitErr   error
	stopOnce  sync.Once
	stopErr   error
}

// Start starts a cluster, creating it first when its data folder is empty.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bins, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := credentialFor(opts.User)
	if err != nil {
		return nil, err
	}
	c := &Cluster{log: newBoundedBuffer(64 << 10), exited: make(chan struct{})}
	if opts.Dir == "" {
		c.throwaway = true
		dir, err := os.MkdirTemp("", "rgpg")
		if err != nil {
			return nil, fmt.Errorf("pglocal: create temporary folder: %w", err)
		}
		c.dir = dir
	} else {
		abs, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("pglocal: %w", err)
		}
		c.dir = abs
		if err := os.MkdirAll(c.dir, 0o700); err != nil {
			return nil, fmt.Errorf("pglocal: create %s: %w", c.dir, err)
		}
	}
	ok := false
	defer func() {
		if !ok && c.throwaway {
			os.RemoveAll(c.dir)
		}
	}()
	if err := prepareDir(c.dir, cred); err != nil {
		return nil, err
	}
	c.dataDir = filepath.Join(c.dir, "data")
	if err := c.prepareSocketDir(cred); err != nil {
		return nil, err
	}
	defer func() {
		if !ok && c.ownSocket {
			os.RemoveAll(c.socketDir)
		}
	}()
	if opts.TCP {
		if err := c.loadOrCreatePassword(cred); err != nil {
			return nil, err
		}
	}
	if err := c.initdbIfNeeded(ctx, bins, cred, opts.TCP); err != nil {
		return nil, err
	}
	if err := c.startPostgres(bins, cred, opts); err != nil {
		return nil, err
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	if err := c.waitReady(ctx, timeout); err != nil {
		c.Stop()
		return nil, err
	}
	ok = true
	return c, nil
}

// DSN returns a key/value connection string for the given database over the
// cluster's Unix socket.
func (c *Cluster) DSN(database string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", c.socketDir, c.socketPortNumber(), SuperUser, database)
}

// TCPURL returns a postgres:// URL for the loopback listener, or "" when the
// cluster was started without TCP. The URL holds the cluster's password: do
// not log it.
func (c *Cluster) TCPURL(database string) string {
	if c.port == 0 {
		return ""
	}
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", SuperUser, c.password, c.port, database)
}

// PID returns the process id of the postmaster.
func (c *Cluster) PID() int { return c.cmd.Process.Pid }

// Dir returns the cluster's folder.
func (c *Cluster) Dir() string { return c.dir }

// Done is closed when the server process has exited.
func (c *Cluster) Done() <-chan struct{} { return c.exited }

// Log returns the most recent server log output.
func (c *Cluster) Log() string { return c.log.String() }

// Stop shuts the server down (fast shutdown, then immediate after 30
// seconds) and waits for it. A throwaway cluster's folder is removed.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		select {
		case <-c.exited:
		default:
			_ = c.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-c.exited:
			case <-time.After(30 * time.Second):
				_ = c.cmd.Process.Signal(syscall.SIGQUIT)
				select {
				case <-c.exited:
				case <-time.After(10 * time.Second):
					_ = c.cmd.Process.Kill()
					<-c.exited
				}
			}
		}
		if c.logFile != nil {
			c.logFile.Close()
		}
		if c.ownSocket {
			os.RemoveAll(c.socketDir)
		}
		if c.throwaway {
			if err := os.RemoveAll(c.dir); err != nil {
				c.stopErr = fmt.Errorf("pglocal: remove %s: %w", c.dir, err)
			}
		}
	})
	return c.stopErr
}

func (c *Cluster) socketPortNumber() int {
	if c.port != 0 {
		return c.port
	}
	return socketPort
}

// prepareSocketDir picks a folder for the socket whose path fits the Unix
// socket limit (about 107 bytes).
func (c *Cluster) prepareSocketDir(cred *syscall.Credential) error {
	candidate := filepath.Join(c.dir, "run")
	if len(candidate)+len("/.s.PGSQL.65535") < 100 {
		if err := os.MkdirAll(candidate, 0o700); err != nil {
			return fmt.Errorf("pglocal: create socket folder: %w", err)
		}
		c.socketDir = candidate
	} else {
		dir, err := os.MkdirTemp("", "rgpgs")
		if err != nil {
			return fmt.Errorf("pglocal: create socket folder: %w", err)
		}
		c.socketDir = dir
		c.ownSocket = true
	}
	return chownTo(c.socketDir, cred)
}

func (c *Cluster) loadOrCreatePassword(cred *syscall.Credential) error {
	path := filepath.Join(c.dir, "password")
	if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
		c.password = string(bytes.TrimSpace(b))
		return nil
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return fmt.Errorf("pglocal: generate password: %w", err)
	}
	c.password = hex.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(c.password+"\n"), 0o600); err != nil {
		return fmt.Errorf("pglocal: write password file: %w", err)
	}
	return chownTo(path, cred)
}

func (c *Cluster) initdbIfNeeded(ctx context.Context, bins Binaries, cred *syscall.Credential, withPassword bool) error {
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err == nil {
		return nil
	}
	if entries, err := os.ReadDir(c.dataDir); err == nil && len(entries) > 0 {
		return fmt.Errorf("pglocal: %s is not empty and holds no PostgreSQL cluster", c.dataDir)
	}
	args := []string{"-D", c.dataDir, "-U", SuperUser, "-E", "UTF8", "--no-locale", "--no-instructions", "--auth-local=trust"}
	if withPassword {
		pwFile := filepath.Join(c.dir, "password")
		args = append(args, "--auth-host=scram-sha-256", "--pwfile="+pwFile)
	} else {
		args = append(args, "--auth-host=reject")
	}
	if c.throwaway {
		args = append(args, "--no-sync")
	}
	cmd := exec.CommandContext(ctx, bins.path("initdb"), args...)
	cmd.Dir = c.dir
	cmd.Env = serverEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pglocal: initdb %s: %w\n%s", c.dataDir, err, bytes.TrimSpace(out))
	}
	return nil
}

func (c *Cluster) startPostgres(bins Binaries, cred *syscall.Credential, opts Options) error {
	args := []string{
		"-D", c.dataDir,
		"-k", c.socketDir,
		"-c", "unix_socket_permissions=0700",
		"-c", "max_connections=200",
	}
	if opts.TCP {
		port, err := freePort()
		if err != nil {
			return err
		}
		c.port = port
		args = append(args, "-p", strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1")
	} else {
		args = append(args, "-p", strconv.Itoa(socketPort), "-c", "listen_addresses=")
	}
	if c.throwaway {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	var sinks []io.Writer
	sinks = append(sinks, c.log)
	if !c.throwaway {
		f, err := os.OpenFile(filepath.Join(c.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("pglocal: open server log: %w", err)
		}
		c.logFile = f
		sinks = append(sinks, f)
	}
	if opts.Stderr != nil {
		sinks = append(sinks, opts.Stderr)
	}
	cmd := exec.Command(bins.path("postgres"), args...)
	cmd.Dir = c.dir
	cmd.Env = serverEnv()
	cmd.Stdout = io.MultiWriter(sinks...)
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: cred,
		// Own process group: a terminal's Ctrl-C reaches only the parent.
		Setpgid: true,
		// Immediate shutdown when the parent dies, however it dies.
		Pdeathsig: syscall.SIGQUIT,
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pglocal: start postgres: %w", err)
	}
	c.cmd = cmd
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return nil
}

func (c *Cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-c.exited:
			return fmt.Errorf("pglocal: postgres exited during start-up (%v):\n%s", c.waitErr, c.log.String())
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, c.DSN("postgres"))
		cancel()
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("pglocal: waiting for postgres: %w", ctx.Err())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pglocal: postgres not ready after %s: %v\n%s", timeout, err, c.log.String())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// credentialFor returns the credential to run the server with, or nil when
// the caller is not root.
func credentialFor(name string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if name == "" {
		name = os.Getenv("REGISTRUM_PG_USER")
	}
	var candidates []string
	if name != "" {
		candidates = []string{name}
	} else {
		candidates = []string{"postgres", "registrum-pg"}
	}
	for _, n := range candidates {
		if u, err := user.Lookup(n); err == nil {
			return credentialOf(u)
		}
	}
	if name != "" {
		return nil, fmt.Errorf("pglocal: running as root and the system user %q does not exist", name)
	}
	// Create an unprivileged system user for the cluster.
	out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "registrum-pg").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("pglocal: running as root, no 'postgres' user, and creating the system user 'registrum-pg' failed: %v: %s", err, bytes.TrimSpace(out))
	}
	u, err := user.Lookup("registrum-pg")
	if err != nil {
		return nil, fmt.Errorf("pglocal: look up created user: %w", err)
	}
	return credentialOf(u)
}

func credentialOf(u *user.User) (*syscall.Credential, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pglocal: user %s: %w", u.Username, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pglocal: user %s: %w", u.Username, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("pglocal: user %s is root; PostgreSQL needs an unprivileged user", u.Username)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// ErrUnreachable is wrapped by the error Start and CheckFolder return when
// the cluster's system user cannot enter a parent of the cluster's folder
// (typically a home folder of mode 0700 when running as root).
var ErrUnreachable = errors.New("the cluster's user cannot reach the folder")

// CheckFolder reports whether a persistent cluster can run in dir: when the
// caller is root, the server's system user (user, as in Options.User) must be
// able to enter every existing parent of dir. The error wraps ErrUnreachable
// when it cannot. It changes nothing on disk (beyond creating the system user
// when Start would).
func CheckFolder(dir, user string) error {
	cred, err := credentialFor(user)
	if err != nil || cred == nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("pglocal: %w", err)
	}
	// Check from the nearest folder that exists: the first existing
	// ancestor must itself be enterable.
	for {
		if _, err := os.Stat(abs); err == nil || abs == filepath.Dir(abs) {
			break
		}
		abs = filepath.Dir(abs)
		if _, err := os.Stat(abs); err == nil {
			abs = filepath.Join(abs, "_")
			break
		}
	}
	return checkParents(abs, cred)
}

// prepareDir hands the cluster folder to the server's user and checks that
// the user can reach it through every parent folder.
func prepareDir(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	if err := chownTo(dir, cred); err != nil {
		return err
	}
	return checkParents(dir, cred)
}

// checkParents checks that the user of cred can enter every parent of dir.
func checkParents(dir string, cred *syscall.Credential) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("pglocal: %w", err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		mode := st.Mode().Perm()
		reachable := mode&0o001 != 0 ||
			(sys.Uid == cred.Uid && mode&0o100 != 0) ||
			(sys.Gid == cred.Gid && mode&0o010 != 0)
		if !reachable {
			return fmt.Errorf("pglocal: %w: the cluster runs as uid %d, which cannot enter %s (mode %v): choose a folder outside it, or allow traversal with chmod o+x %s", ErrUnreachable, cred.Uid, p, mode, p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func chownTo(path string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	if err := os.Chown(path, int(cred.Uid), int(cred.Gid)); err != nil {
		return fmt.Errorf("pglocal: hand %s to the server user: %w", path, err)
	}
	return nil
}

func serverEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "TZ=UTC"}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pglocal: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// boundedBuffer keeps the last n bytes written to it.
type boundedBuffer struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func newBoundedBuffer(n int) *boundedBuffer { return &boundedBuffer{n: n} }

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.n {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-b.n:]...)
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
