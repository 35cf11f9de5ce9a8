package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store"
)

func init() {
	register(newAttachmentsCmd)
}

func newAttachmentsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "attachments",
		Short: "Operator commands on change request attachments, run on the database directly",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newAttachmentsEraseCmd(), newAttachmentsSweepCmd())
	return cmd
}

func newAttachmentsEraseCmd() *cobra.Command {
	var cfgPath, entity, record, slot string
	cmd := &cobra.Command{
		Use:   "erase --config FILE --entity ENTITY --record ID --slot SLOT",
		Short: "Erase the content of an attachment slot of a change request",
		Long: `Erase removes the content of slot SLOT of the change request ID of ENTITY, in
every proposal version that holds it, on the database of the runtime
configuration FILE. The slot keeps its id, proposal version, filled and erased
state, size and hash; its content type, verification status, uploader and upload
time are removed, downloads answer 404, and the bytes themselves are deleted
once no other live attachment holds the same content. The erasure is recorded
in the audit trail under the printed trace id. There is no HTTP route for it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := uuid.Parse(record); err != nil {
				return withExitCode(2, fmt.Errorf("attachments erase: --record %q is not a record id", record))
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
			if e == nil || !e.IsRequestEntity() || e.Slot(slot) == nil {
				return withExitCode(2, fmt.Errorf("attachments erase: %s has no attachment slot %q", entity, slot))
			}
			pool, err := connectDatabase(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer pool.Close()
			trace := records.NewTraceID()
			res, err := store.EraseAttachment(cmd.Context(), pool, e.ID, record, slot, trace)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("attachments erase: slot %s of %s/%s holds no content to erase", slot, e.ID, record)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "erased slot %s of %s/%s in %d proposal version(s); content deleted: %t; audit trace %s\n",
				slot, e.ID, record, res.Slots, res.ContentDeleted, trace)
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "runtime configuration file")
	cmd.Flags().StringVar(&entity, "entity", "", "request entity id")
	cmd.Flags().StringVar(&record, "record", "", "request record id")
	cmd.Flags().StringVar(&slot, "slot", "", "attachment slot id")
	for _, f := range []string{"config", "entity", "record", "slot"} {
		cmd.MarkFlagRequired(f)
	}
	return cmd
}

func newAttachmentsSweepCmd() *cobra.Command {
	var cfgPath string
	var age time.Duration
	cmd := &cobra.Command{
		Use:   "sweep --config FILE [--older-than DURATION]",
		Short: "Delete stored attachment content that no slot refers to",
		Long: `Sweep deletes content an upload stored but no slot refers to (its write was
refused after the bytes arrived), when it is older than DURATION (default 1h).
Content an upload is using at that moment is left alone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if age < time.Minute {
				return withExitCode(2, errors.New("attachments sweep: --older-than must be at least 1m"))
			}
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			pool, err := connectDatabase(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer pool.Close()
			trace := records.NewTraceID()
			n, err := store.SweepContent(cmd.Context(), pool, age, trace)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %d unreferenced content(s); audit trace %s\n", n, trace)
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "runtime configuration file")
	cmd.Flags().DurationVar(&age, "older-than", time.Hour, "only content stored longer ago than this")
	cmd.MarkFlagRequired("config")
	return cmd
}
