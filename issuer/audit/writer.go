package audit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Errors an Append can return without poisoning the writer.
var (
	// ErrClosed reports an append to a closed writer.
	ErrClosed = errors.New("audit: writer is closed")
	// ErrRecordTooLarge reports a record whose line alone exceeds the
	// segment size limit (or MaxLineBytes); nothing is written.
	ErrRecordTooLarge = errors.New("audit: record line is larger than the segment size limit")
	// ErrPoisoned is wrapped by every error of a poisoned writer, together
	// with the failure that poisoned it.
	ErrPoisoned = errors.New("audit: writer is poisoned; restart after checking the chain")
)

// Writer is the single writer of a chain. Its methods are safe for
// concurrent use.
type Writer struct {
	cfg      Config
	path     string
	dir      string
	keys     keys
	lock     *os.File
	lockInfo fs.FileInfo
	now      func() time.Time

	mu      sync.Mutex
	pending []*request
	closed  bool
	err     error // non-nil once poisoned

	wake      chan struct{}
	exited    chan struct{}
	closeOnce sync.Once
	closeErr  error

	// Owned by the commit goroutine once started.
	f    *os.File
	mode fs.FileMode
	size int64
	seq  uint32
	line uint64
	head [32]byte
	// lastGroup is the number of entries the last commit made durable.
	lastGroup int

	// beforeWrite, when set by tests, runs before each write to the active segment.
	beforeWrite func(f *os.File)
	// maxBatch, when positive, caps the entries committed per fsync (the
	// benchmark's one-fsync-per-append baseline uses 1).
	maxBatch int
	// fileSyncs and dirSyncs count fsyncs, for tests.
	fileSyncs, dirSyncs atomic.Int64
}

type request struct {
	rec  []byte // canonical record, encoded by the caller's goroutine
	done chan error
}

// Open takes the chain's single-writer lock, checks owner-only permissions
// on the folder and the chain files, verifies the active segment (and the
// last record of the newest sealed segment) and continues the chain from its
// last MAC. A missing folder is created 0700 and a missing active segment
// 0600. Open refuses a chain it cannot verify; the error names the line.
func Open(cfg Config) (*Writer, error) {
	k, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	path := filepath.Clean(cfg.Path)
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("audit: create chain folder %s: %w", dir, err)
		}
	}
	if err := checkOwnerOnlyDir(dir); err != nil {
		return nil, err
	}
	lf, err := os.OpenFile(lockName(path), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: open lock file: %w", err)
	}
	w := &Writer{cfg: cfg, path: path, dir: dir, keys: k, lock: lf, now: time.Now,
		wake: make(chan struct{}, 1), exited: make(chan struct{})}
	if err := w.open(); err != nil {
		if w.f != nil {
			_ = w.f.Close()
		}
		_ = lf.Close() // releases the lock if it was taken
		return nil, err
	}
	go w.run()
	return w, nil
}

// open does the lock, verification and continuation steps of Open.
func (w *Writer) open() error {
	li, err := w.lock.Stat()
	if err != nil {
		return fmt.Errorf("audit: stat lock file: %w", err)
	}
	if err := checkOwnerOnlyInfo(w.lock.Name(), li); err != nil {
		return err
	}
	if err := tryLock(w.lock); err != nil {
		if errors.Is(err, ErrLocked) {
			return fmt.Errorf("%w (lock file %s is held; is another issuer running?)", ErrLocked, w.lock.Name())
		}
		return err
	}
	w.lockInfo = li

	seqs, err := listSealed(w.path)
	if err != nil {
		return err
	}
	for _, seq := range seqs {
		if _, err := checkOwnerOnlyFile(sealedName(w.path, seq)); err != nil {
			return err
		}
	}
	b := boundary{segment: 1, head: genesis, known: true}
	if len(seqs) > 0 {
		last := seqs[len(seqs)-1]
		name := sealedName(w.path, last)
		p, err := lastRecord(w.keys.chain, name, last)
		if err != nil {
			return err
		}
		b = boundary{segment: last + 1, head: p.mac, known: true}
	}

	fi, err := os.Lstat(w.path)
	if errors.Is(err, fs.ErrNotExist) {
		return w.createActive(b)
	}
	if err != nil {
		return fmt.Errorf("audit: stat active segment: %w", err)
	}
	if err := checkOwnerOnlyInfo(w.path, fi); err != nil {
		return err
	}
	f, err := os.OpenFile(w.path, os.O_RDWR|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("audit: open active segment: %w", err)
	}
	w.f = f
	if ffi, err := f.Stat(); err != nil || !sameFile(fi, ffi) {
		return fmt.Errorf("audit: active segment %s changed while opening", w.path)
	}
	w.mode = fi.Mode()
	if len(seqs) == 0 {
		// No sealed segment beside it: either a fresh chain (the first record
		// must start from genesis) or all sealed history was archived.
		b = boundary{}
	}
	res, err := scanSegment(w.keys.chain, f, b)
	if err != nil {
		return err
	}
	if res.reason != nil {
		return fmt.Errorf("audit: active segment %s line %d: %v; refusing to continue the chain (docs/issuer-audit.md, recovery)", w.path, res.badLine, res.reason)
	}
	w.size = res.size
	w.line = res.records
	w.seq, w.head = b.segment, b.head
	if res.records > 0 {
		w.seq, w.head = res.segment, res.head
	} else if w.seq == 0 {
		w.seq, w.head = 1, genesis
	}
	return nil
}

