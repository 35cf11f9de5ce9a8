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
	register(newRequestsCmd)
}

func newRequestsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "requests",
		Short: "Operator commands on change requests, run on the database directly",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newRequestsEraseCmd())
	return cmd
}

func newRequestsEraseCmd() *cobra.Command {
	var cfgPath, entity, record string
	var version int64
	cmd := &cobra.Command{
		Use:   "erase --config FILE --entity ENTITY --record ID [--proposal-version N]",
		Short: "Erase the proposal detail (frozen plans) of a change request",
		Long: `Erase removes the frozen plan of every proposal of the change request ID of
ENTITY (or of proposal N only), on the database of the runtime configuration
FILE, and records when. Only entities whose retention mode is operator-erase
allow it. Afterwards data.request.detailErased is true, history items carry no
writes, and an erased proposal can no longer be applied. There is no HTTP
route for it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if version < 0 {
				return withExitCode(2, errors.New("requests erase: --proposal-version must be a positive integer"))
			}
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			pkg, err := model.Load(cfg.Package)
			if err != nil {
				return err
			}
			e := pkg.EntityByID(entity)
			if e == nil || !e.IsRequestEntity() {
				return fmt.Errorf("requests erase: %q is not a request entity of the package", entity)
			}
			if e.ChangeRequest.Retention.Mode != model.OperatorErase {
				return fmt.Errorf("requests erase: %s keeps its proposal detail (retention mode %q); erasure needs retention mode %s", e.ID, e.ChangeRequest.Retention.Mode, model.OperatorErase)
			}
			pool, err := connectDatabase(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer pool.Close()
			n, err := store.EraseProposalDetail(cmd.Context(), pool, e, record, version)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("requests erase: no such request or proposal: %s/%s", e.ID, record)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "erased the detail of %d proposal(s) of %s/%s\n", n, e.ID, record)
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "runtime configuration file")
	cmd.Flags().StringVar(&entity, "entity", "", "request entity id")
	cmd.Flags().StringVar(&record, "record", "", "request record id")
	cmd.Flags().Int64Var(&version, "proposal-version", 0, "erase only this proposal (default: every proposal)")
	for _, f := range []string{"config", "entity", "record"} {
		cmd.MarkFlagRequired(f)
	}
	return cmd
}
