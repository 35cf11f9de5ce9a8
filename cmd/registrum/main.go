// Command registrum is the one Registrum binary: the token issuer, the record
// host, and the toolchain registry authors and operators use.
//
// This package holds command wiring only. Each subcommand lives in its own file
// and registers itself from an init function with [register], so the services
// and tools can be wired independently.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"
)

// subcommands holds the constructors registered by the files of this package.
var subcommands []func() *cobra.Command

// register adds a subcommand constructor to the root command. Call it from init.
func register(newCmd func() *cobra.Command) {
	subcommands = append(subcommands, newCmd)
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "registrum",
		Short:         "Registrum: a host for institutional registries",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	for _, newCmd := range subcommands {
		root.AddCommand(newCmd())
	}
	root.Version = version()
	root.SetVersionTemplate("registrum {{.Version}}\n")
	// A flag the command does not know, a bad flag value, a missing required
	// flag or argument: usage errors, exit code 2 for every command.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withExitCode(2, err) })
	markRuns(root)
	return root
}

// commandRan is set when a command's own code starts: an error before that
// is a usage error (cobra's checks of arguments and required flags).
var commandRan bool

// markRuns wraps the run function of every command so that main can tell
// usage errors (exit code 2) from the command's own failures.
func markRuns(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			commandRan = true
			return run(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markRuns(sub)
	}
}

// version is the module version and VCS revision the binary was built
// from, as the Go toolchain recorded them.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(no build information)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev != "" {
		v += " (revision " + rev + modified + ")"
	}
	return v + " " + info.GoVersion
}

// exitError carries a specific process exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withExitCode makes a command fail with the given exit code.
func withExitCode(code int, err error) error { return &exitError{code: code, err: err} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRootCmd().ExecuteContext(ctx)
	if err == nil {
		return
	}
	code := 1
	if !commandRan {
		code = 2
	}
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(os.Stderr, "registrum:", msg)
	}
	os.Exit(code)
}
