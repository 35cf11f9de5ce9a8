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
Ctrl-C or SIGTERM stops it all, PostgreSQL included.

Bring your own: --event-destinations and --review-config take files in the
runtime configuration's format (docs/record-host.md) holding your own
eventDestinations, reviewAuthorities and executors; the secrets they name
are read from the data folder's secrets folder. --own-verifiers calls the
package's http verifiers where it says instead of dev's EICAR scanner.
The desk port is listened on only when dev runs the desk: the project has
reviewed requests and no --review-config.

A changed project is activated on start when its table changes are
additive; destructive ones (a dropped field or entity) need
--confirm-destructive, or a new --data folder.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Out = cmd.OutOrStdout()
			level := slog.LevelWarn
			if verbose {
				// Debug shows, among the rest, why each concealed 404 was
				// answered (never in the answer itself).
				level = slog.LevelDebug
			}
			o.Log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			o.Command = invocation.Command()
			o.Args = os.Args[1:]
			return dev.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.DataDir, "data", ".registrum-dev", "folder that keeps the database, keys and package")
	cmd.Flags().StringVar(&o.ProjectDir, "project", "examples/childsupport", "registry project to compile and serve")
	cmd.Flags().IntVar(&o.Port, "port", 8080, "record host port on 127.0.0.1 (0 picks a free port)")
	cmd.Flags().IntVar(&o.IssuerPort, "issuer-port", 8081, "token issuer port on 127.0.0.1 (0 picks a free port)")
	cmd.Flags().IntVar(&o.DeskPort, "desk-port", 8082, "review desk port on 127.0.0.1 (0 picks a free port)")
	cmd.Flags().IntVar(&o.VerifierPort, "verifier-port", 8083, "attachment scanner port on 127.0.0.1 (0 picks a free port); the example's http verifier names 8083, dev points its package at this port")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "log every request, and why each concealed 404 was answered (debug level)")
	cmd.Flags().StringVar(&o.EventDestinations, "event-destinations", "", "file with an eventDestinations block binding the example's url hooks to your own receivers (default: the example receiver dev runs)")
	cmd.Flags().StringVar(&o.ReviewConfig, "review-config", "", "file with reviewAuthorities and/or executors blocks naming your own review authorities and executors (default: the review desk dev runs, on --desk-port)")
	cmd.Flags().BoolVar(&o.OwnVerifiers, "own-verifiers", false, "call the package's http verifiers at the endpoints it names, your own services, instead of serving them with dev's EICAR scanner")
	cmd.Flags().BoolVar(&o.ConfirmDestructive, "confirm-destructive", false, "apply a changed project's destructive table changes (dropped fields or entities: their data is lost)")
	return cmd
}
