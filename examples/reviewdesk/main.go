// Command reviewdesk is the review desk of the example registry: the
// external review authority its record host submits change requests to,
// with pages on which a reviewer approves, rejects or asks for changes.
//
//	reviewdesk -config reviewdesk.json [-listen 127.0.0.1:8082]
//	reviewdesk hash-password < password-file
//
// See README.md for the configuration and the protocol.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/registrum/registrum/examples/reviewdesk/desk"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "hash-password" {
		// The password is read from standard input, never from the command
		// line (where other users of the machine could see it).
		line, err := bufio.NewReader(io.LimitReader(stdin, 4096)).ReadString('\n')
		if err != nil && err != io.EOF {
			return err
		}
		h, err := desk.HashPassword(strings.TrimRight(line, "\r\n"))
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, h)
		return nil
	}
	fs := flag.NewFlagSet("reviewdesk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "reviewdesk.json", "configuration file (JSON)")
	listen := fs.String("listen", "", "listen address (default: the host and port of publicUrl)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := desk.LoadConfig(*configPath)
	if err != nil {
		return err
	}
	addr := *listen
	if addr == "" {
		u, _ := url.Parse(cfg.PublicURL)
		addr = u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
		}
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	d, err := desk.New(cfg, desk.Options{Log: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("reviewdesk: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("reviewdesk: serving", "address", ln.Addr().String(), "publicUrl", cfg.PublicURL)
	return d.Serve(ctx, ln)
}
