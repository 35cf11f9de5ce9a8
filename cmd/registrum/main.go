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
	"regexp"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/registrum/registrum/cmd/registrum/internal/invocation"
	"github.com/registrum/registrum/internal/gctarget"
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
	// flag or argument: usage errors, exit code 2 for every command, each
	// naming the command and pointing at its --help.
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError(c, err) })
	markRuns(root)
	return root
}

// usageError is the error of a command line c refuses before its own code
// runs (an unknown flag, a missing or stray argument, a required flag not
// given): exit code 2, a message naming the command and its usage line, and
// where to read more.
func usageError(c *cobra.Command, err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return err // already decorated
	}
	name := c.CommandPath()
	if c.HasParent() {
		name = strings.TrimPrefix(name, c.Root().Name()+" ")
	}
	inv := invocation.Command()
	if !c.HasParent() {
		return withExitCode(2, fmt.Errorf("%w\nsee %s --help", err, inv))
	}
	args := strings.TrimPrefix(c.Use, c.Name())
	if args == "" && c.HasSubCommands() {
		args = " COMMAND"
	}
	return withExitCode(2, fmt.Errorf("%s: %w\nusage: %s %s%s\nsee %s %s --help", name, err, inv, name, args, inv, name))
}

// commandRan is set when a command's own code starts: an error before that
// is a usage error (cobra's checks of arguments and required flags).
var commandRan bool

// markRuns wraps the run function of every command so that main can tell
// usage errors (exit code 2) from the command's own failures, and its
// argument check so that a wrong argument count is a usage error naming
// the command (usageError).
func markRuns(c *cobra.Command) {
	if c.HasParent() && !c.Runnable() && c.HasSubCommands() {
		// A group (registrum plugins): its help, or an unknown subcommand
		// refused, where cobra would print the help and succeed.
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return nil
		}
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			commandRan = true
			return run(cmd, args)
		}
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError(cmd, err)
			}
			return nil
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
	// Every registrum process runs at the collector's target of
	// internal/gctarget unless GOGC is set.
	gctarget.Apply()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, err := newRootCmd().ExecuteContextC(ctx)
	if err == nil {
		return
	}
	if !commandRan {
		// Cobra's own checks (required flags, unknown commands) that the
		// hooks above do not see.
		err = usageError(cmd, err)
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if msg := userMessage(err.Error()); msg != "" {
		fmt.Fprintln(os.Stderr, "registrum:", msg)
	}
	os.Exit(code)
}

// internalPrefix matches the name of an internal Go package heading a
// segment of an error message ("tokensource: ", "store: "), which the
// libraries write for their Go callers and a user of the command has no use
// for. Command names (compile:, dev:, issuer:, keys:, config:, …) stay.
var internalPrefix = regexp.MustCompile(`(^|: |\n)(?:tokensource|store|layout|pglocal|project|model|secrets|signer|access|audit|hooks|records|cursor|values|canonjson|chunking|metadata|planners|plugins/verifier|verifier|webhook|strictyaml|envconfig|auth|client|host|gis|actions|querysql|query|source): `)

// userMessage is msg with internal package names taken out of it.
func userMessage(msg string) string {
	for {
		out := internalPrefix.ReplaceAllString(msg, "$1")
		if out == msg {
			return out
		}
		msg = out
	}
}
