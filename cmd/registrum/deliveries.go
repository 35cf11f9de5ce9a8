package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os/user"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/registrum/registrum/hooks"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store"
)

func init() {
	register(newDeliveriesCmd)
}

func newDeliveriesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deliveries",
		Short: "Operator commands on event deliveries, run on the database directly",
		Long: `The event deliveries of a record host: list them (identifiers and states,
never values) and replay dead letters. These commands open the database of the
runtime configuration directly; no HTTP route exists for deliveries, payloads
or replay. An empty list is neither history nor proof that a receiver
accepted anything.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newDeliveriesListCmd(), newDeliveriesReplayCmd())
	return cmd
}

// operatorStore opens the store of the configuration at cfgPath for
// operator commands.
func operatorStore(cmd *cobra.Command, cfgPath string) (*config.Config, *store.Store, func(), error) {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, nil, nil, err
	}
	pool, err := connectDatabase(cmd.Context(), cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := store.ForOperator(cmd.Context(), pool)
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	return cfg, st, pool.Close, nil
}

func newDeliveriesListCmd() *cobra.Command {
	var cfgPath, state string
	var limit int
	cmd := &cobra.Command{
		Use:   "list --config FILE [--state STATE] [--limit N]",
		Short: "List the latest event deliveries as JSON, without values",
		Long: `List prints the latest event deliveries, newest first, as one JSON document:
{"deliveries": [{eventId, deliveryId, entity, hook, handler, destination,
generation, state, attempt, payloadAvailable, payloadExpiresAt, nextAttemptAt,
capturedAt}]}. STATE is pending, leased, delivered, dead_lettered, expired or
failed; N is 1 to 100 (default 25).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > store.MaxDeliveryList {
				return withExitCode(2, fmt.Errorf("deliveries list: --limit must be between 1 and %d", store.MaxDeliveryList))
			}
			switch state {
			case "", store.DeliveryPending, store.DeliveryLeased, store.DeliveryDelivered, store.DeliveryDeadLettered, store.DeliveryExpired, store.DeliveryFailed:
			default:
				return withExitCode(2, fmt.Errorf("deliveries list: unknown --state %q", state))
			}
			_, st, closeDB, err := operatorStore(cmd, cfgPath)
			if err != nil {
				return err
			}
			defer closeDB()
			ds, err := st.ListDeliveries(cmd.Context(), state, limit)
			if err != nil {
				return err
			}
			if ds == nil {
				ds = []store.DeliverySummary{}
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(map[string]any{"deliveries": ds})
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "runtime configuration file")
	cmd.Flags().StringVar(&state, "state", "", "only deliveries in this state")
	cmd.Flags().IntVar(&limit, "limit", 25, "at most this many deliveries (1 to 100)")
	cmd.MarkFlagRequired("config")
	return cmd
}

func newDeliveriesReplayCmd() *cobra.Command {
	var cfgPath, eventID, deliveryID, operator string
	var generation int
	cmd := &cobra.Command{
		Use:   "replay --config FILE --event-id ID --delivery-id ID --expected-generation N",
		Short: "Replay a dead-lettered delivery as its next generation",
		Long: `Replay reopens a dead letter: only a dead_lettered delivery of the event and
delivery named, at generation N, whose payload is retained and unexpired and
whose destination is still bound as when it was captured (a local handler's:
the same module digest). The delivery is sent again as generation N+1 with a
new Idempotency-Key, by whichever host works the jobs. The replay is audited
with the operator's name; every refusal is the same message and is audited
too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if generation < 1 {
				return withExitCode(2, errors.New("deliveries replay: --expected-generation must be a positive integer"))
			}
			if operator == "" {
				if u, err := user.Current(); err == nil {
					operator = u.Username
				}
			}
			if operator == "" {
				return withExitCode(2, errors.New("deliveries replay: --operator is required"))
			}
			cfg, st, closeDB, err := operatorStore(cmd, cfgPath)
			if err != nil {
				return err
			}
			defer closeDB()
			pkg, err := model.Load(cfg.Package)
			if err != nil {
				return err
			}
			bindings, modules, err := eventBindings(cfg, pkg)
			if err != nil {
				return err
			}
			gen, err := st.Replay(cmd.Context(), eventID, deliveryID, generation, bindings, modules, operator)
			if errors.Is(err, store.ErrReplayRefused) {
				return fmt.Errorf("deliveries replay: %w", err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "delivery %s of event %s replayed as generation %d\n", deliveryID, eventID, gen)
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "runtime configuration file")
	cmd.Flags().StringVar(&eventID, "event-id", "", "the event's id (ce-id)")
	cmd.Flags().StringVar(&deliveryID, "delivery-id", "", "the delivery's id (deliveries list)")
	cmd.Flags().IntVar(&generation, "expected-generation", 0, "the dead letter's current generation")
	cmd.Flags().StringVar(&operator, "operator", "", "name recorded in the replay audit (default: the OS user)")
	for _, f := range []string{"config", "event-id", "delivery-id", "expected-generation"} {
		cmd.MarkFlagRequired(f)
	}
	return cmd
}

// eventBindings returns the destination bindings of the configuration and
// the module digests of the package's local handlers, by hook id.
func eventBindings(cfg *config.Config, pkg *model.Package) (map[string]string, map[string]string, error) {
	bindings := map[string]string{}
	for id, d := range cfg.EventDestinations {
		u, err := url.Parse(d.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("deliveries: destination %s: %w", id, err)
		}
		bindings[id] = (&hooks.Destination{ID: id, URL: u, Network: d.Network, Ceiling: d.ClassificationCeiling}).BindingDigest()
	}
	modules := map[string]string{}
	for _, e := range pkg.Entities {
		for _, h := range e.Hooks {
			if h.Handler != nil && h.Handler.Module != "" {
				if m := pkg.ModuleByID(h.Handler.Module); m != nil {
					modules[h.ID] = m.SHA256
				}
			}
		}
	}
	return bindings, modules, nil
}

// checkEventBindings refuses when pending or leased url deliveries were
// captured for a destination binding the configuration no longer has: the
// change would strand them.
func checkEventBindings(cmd *cobra.Command, cfg *config.Config, pkg *model.Package, pool *pgxpool.Pool) error {
	st, err := store.ForOperator(cmd.Context(), pool)
	if err != nil {
		return err
	}
	pending, err := st.PendingBindings(cmd.Context())
	if err != nil {
		return err
	}
	bindings, _, err := eventBindings(cfg, pkg)
	if err != nil {
		return err
	}
	for _, b := range pending {
		if bindings[b.DestinationID] != b.BindingDigest {
			return fmt.Errorf("activate: refused, nothing changed: %d pending event deliveries were captured for destination %s as it was bound before; bind it as it was (url, network, classificationCeiling) until they end", b.Deliveries, b.DestinationID)
		}
	}
	return nil
}
