package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/registrum/registrum/cmd/registrum/internal/dev"
	"github.com/registrum/registrum/cmd/registrum/internal/invocation"
)

func init() { register(newDevCmd) }

func newDevCmd() *cobra.Command {
	var o dev.Options
	var verbose bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything on this machine for a first look",
		Long: `Dev starts a private PostgreSQL cluster from the machine's PostgreSQL
binaries (no server needs to be installed or running), compiles the example
registry, serves it with the record host on loopback, starts a token issuer
with local keys and demo clients, runs the review desk of examples/reviewdesk
as the review authority of the project's reviewed requests, and prints a
summary: what runs where, the token command, and the command of the guided
tour (registrum tour, docs/tour.md). Everything is kept in the data folder;
Ctrl-C or SIGTERM stops it all, PostgreSQL included.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Out = cmd.OutOrStdout()
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			o.Log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			o.Command = invocation.Command()
			return dev.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.DataDir, "data", ".registrum-dev", "folder that keeps the database, keys and package")
	cmd.Flags().StringVar(&o.ProjectDir, "project", "examples/childsupport", "registry project to compile and serve")
	cmd.Flags().IntVar(&o.Port, "port", 8080, "record host port on 127.0.0.1 (0 picks a free port)")
	cmd.Flags().IntVar(&o.IssuerPort, "issuer-port", 8081, "token issuer port on 127.0.0.1 (0 picks a free port)")
	cmd.Flags().IntVar(&o.DeskPort, "desk-port", 8082, "review desk port on 127.0.0.1 (0 picks a free port)")
	cmd.Flags().IntVar(&o.VerifierPort, "verifier-port", 8083, "attachment scanner port on 127.0.0.1 (0 picks a free port); the example's http verifier names 8083, dev points its package at this port")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "log every request")
	cmd.Flags().StringVar(&o.EventDestinations, "event-destinations", "", "file with an eventDestinations block binding the example's url hooks to your own receivers (default: the example receiver dev runs)")
	return cmd
}
