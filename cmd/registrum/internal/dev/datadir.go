package dev

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/registrum/registrum/store/pglocal"
)

// The files that mark and lock a data folder as registrum dev's.
const (
	markerName = "registrum-dev.json"
	lockName   = "registrum-dev.lock"
	// markerOwner is the marker's owner member.
	markerOwner = "registrum dev"
	// configHeader starts the record host configuration dev writes; a data
	// folder made before the marker existed is recognised by it.
	configHeader = "# Written by registrum dev"
)

// ownedNames are the entries registrum dev writes at the top of its data
// folder; it writes nothing else there.
var ownedNames = map[string]bool{
	markerName:       true,
	lockName:         true,
	"postgres":       true,
	"package":        true,
	"secrets":        true,
	"registrum.yaml": true,
	"issuer":         true,
	"reviewdesk":     true,
	receiverLogName:  true,
	receiverAddrName: true,
	runningName:      true,
}

// owned reports whether dev wrote the data folder entry name (including the
// staging folder left by an interrupted package write, and the running
// state's temporary file).
func owned(name string) bool {
	return ownedNames[name] || strings.HasPrefix(name, ".package.tmp-") || name == runningName+".tmp"
}

// marker is the content of registrum-dev.json: what dev created.
type marker struct {
	// Owner is always markerOwner.
	Owner string `json:"owner"`
	// Creates lists the entries dev writes into the data folder.
	Creates []string `json:"creates"`
	// ClusterDir is the private cluster's folder when it lives outside the
	// data folder (the cluster's system user could not reach the data
	// folder); empty means <data>/postgres.
	ClusterDir string `json:"clusterDir,omitempty"`
}

// dataDir is a data folder dev holds the lock of.
type dataDir struct {
	path   string
	lock   *os.File
	marker marker
}

// openDataDir checks that path is empty or was made by registrum dev,
// takes its lock before writing anything into it, and marks it as dev's.
// A folder holding anything dev did not create is refused, untouched.
func openDataDir(path string) (*dataDir, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(path, 0o755); err != nil {
			return nil, fmt.Errorf("dev: create data folder: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("dev: data folder: %w", err)
	case !st.IsDir():
		return nil, fmt.Errorf("dev: data folder %s is a file, not a folder: pass --data with a folder", path)
	}
	if _, err := inspectDataDir(path); err != nil {
		return nil, err
	}
	d := &dataDir{path: path}
	if err := d.takeLock(); err != nil {
		return nil, err
	}
	// Check again under the lock: another dev may have finished between.
	m, err := inspectDataDir(path)
	if err != nil {
		d.close()
		return nil, err
	}
	if m == nil {
		m = &marker{Owner: markerOwner}
	}
	d.marker = *m
	if err := d.writeMarker(); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// inspectDataDir reads the data folder without changing it. It returns the
// marker (nil when there is none yet) or an error naming what dev did not
// create.
func inspectDataDir(path string) (*marker, error) {
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("dev: read data folder: %w", err)
	}
	var foreign, names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if !owned(e.Name()) {
			foreign = append(foreign, e.Name())
		}
	}
	refuse := func(what string) error {
		return fmt.Errorf("dev: the data folder %s holds %s that registrum dev did not create; it writes only into an empty folder or one it made, and changes nothing here: pass --data with another folder", path, what)
	}
	if len(foreign) > 0 {
		sort.Strings(foreign)
		return nil, refuse(quoteNames(foreign))
	}
	b, err := os.ReadFile(filepath.Join(path, markerName))
	if err == nil {
		var m marker
		if err := json.Unmarshal(b, &m); err != nil || m.Owner != markerOwner {
			return nil, refuse(markerName + " (not a registrum dev marker)")
		}
		return &m, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("dev: read %s: %w", markerName, err)
	}
	// No marker: an empty folder (or one holding only the lock), or a folder
	// made by a registrum dev from before the marker, recognised by the header
	// of the configuration it writes.
	others := 0
	for _, n := range names {
		if n != lockName {
			others++
		}
	}
	if others == 0 {
		return nil, nil
	}
	cfg, err := os.ReadFile(filepath.Join(path, "registrum.yaml"))
	if err != nil || !strings.HasPrefix(string(cfg), configHeader) {
		sort.Strings(names)
		return nil, refuse(quoteNames(names))
	}
	return nil, nil
}

func quoteNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// takeLock holds an exclusive lock on the data folder's lock file for the
// life of the process, and writes this process's id into it.
func (d *dataDir) takeLock() error {
	path := filepath.Join(d.path, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("dev: open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if pid := strings.TrimSpace(string(b)); pid != "" {
				holder = "pid " + pid
			}
			return fmt.Errorf("dev: the data folder %s is in use by another registrum dev (%s); stop it first, or pass --data with another folder", d.path, holder)
		}
		return fmt.Errorf("dev: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return fmt.Errorf("dev: write lock %s: %w", path, err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return fmt.Errorf("dev: write lock %s: %w", path, err)
	}
	d.lock = f
	return nil
}

// close releases the lock (the lock file stays: removing it would race
// with a process that has it open).
func (d *dataDir) close() {
	if d.lock != nil {
		d.lock.Close()
		d.lock = nil
	}
}

func (d *dataDir) writeMarker() error {
	creates := make([]string, 0, len(ownedNames))
	for n := range ownedNames {
		creates = append(creates, n)
	}
	sort.Strings(creates)
	d.marker.Creates = creates
	b, err := json.MarshalIndent(d.marker, "", "  ")
	if err != nil {
		return fmt.Errorf("dev: marker: %w", err)
	}
	path := filepath.Join(d.path, markerName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("dev: write %s: %w", markerName, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("dev: write %s: %w", markerName, err)
	}
	return nil
}

// clusterDir returns the private cluster's folder: <data>/postgres, or, when
// the cluster's system user cannot reach the data folder (running as root
// under a home folder of mode 0700), a folder of its own under /var/tmp or
// the temporary folder, recorded in the marker so that the next start finds
// the same cluster.
func (d *dataDir) clusterDir() (string, error) {
	if d.marker.ClusterDir != "" {
		return d.marker.ClusterDir, nil
	}
	inside := filepath.Join(d.path, "postgres")
	err := pglocal.CheckFolder(inside, "")
	if err == nil || !errors.Is(err, pglocal.ErrUnreachable) {
		return inside, err
	}
	if _, statErr := os.Stat(filepath.Join(inside, "data", "PG_VERSION")); statErr == nil {
		// A cluster made here before: moving it is the user's call.
		return "", err
	}
	for _, base := range []string{"/var/tmp", os.TempDir()} {
		if st, serr := os.Stat(base); serr != nil || !st.IsDir() {
			continue
		}
		if pglocal.CheckFolder(filepath.Join(base, "registrum-dev-pg"), "") != nil {
			continue
		}
		dir, mkErr := os.MkdirTemp(base, "registrum-dev-pg-")
		if mkErr != nil {
			continue
		}
		d.marker.ClusterDir = dir
		if werr := d.writeMarker(); werr != nil {
			os.Remove(dir)
			d.marker.ClusterDir = ""
			return "", werr
		}
		return dir, nil
	}
	return "", fmt.Errorf("dev: %w; and no folder the cluster's user can reach was found under /var/tmp or %s", err, os.TempDir())
}
