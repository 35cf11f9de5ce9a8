package main

import (
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
finish.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, log, h, err := openHost(cmd.Context(), cfgPath)
			if err != nil {
				return err
			}
			defer h.Close()
			log.Info("record host workers running")
			return h.RunWorkers(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "runtime configuration file")
	cmd.MarkFlagRequired("config")
	return cmd
}