// createActive makes a new, empty active segment continuing from b.
func (w *Writer) createActive(b boundary) error {
	f, err := os.OpenFile(w.path, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("audit: create active segment: %w", err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(w.dir)
	}
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("audit: create active segment %s: %w", w.path, err)
	}
	w.f, w.mode, w.size, w.seq, w.line, w.head = f, fi.Mode(), 0, b.segment, 0, b.head
	return nil
}

// Pseudonym returns the keyed pseudonym of value under label:
// "hmac-sha256:v<hashKeyVersion>:" and 64 lowercase hex digits of an
// HMAC-SHA-256 under a key derived from the hash key. Equal inputs give equal
// pseudonyms for one hash key, so records can be correlated without storing
// the value.
func (w *Writer) Pseudonym(label, value string) string {
	return w.keys.pseudonymOf(label, value)
}

// Err returns nil while the writer is healthy and the poisoning failure
// (wrapping [ErrPoisoned]) once a write, fsync or file check has failed.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Append adds e to the chain and returns only once its line is written and
// the active segment and its folder are fsynced. Concurrent appends are
// group-committed. An entry that does not have the shape of its outcome is
// refused with nothing written. A write, fsync or file-identity failure fails
// this append, poisons the writer and fails every later append.
//
// If ctx ends before the writer has taken the entry, Append returns the
// context error and nothing is written; once taken, Append waits for the
// entry's own result so that its answer is always the truth about durability.
func (w *Writer) Append(ctx context.Context, e Entry) error {
	rec, err := e.encode(w.keys.version)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("audit: append: %w", err)
	}
	req := &request{rec: rec, done: make(chan error, 1)}
	w.mu.Lock()
	switch {
	case w.err != nil:
		err = w.err
	case w.closed:
		err = ErrClosed
	default:
		w.pending = append(w.pending, req)
	}
	w.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
	}
	w.mu.Lock()
	for i, r := range w.pending {
		if r == req {
			w.pending = append(w.pending[:i], w.pending[i+1:]...)
			w.mu.Unlock()
			return fmt.Errorf("audit: append: %w", ctx.Err())
		}
	}
	w.mu.Unlock()
	return <-req.done
}

// Close waits for pending appends, then closes the active segment and
// releases the lock. It is safe to call more than once.
func (w *Writer) Close() error {
	w.closeOnce.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
		<-w.exited
		var errs []error
		if err := w.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			errs = append(errs, fmt.Errorf("audit: close active segment: %w", err))
		}
		if err := w.lock.Close(); err != nil {
			errs = append(errs, fmt.Errorf("audit: release lock: %w", err))
		}
		w.closeErr = errors.Join(errs...)
	})
	return w.closeErr
}

// run is the commit goroutine: it takes every pending request at once and
// commits them as one batch.
func (w *Writer) run() {
	defer close(w.exited)
	for range w.wake {
		for {
			w.mu.Lock()
			batch := w.pending
			if w.maxBatch > 0 && len(batch) > w.maxBatch {
				batch = batch[:w.maxBatch:w.maxBatch]
				w.pending = append([]*request(nil), w.pending[w.maxBatch:]...)
			} else {
				w.pending = nil
			}
			closed := w.closed
			w.mu.Unlock()
			if len(batch) == 0 {
				if closed {
					return
				}
				break
			}
			w.commit(batch)
		}
	}
}

