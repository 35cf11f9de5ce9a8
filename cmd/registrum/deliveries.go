package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os/user"
	"time"

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
	var cfgPath, eventID, deliveryID, operator, destination, since, until, state string
	var generation int
	var dryRun bool
	cmd := &cobra.Command{
		Use: `replay --config FILE --event-id ID --delivery-id ID --expected-generation N
  replay --config FILE --destination ID [--since TIME] [--until TIME] [--state dead_lettered] [--dry-run]`,
		Short: "Replay dead-lettered deliveries as their next generation",
		Long: `Replay reopens dead letters: only dead_lettered deliveries whose payload is
retained and unexpired and whose destination is still bound as when they were
captured (a local handler's: the same module digest). Each is sent again as its
next generation with a new Idempotency-Key, by whichever host works the jobs,
and audited with the operator's name; every refusal is the same message and is
audited too.

The first form replays one delivery, named with its event, its id and its
current generation N (it becomes N+1).

The second form replays, oldest first, every dead letter of one url
destination captured in a window: --since and --until are RFC 3339 times
(since <= captured < until; either may be left open). --state names the state
replayed; dead_lettered is the only replayable one. It prints how many dead
letters match and how many of them are replayable, then how many it replayed;
with --dry-run it prints the counts and changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bulk := destination != ""
			single := eventID != "" || deliveryID != "" || generation != 0
			switch {
			case bulk && single:
				return withExitCode(2, errors.New("deliveries replay: name one delivery (--event-id, --delivery-id, --expected-generation) or a --destination, not both"))
			case !bulk && (since != "" || until != "" || state != "" || dryRun):
				return withExitCode(2, errors.New("deliveries replay: --since, --until, --state and --dry-run select by --destination"))
			case !bulk && (eventID == "" || deliveryID == ""):
				return withExitCode(2, errors.New("deliveries replay: --event-id, --delivery-id and --expected-generation name the delivery (or --destination selects dead letters)"))
			case !bulk && generation < 1:
				return withExitCode(2, errors.New("deliveries replay: --expected-generation must be a positive integer"))
			}
			filter := store.ReplayFilter{DestinationID: destination, State: state}
			for _, t := range []struct {
				flag, v string
				to      *time.Time
			}{{"--since", since, &filter.Since}, {"--until", until, &filter.Until}} {
				if t.v == "" {
					continue
				}
				v, err := time.Parse(time.RFC3339Nano, t.v)
				if err != nil {
					return withExitCode(2, fmt.Errorf("deliveries replay: %s must be an RFC 3339 time (2025-03-01T12:00:00Z): %q", t.flag, t.v))
				}
				*t.to = v
			}
			if state != "" && state != store.DeliveryDeadLettered {
				return withExitCode(2, fmt.Errorf("deliveries replay: --state %s: only dead_lettered deliveries can be replayed", state))
			}
			if !filter.Since.IsZero() && !filter.Until.IsZero() && !filter.Since.Before(filter.Until) {
				return withExitCode(2, errors.New("deliveries replay: --since must be before --until"))
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
			out := cmd.OutOrStdout()
			if bulk {
				n, err := st.ReplayMatching(cmd.Context(), filter, bindings, modules, operator, true)
				if err != nil {
					return fmt.Errorf("deliveries replay: %w", err)
				}
				fmt.Fprintf(out, "destination %s: dead letters matched: %d, replayable: %d\n", destination, n.Matched, n.Replayable)
				if dryRun {
					return nil
				}
				n, err = st.ReplayMatching(cmd.Context(), filter, bindings, modules, operator, false)
				if err != nil {
					return fmt.Errorf("deliveries replay: %w", err)
				}
				fmt.Fprintf(out, "destination %s: replayed as their next generation: %d, refused (changed meanwhile): %d\n", destination, n.Replayed, n.Refused)
				return nil
			}
			gen, err := st.Replay(cmd.Context(), eventID, deliveryID, generation, bindings, modules, operator)
			if errors.Is(err, store.ErrReplayRefused) {
				return fmt.Errorf("deliveries replay: %w", err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "delivery %s of event %s replayed as generation %d\n", deliveryID, eventID, gen)
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "runtime configuration file")
	cmd.Flags().StringVar(&eventID, "event-id", "", "the event's id (ce-id)")
	cmd.Flags().StringVar(&deliveryID, "delivery-id", "", "the delivery's id (deliveries list)")
	cmd.Flags().IntVar(&generation, "expected-generation", 0, "the dead letter's current generation")
	cmd.Flags().StringVar(&destination, "destination", "", "replay the dead letters of this url destination")
	cmd.Flags().StringVar(&since, "since", "", "with --destination: captured at or after this RFC 3339 time")
	cmd.Flags().StringVar(&until, "until", "", "with --destination: captured before this RFC 3339 time")
	cmd.Flags().StringVar(&state, "state", "", "with --destination: the state replayed (dead_lettered, the default and only one)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "with --destination: print the counts, replay nothing")
	cmd.Flags().StringVar(&operator, "operator", "", "name recorded in the replay audit (default: the OS user)")
	cmd.MarkFlagRequired("config")
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
