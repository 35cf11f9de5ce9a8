package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// sealedName returns the file name of sealed segment seq of the chain at path.
func sealedName(path string, seq uint32) string {
	return fmt.Sprintf("%s.%08d", path, seq)
}

// lockName returns the lock file beside the chain at path.
func lockName(path string) string { return path + ".lock" }

// listSealed returns the sequence numbers of the sealed segments present
// beside path, ascending. Only names "<base>.<exactly eight digits>" count.
func listSealed(path string) ([]uint32, error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit: list segments in %s: %w", dir, err)
	}
	var seqs []uint32
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), base+".")
		if !ok || len(rest) != 8 || strings.Trim(rest, "0123456789") != "" {
			continue
		}
		n, err := strconv.ParseUint(rest, 10, 32)
		if err != nil || n == 0 {
			continue
		}
		seqs = append(seqs, uint32(n))
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs, nil
}

// checkOwnerOnlyDir requires dir to be a directory owned by the effective
// user that group and other cannot access.
func checkOwnerOnlyDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("audit: chain folder %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("audit: chain folder %s is not a directory", dir)
	}
	if err := ownedByMe(dir, fi); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("audit: chain folder %s has mode %04o; group and other must have no access (chmod 700)", dir, fi.Mode().Perm())
	}
	return nil
}

// checkOwnerOnlyFile requires name to be a regular file (not a symlink) with
// one link, owned by the effective user, that group and other cannot access.
func checkOwnerOnlyFile(name string) (fs.FileInfo, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return nil, fmt.Errorf("audit: chain file %s: %w", name, err)
	}
	return fi, checkOwnerOnlyInfo(name, fi)
}

func checkOwnerOnlyInfo(name string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("audit: chain file %s is not a regular file", name)
	}
	if err := ownedByMe(name, fi); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("audit: chain file %s has mode %04o; group and other must have no access (chmod 600)", name, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
		return fmt.Errorf("audit: chain file %s has %d links; exactly one is required", name, st.Nlink)
	}
	return nil
}

func ownedByMe(name string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("audit: %s: cannot read file owner", name)
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("audit: %s is owned by uid %d, not by this process (uid %d)", name, st.Uid, os.Geteuid())
	}
	return nil
}

// ErrLocked reports that another writer holds the chain's lock.
var ErrLocked = errors.New("audit: the chain is locked by another writer")

// tryLock takes the exclusive, non-blocking flock on f.
func tryLock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EWOULDBLOCK {
			return ErrLocked
		}
		if err != nil {
			return fmt.Errorf("audit: lock %s: %w", f.Name(), err)
		}
		return nil
	}
}

// syncDir fsyncs the directory dir.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("audit: open folder %s for sync: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("audit: sync folder %s: %w", dir, err)
	}
	return nil
}

// renameNoReplace renames from to to, failing if to exists.
func renameNoReplace(from, to string) error {
	if err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE); err != nil {
		return fmt.Errorf("audit: seal %s as %s: %w", from, to, err)
	}
	return nil
}

// sameFile reports whether two stats name the same inode.
func sameFile(a, b fs.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}