// commit writes a batch, rotating as needed, fsyncs once and releases the
// waiters, then reports the group to Config.OnCommit.
func (w *Writer) commit(batch []*request) {
	if w.cfg.OnCommit != nil {
		start := time.Now()
		defer func() { w.cfg.OnCommit(w.lastGroup, time.Since(start)) }()
	}
	w.lastGroup = 0
	if err := w.Err(); err != nil {
		finish(batch, err)
		return
	}
	if err := w.checkFiles(); err != nil {
		w.poison(err, batch)
		return
	}
	limit := min(w.cfg.MaximumFileBytes, MaxLineBytes)
	now := w.now().UnixMilli()
	var buf []byte
	accepted := batch[:0:0]
	for i, r := range batch {
		line, mac := encodeLine(w.keys.chain, w.seq, w.line+1, now, w.head, r.rec)
		if int64(len(line)) > limit {
			r.done <- ErrRecordTooLarge
			continue
		}
		if cur := w.size + int64(len(buf)); cur > 0 && cur+int64(len(line)) > w.cfg.MaximumFileBytes {
			if err := w.writeSync(buf); err != nil {
				w.poison(err, append(accepted, batch[i:]...))
				return
			}
			buf = buf[:0]
			if err := w.seal(); err != nil {
				w.poison(err, append(accepted, batch[i:]...))
				return
			}
			line, mac = encodeLine(w.keys.chain, w.seq, 1, now, w.head, r.rec)
			if int64(len(line)) > limit {
				r.done <- ErrRecordTooLarge
				continue
			}
		}
		buf = append(buf, line...)
		w.line++
		w.head = mac
		accepted = append(accepted, r)
	}
	if len(buf) > 0 {
		if err := w.writeSync(buf); err != nil {
			w.poison(err, accepted)
			return
		}
	}
	if len(accepted) > 0 {
		if err := syncDir(w.dir); err != nil {
			w.poison(err, accepted)
			return
		}
		w.dirSyncs.Add(1)
	}
	w.lastGroup = len(accepted)
	finish(accepted, nil)
}

// writeSync appends buf to the active segment and fsyncs it.
func (w *Writer) writeSync(buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	if w.beforeWrite != nil {
		w.beforeWrite(w.f)
	}
	n, err := w.f.Write(buf)
	w.size += int64(n)
	if err != nil {
		return fmt.Errorf("audit: write active segment: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("audit: fsync active segment: %w", err)
	}
	w.fileSyncs.Add(1)
	return nil
}

// seal renames the (already fsynced) active segment to its sequence name,
// fsyncs the folder and opens a fresh active segment.
func (w *Writer) seal() error {
	if err := renameNoReplace(w.path, sealedName(w.path, w.seq)); err != nil {
		return err
	}
	if err := syncDir(w.dir); err != nil {
		return err
	}
	old := w.f
	if err := w.createActive(boundary{segment: w.seq + 1, head: w.head, known: true}); err != nil {
		return err
	}
	_ = old.Close()
	return nil
}

// checkFiles confirms the active segment and the lock file are still the
// files this writer opened, unchanged in mode and size by anyone else.
func (w *Writer) checkFiles() error {
	fi, err := os.Lstat(w.path)
	if err != nil {
		return fmt.Errorf("audit: active segment %s: %w", w.path, err)
	}
	ffi, err := w.f.Stat()
	if err != nil {
		return fmt.Errorf("audit: stat open active segment: %w", err)
	}
	switch {
	case !sameFile(fi, ffi):
		return fmt.Errorf("audit: active segment %s was replaced or renamed outside the writer", w.path)
	case fi.Mode() != w.mode:
		return fmt.Errorf("audit: active segment %s changed mode from %v to %v outside the writer", w.path, w.mode, fi.Mode())
	case fi.Size() != w.size:
		return fmt.Errorf("audit: active segment %s is %d bytes, the writer wrote %d (changed outside the writer)", w.path, fi.Size(), w.size)
	}
	li, err := os.Lstat(w.lock.Name())
	if err != nil || !sameFile(li, w.lockInfo) {
		return fmt.Errorf("audit: lock file %s was removed or replaced", w.lock.Name())
	}
	return nil
}

// poison marks the writer failed and fails the given requests.
func (w *Writer) poison(cause error, reqs []*request) {
	w.mu.Lock()
	if w.err == nil {
		w.err = fmt.Errorf("%w: %w", ErrPoisoned, cause)
	}
	err := w.err
	w.mu.Unlock()
	finish(reqs, err)
}

// finish releases the waiters of reqs with err (nil: their records are durable).
func finish(reqs []*request, err error) {
	for _, r := range reqs {
		r.done <- err
	}
}
