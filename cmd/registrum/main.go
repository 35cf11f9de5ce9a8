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
	return root
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
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(os.Stderr, "registrum:", msg)
	}
	os.Exit(code)
}
