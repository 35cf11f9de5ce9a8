package pglocal

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrNoBinaries is returned when no PostgreSQL server binaries can be found.
var ErrNoBinaries = errors.New("pglocal: no PostgreSQL server binaries (initdb, postgres) found on PATH, in $REGISTRUM_PG_BIN or in /usr/lib/postgresql/*/bin; install them, for example with `apt-get install postgresql` on Debian or Ubuntu, or `brew install postgresql` on macOS, or set REGISTRUM_PG_BIN to their folder")

// packagedRoot is where Debian and Ubuntu install PostgreSQL versions.
var packagedRoot = "/usr/lib/postgresql"

// Binaries names the PostgreSQL programs a cluster is run with.
type Binaries struct {
	// Dir is the folder holding initdb and postgres.
	Dir string
}

func (b Binaries) path(name string) string { return filepath.Join(b.Dir, name) }

// FindBinaries locates the PostgreSQL server binaries: the folder named by
// $REGISTRUM_PG_BIN first, then initdb on PATH, then the newest
// /usr/lib/postgresql/<version>/bin.
func FindBinaries() (Binaries, error) {
	if dir := os.Getenv("REGISTRUM_PG_BIN"); dir != "" {
		b := Binaries{Dir: dir}
		if !b.complete() {
			return Binaries{}, fmt.Errorf("pglocal: REGISTRUM_PG_BIN=%s does not hold both initdb and postgres", dir)
		}
		return b, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		b := Binaries{Dir: filepath.Dir(p)}
		if b.complete() {
			return b, nil
		}
	}
	matches, _ := filepath.Glob(filepath.Join(packagedRoot, "*", "bin"))
	sort.Slice(matches, func(i, j int) bool { return versionOf(matches[i]) > versionOf(matches[j]) })
	for _, dir := range matches {
		if b := (Binaries{Dir: dir}); b.complete() {
			return b, nil
		}
	}
	return Binaries{}, ErrNoBinaries
}

func (b Binaries) complete() bool {
	for _, name := range []string{"initdb", "postgres"} {
		st, err := os.Stat(b.path(name))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// versionOf reads the major version from /usr/lib/postgresql/<version>/bin.
func versionOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(strings.TrimSpace(filepath.Base(filepath.Dir(binDir))), 64)
	return v
}
