package dev

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/registrum/registrum/cmd/registrum/internal/invocation"
)

// runningName is the file a running dev keeps in its data folder: where
// its services listen, for `registrum tour`. It is removed when dev stops.
const runningName = "registrum-dev-running.json"

// runningState is the content of runningName.
type runningState struct {
	// PID is the process id of the running dev.
	PID int `json:"pid"`
	// ProjectDir is the served project's folder, absolute.
	ProjectDir string `json:"projectDir"`
	// Host is the record host's base URL.
	Host string `json:"host"`
	// TokenURL is the dev issuer's token endpoint.
	TokenURL string `json:"tokenUrl"`
	// ClientID and KeyFile are the standard demo client's id and private key.
	ClientID string `json:"clientId"`
	KeyFile  string `json:"keyFile"`
	// Desk is the review desk's URL and PasswordFile the file holding its
	// reviewer's password; both empty when no desk runs.
	Desk         string `json:"desk,omitempty"`
	PasswordFile string `json:"passwordFile,omitempty"`
	// ReceiverLog is the example webhook receiver's log, empty when dev
	// delivers to the operator's own destinations or has none.
	ReceiverLog string `json:"receiverLog,omitempty"`
}

// writeRunning writes st into the data folder.
func writeRunning(data string, st runningState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("dev: %s: %w", runningName, err)
	}
	path := filepath.Join(data, runningName)
	if err := os.WriteFile(path+".tmp", append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("dev: write %s: %w", runningName, err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("dev: write %s: %w", runningName, err)
	}
	return nil
}

// errNotRunning is the cause of findRunning's error when no dev runs on
// the data folder.
var errNotRunning = errors.New("registrum dev is not running")

// findRunning returns the state of the dev running on the data folder. A
// dev runs when the folder's lock is held; command is how to start one, for
// the message when none runs.
func findRunning(data, command string) (*runningState, error) {
	start := fmt.Sprintf("start it in another terminal with `%s dev`", command)
	if data != defaultDataDir() {
		start = fmt.Sprintf("start it in another terminal with `%s dev --data %s`", command, data)
	}
	notRunning := fmt.Errorf("tour: %w on the data folder %s: %s, wait for its summary, then run the tour again", errNotRunning, data, start)
	f, err := os.Open(filepath.Join(data, lockName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, notRunning
	}
	if err != nil {
		return nil, fmt.Errorf("tour: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return nil, notRunning
	} else if !errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("tour: lock %s: %w", f.Name(), err)
	}
	b, err := os.ReadFile(filepath.Join(data, runningName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("tour: registrum dev on %s is still starting: wait for its summary, then run the tour again", data)
	}
	if err != nil {
		return nil, fmt.Errorf("tour: %w", err)
	}
	var st runningState
	if err := json.Unmarshal(b, &st); err != nil || st.Host == "" {
		return nil, fmt.Errorf("tour: %s is not what registrum dev writes: restart registrum dev", filepath.Join(data, runningName))
	}
	return &st, nil
}

// defaultDataDir is the data folder dev and the tour use without --data.
func defaultDataDir() string {
	abs, _ := filepath.Abs(".registrum-dev")
	return abs
}

// tourCommand is the command that takes the tour of the dev on data:
// --data is named when it is not the default folder.
func tourCommand(command, data string) string {
	if data == defaultDataDir() {
		return command + " tour"
	}
	return command + " tour --data " + invocation.ShellQuote(data)
}
