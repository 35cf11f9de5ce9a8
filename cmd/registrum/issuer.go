package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
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

	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/internal/ratelimit"
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
	var configPath, metricsAddr, logLevel string
	var limitPerSecond float64
	var limitBurst int
	cmd := &cobra.Command{
		Use:   "serve --config FILE",
		Short: "Serve the token endpoint, key set, metadata, health and readiness (SIGHUP reloads client registrations)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level, err := config.ParseLogLevel(logLevel)
			if err != nil {
				return withExitCode(2, fmt.Errorf("issuer serve: --log-level: %w", err))
			}
			logger := newLogger(level)
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
			if limitPerSecond != 0 || limitBurst != 0 {
				l, err := tokenRateLimit(limitPerSecond, limitBurst)
				if err != nil {
					return withExitCode(2, err)
				}
				opts = append(opts, issuer.WithRateLimit(l))
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
	cmd.Flags().Float64Var(&limitPerSecond, "rate-limit-per-second", 0, "limit token requests per client address to this many a second (off when 0); a request over it is answered 429 slow_down with Retry-After")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "the least severe level logged: debug, info, warn or error")
	cmd.Flags().IntVar(&limitBurst, "rate-limit-burst", 0, "token requests a client address may send at once under --rate-limit-per-second (default: the per-second rate rounded up, at least 1)")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

// tokenRateLimit builds the token endpoint's rate limit from its flags. Like
// the metrics listener it is a flag: the issuer's configuration document
// takes no key the specification does not name.
func tokenRateLimit(perSecond float64, burst int) (*ratelimit.Limiter, error) {
	if perSecond == 0 {
		return nil, errors.New("issuer serve: --rate-limit-burst needs --rate-limit-per-second")
	}
	if burst == 0 {
		burst = max(int(math.Ceil(min(perSecond, 1e6))), 1)
	}
	l, err := ratelimit.New(perSecond, burst, 0)
	if err != nil {
		return nil, fmt.Errorf("issuer serve: --rate-limit-per-second, --rate-limit-burst: %w", err)
	}
	return l, nil
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
