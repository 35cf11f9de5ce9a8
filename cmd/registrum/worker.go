package main

import (
	"fmt"
	"net"

	"github.com/spf13/cobra"
)

func init() { register(newWorkerCmd) }

func newWorkerCmd() *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "worker --config FILE",
		Short: "Work the record host's post-commit jobs without serving HTTP",
		Long: `Worker runs only the post-commit jobs of the record host described by the
runtime configuration FILE (the same file serve reads): sending change
request submissions to review authorities, pulling their results, applying
approved requests automatically, delivering events to their webhook
destinations and local handlers. serve runs the same workers itself; run
worker for hosts that should do this work apart from the API. Any number of
serve and worker processes may share one database: each job is worked by
one of them at a time. It runs until SIGINT or SIGTERM and lets running jobs
finish. When the configuration has a metrics listener, worker serves
Prometheus metrics on it (GET /metrics) too: a worker beside a serve on
one machine needs its own port (REGISTRUM_CONFIG_METRICS_PORT).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, h, err := openHost(cmd.Context(), cfgPath)
			if err != nil {
				return err
			}
			defer h.Close()
			if cfg.Metrics != nil {
				mln, err := net.Listen("tcp", cfg.Metrics.Addr())
				if err != nil {
					return fmt.Errorf("worker: metrics listener: %w", err)
				}
				go func() {
					if err := h.ServeMetrics(cmd.Context(), mln); err != nil {
						log.Error("metrics listener stopped", "error", err)
					}
				}()
				log.Info("record host metrics listening", "address", mln.Addr().String())
			}
			log.Info("record host workers running")
			return h.RunWorkers(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "runtime configuration file")
	cmd.MarkFlagRequired("config")
	return cmd
}
