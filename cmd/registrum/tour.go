package main

import (
	"github.com/spf13/cobra"

	"github.com/registrum/registrum/cmd/registrum/internal/dev"
	"github.com/registrum/registrum/cmd/registrum/internal/invocation"
)

func init() { register(newTourCmd) }

func newTourCmd() *cobra.Command {
	var o dev.TourOptions
	cmd := &cobra.Command{
		Use:   "tour [--data DIR] [--step N] [--no-pause]",
		Short: "Walk through a running registrum dev, every request shown as a curl command",
		Long: `Tour walks through the registry that a running ` + "`registrum dev`" + ` serves, one
capability a step: an access token, a create, a patch under If-Match, a
filtered page and its cursor, a snapshot read, a change request whose
attachment is scanned (the EICAR test string rejected, a clean document
approved), submit, apply, a reviewed request through the review desk, an
immediate action, GeoJSON, a bulk import and a delivered webhook.

For each request it prints the curl command equivalent to what it sends,
every value filled in (copy-pasteable as printed, for as long as the token
it carries is valid; a fresh token is taken when the old one nears its
expiry), then the answer and one line on what to notice. It finds dev
through its data folder (--data, the same as dev's).

--step N starts the tour at step N: the steps before it run first without
output, because they make the records step N works on. Between steps the
tour waits for Enter; --no-pause runs straight through (for CI), approving
the reviewed request in the desk itself. docs/tour.md explains each step.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Command = invocation.Command()
			o.In, o.Out = cmd.InOrStdin(), cmd.OutOrStdout()
			return dev.Tour(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.DataDir, "data", ".registrum-dev", "the data folder of the running registrum dev")
	cmd.Flags().IntVar(&o.Step, "step", 1, "start at step N; the steps before it run first without output, to make the records it works on")
	cmd.Flags().BoolVar(&o.NoPause, "no-pause", false, "do not wait for Enter between steps, and approve the reviewed request in the desk without waiting for a reviewer (for CI)")
	return cmd
}
