package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/registrum/registrum/host"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/store"
)

func init() {
	register(newServeCmd)
	register(newMigrateCmd)
}

func newServeCmd() *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "serve --config FILE",
		Short: "Run the record host",
		Long: `Serve runs the record host described by the runtime configuration FILE: it
loads the compiled package, refuses an unmigrated or newer database schema,
creates the package's entity tables on first start, and serves /v1 on the
configured listener (and Prometheus metrics on the metrics listener, when
configured) until SIGINT or SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, h, err := openHost(cmd.Context(), cfgPath)
			if err != nil {
				return err
			}
			defer h.Close()
			ln, err := net.Listen("tcp", cfg.Listener.Addr())
			if err != nil {
				return fmt.Errorf("serve: listen: %w", err)
			}
			var mln net.Listener
			if cfg.Metrics != nil {
				if mln, err = net.Listen("tcp", cfg.Metrics.Addr()); err != nil {
					ln.Close()
					return fmt.Errorf("serve: metrics listener: %w", err)
				}
			}
			log.Info("record host serving", "address", ln.Addr().String())
			return h.Serve(cmd.Context(), ln, mln)
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "runtime configuration file")
	cmd.MarkFlagRequired("config")
	return cmd
}

func newMigrateCmd() *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "migrate --config FILE",
		Short: "Apply the database migrations of this release",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			pool, err := connectDatabase(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer pool.Close()
			applied, err := store.Migrate(cmd.Context(), pool)
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "database schema is up to date (version %d)\n", store.LatestVersion())
				return nil
			}
			versions := make([]string, len(applied))
			for i, v := range applied {
				versions[i] = fmt.Sprint(v)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "applied migrations %s; database schema at version %d\n", strings.Join(versions, ", "), store.LatestVersion())
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "runtime configuration file")
	cmd.MarkFlagRequired("config")
	return cmd
}

// openHost loads the runtime configuration at cfgPath and opens its record
// host, logging JSON to standard error at the configured level (logLevel).
func openHost(ctx context.Context, cfgPath string) (*config.Config, *slog.Logger, *host.Host, error) {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, nil, nil, err
	}
	log := newLogger(cfg.Level())
	h, err := host.Open(ctx, cfg, log)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, log, h, nil
}

// newLogger returns the JSON logger on standard error of serve, worker and
// issuer serve, writing records of level and above.
func newLogger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// connectDatabase opens a pool on the database of a runtime configuration
// for migrate and the database-direct operator commands: on
// database.directUrl when it is set (migrate's lock is a session's, and a
// one-off command needs no pooler), else on database.url.
func connectDatabase(ctx context.Context, cfg *config.Config) (*pgxpool.Pool, error) {
	dsn, err := cfg.SessionDatabaseURL()
	if err != nil {
		return nil, err
	}
	return store.Connect(ctx, dsn)
}
