package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	var configPath, metricsAddr string
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
			var opts []issuer.Option
			var metricsLn net.Listener
			reg := prometheus.NewRegistry()
			if metricsAddr != "" {
				if metricsLn, err = net.Listen("tcp", metricsAddr); err != nil {
					return withExitCode(2, fmt.Errorf("issuer serve: --metrics-address: %w", err))
				}
				defer metricsLn.Close()
				reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
				opts = append(opts, issuer.WithMetrics(reg))
			}
			srv, err := issuer.New(cfg, logger, opts...)
			if err != nil {
				return withExitCode(2, err)
			}
			defer srv.Close()
			if metricsLn != nil {
				go serveMetrics(cmd.Context(), metricsLn, reg, logger)
			}
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			return srv.ServeReloading(cmd.Context(), ln, hup)
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "issuer configuration file (required)")
	cmd.Flags().StringVar(&metricsAddr, "metrics-address", "", "serve Prometheus metrics at GET /metrics on this host:port (off when empty; keep it off the public network)")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

// serveMetrics answers GET /metrics from reg on ln until ctx ends. The
// issuer's configuration document has no metrics listener (the seed rejects
// unknown fields), so the address comes from the command line.
func serveMetrics(ctx context.Context, ln net.Listener, reg *prometheus.Registry, logger *slog.Logger) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	logger.Info("issuer metrics listening", "address", ln.Addr().String())
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("issuer metrics listener stopped", "error", err.Error())
	}
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
