package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/registrum/registrum/issuer"
	"github.com/registrum/registrum/issuer/audit"
)

func init() { register(newIssuerCmd) }

func newIssuerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "issuer",
		Short: "The token issuer: serve it, verify its audit chain",
	}
	cmd.AddCommand(newIssuerServeCmd(), newIssuerAuditCmd())
	return cmd
}

func newIssuerServeCmd() *cobra.Command {
	var configPath string
	cmd := &cobra.Command{
		Use:   "serve --config FILE",
		Short: "Serve the token endpoint, key set, metadata, health and readiness (SIGHUP reloads client registrations)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
			cfg, err := issuer.LoadConfig(configPath)
			if err != nil {
				return withExitCode(2, err)
			}
			// The port first: a clash is a refused start-up, before "ready".
			ln, err := issuer.Listen(cfg)
			if err != nil {
				return withExitCode(2, err)
			}
			defer ln.Close()
			srv, err := issuer.New(cfg, logger)
			if err != nil {
				return withExitCode(2, err)
			}
			defer srv.Close()
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			return srv.ServeReloading(cmd.Context(), ln, hup)
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "issuer configuration file (required)")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

func newIssuerAuditCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Work with the issuer's audit chain"}
	var configPath string
	verify := &cobra.Command{
		Use:   "verify --config FILE",
		Short: "Verify the sealed audit segments, and the active one when no issuer holds its lock",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := issuer.LoadConfig(configPath)
			if err != nil {
				return withExitCode(2, err)
			}
			report, err := audit.Verify(cfg.Audit)
			if err != nil {
				return err
			}
			if _, err := report.WriteTo(cmd.OutOrStdout()); err != nil {
				return err
			}
			if !report.OK() {
				return withExitCode(1, fmt.Errorf("audit chain %s is not intact", cfg.Audit.Path))
			}
			return nil
		},
	}
	verify.Flags().StringVar(&configPath, "config", "", "issuer configuration file (required)")
	_ = verify.MarkFlagRequired("config")
	cmd.AddCommand(verify)
	return cmd
}
