package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store"
)

func init() {
	register(newHistoryCmd)
}

func newHistoryCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Operator commands on retained record history, run on the database directly",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newHistoryListCmd(), newHistoryEraseCmd())
	return cmd
}

// historyTarget checks --entity and --record and connects to the database
// of the runtime configuration.
func historyTarget(cmd *cobra.Command, verb, cfgPath, entity, record string) (*model.Entity, func(), *pgxpool.Pool, error) {
	if _, err := uuid.Parse(record); err != nil {
		return nil, nil, nil, withExitCode(2, fmt.Errorf("history %s: --record %q is not a record id", verb, record))
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, nil, nil, err
	}
	pkg, err := model.Load(cfg.Package)
	if err != nil {
		return nil, nil, nil, err
	}
	e := pkg.EntityByID(entity)
	if e == nil {
		return nil, nil, nil, withExitCode(2, fmt.Errorf("history %s: %q is not an entity of the package", verb, entity))
	}
	pool, err := connectDatabase(cmd.Context(), cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	return e, pool.Close, pool, nil
}

func newHistoryListCmd() *cobra.Command {
	var cfgPath, entity, record string
	cmd := &cobra.Command{
		Use:   "list --config FILE --entity ENTITY --record ID",
		Short: "List the revisions of a record with their commits",
		Long: `List prints every revision of record ID of ENTITY, oldest first: revision,
lifecycle, commit id, time written, and whether its values were erased. The
commit ids are what history erase takes as --before.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, done, pool, err := historyTarget(cmd, "list", cfgPath, entity, record)
			if err != nil {
				return err
			}
			defer done()
			revs, err := store.RecordJournal(cmd.Context(), pool, e.ID, record)
			if err != nil {
				return err
			}
			if len(revs) == 0 {
				return fmt.Errorf("history list: %s/%s has no revisions", e.ID, record)
			}
			for _, r := range revs {
				erased := ""
				if r.Erased {
					erased = " erased"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%d %s %s %s%s\n", r.Revision, r.Lifecycle, r.CommitID, r.CreatedAt.Format(time.RFC3339Nano), erased)
			}
			return nil
		},
	}
	historyFlags(cmd, &cfgPath, &entity, &record)
	return cmd
}

func newHistoryEraseCmd() *cobra.Command {
	var cfgPath, entity, record, before string
	cmd := &cobra.Command{
		Use:   "erase --config FILE --entity ENTITY --record ID --before COMMIT",
		Short: "Erase the retained revisions of a record written before a commit",
		Long: `Erase removes the stored values and change context of every revision of
record ID of ENTITY written before its revision of commit COMMIT (see history
list), on the database of the runtime configuration FILE. The revision of
COMMIT and later ones, so the current state, stay. Afterwards revision reads
leave the erased revisions out, every :snapshot at or after the earliest
erased commit answers 503 source.unavailable (later ones included), and the
ingestion receipts of the erased commits answer 410 ingestion.receipt_erased.
The erasure is recorded in the audit trail under the printed trace id. It
cannot be undone. There is no HTTP route for it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := uuid.Parse(before); err != nil {
				return withExitCode(2, fmt.Errorf("history erase: --before %q is not a commit id (see history list)", before))
			}
			e, done, pool, err := historyTarget(cmd, "erase", cfgPath, entity, record)
			if err != nil {
				return err
			}
			defer done()
			// The audit entry names the record by the keyed reference the
			// entries of its writes carry.
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			root, err := cfg.HostKey()
			if err != nil {
				return err
			}
			keys, err := records.DeriveKeys(root)
			if err != nil {
				return err
			}
			trace := records.NewTraceID()
			res, err := store.EraseHistory(cmd.Context(), pool, e.ID, record, keys.RecordReference(e.ID, record), before, trace)
			switch {
			case errors.Is(err, store.ErrNotFound):
				return fmt.Errorf("history erase: commit %s wrote no revision of %s/%s (see history list)", before, e.ID, record)
			case errors.Is(err, store.ErrNothingToErase):
				return fmt.Errorf("history erase: %s/%s has no retained revision before commit %s", e.ID, record, before)
			case err != nil:
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "erased %d revision(s) of %s/%s before revision %d; %d ingestion receipt(s) erased; %d stored answer(s) erased; audit trace %s\n",
				res.Revisions, e.ID, record, res.BeforeRevision, res.Receipts, res.Outcomes, trace)
			return nil
		},
	}
	historyFlags(cmd, &cfgPath, &entity, &record)
	cmd.Flags().StringVar(&before, "before", "", "commit id: revisions written before the record's revision of this commit are erased")
	cmd.MarkFlagRequired("before")
	return cmd
}

func historyFlags(cmd *cobra.Command, cfgPath, entity, record *string) {
	cmd.Flags().StringVar(cfgPath, "config", "", "runtime configuration file")
	cmd.Flags().StringVar(entity, "entity", "", "entity id")
	cmd.Flags().StringVar(record, "record", "", "record id")
	for _, f := range []string{"config", "entity", "record"} {
		cmd.MarkFlagRequired(f)
	}
}
