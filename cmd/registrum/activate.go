package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store"
)

func init() {
	register(newActivateCmd)
}

func newActivateCmd() *cobra.Command {
	var cfgPath string
	var confirm bool
	cmd := &cobra.Command{
		Use:   "activate PACKAGE_DIR --config FILE [--confirm-destructive]",
		Short: "Move the database to a new package revision",
		Long: `Activate moves the database of the runtime configuration FILE to the compiled
package in PACKAGE_DIR: the table changes between the active package and this
one are derived and applied in one transaction. Additive changes (a new entity,
a new optional field, a new index, a widened bound) apply directly. Destructive
ones (a dropped entity or field, a changed type, a new required field, a
narrowed bound, a new constraint) are refused, each named, unless
--confirm-destructive is given; nothing changes when they are refused or when
the stored records do not fit the new tables. Hosts serving the previous
package stop; open ingestion runs become blocked (activePackageChanged). Point
the configuration's package at PACKAGE_DIR and start the hosts again.
Activation is refused, nothing changed, while pending event deliveries were
captured for a destination the configuration no longer binds as it was.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			pkg, err := model.Load(args[0])
			if err != nil {
				return err
			}
			pool, err := connectDatabase(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer pool.Close()
			if err := checkEventBindings(cmd, cfg, pkg, pool); err != nil {
				return err
			}
			act, err := store.Activate(cmd.Context(), pool, pkg, confirm)
			var de *store.DestructiveError
			if errors.As(err, &de) {
				return fmt.Errorf("activate: refused, nothing changed: %w\nrun again with --confirm-destructive to apply them", err)
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(act.Changes) == 0 {
				fmt.Fprintf(out, "activated %s (from %s); the tables are unchanged\n", act.To, act.From)
				return nil
			}
			fmt.Fprintf(out, "activated %s (from %s) with %d table change(s):\n", act.To, act.From, len(act.Changes))
			for _, c := range act.Changes {
				kind := "additive"
				if c.Destructive {
					kind = "destructive"
				}
				fmt.Fprintf(out, "  - %s (%s)\n", c.Description, kind)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "runtime configuration file")
	cmd.Flags().BoolVar(&confirm, "confirm-destructive", false, "apply destructive changes (dropped entities or fields, changed types, new required fields, narrowed bounds, new constraints)")
	cmd.MarkFlagRequired("config")
	return cmd
}
