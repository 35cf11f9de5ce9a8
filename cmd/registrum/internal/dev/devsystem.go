// Package dev runs the whole of Registrum on one machine for a first
// run (`registrum dev`): a persistent private PostgreSQL cluster, the example
// registry compiled and served by the record host, a token issuer with
// local keys and demo clients, and the review desk (examples/reviewdesk) as
// the review authority of the registry's reviewed requests. Everything lives under one data folder and
// survives restarts; everything stops, PostgreSQL included, when the context ends.
package dev

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/registrum/registrum/cmd/registrum/internal/invocation"
	"github.com/registrum/registrum/examples/reviewdesk/desk"
	"github.com/registrum/registrum/host"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/issuer"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/project"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/pglocal"
)

// Options configure a dev system.
type Options struct {
	// DataDir holds everything the system keeps. Default ./.registrum-dev.
	DataDir string
	// ProjectDir is the registry project to compile and serve. Default
	// examples/childsupport.
	ProjectDir string
	// Port is the record host's loopback port (0 picks a free one).
	Port int
	// IssuerPort is the token issuer's loopback port (0 picks a free one).
	IssuerPort int
	// DeskPort is the review desk's loopback port (0 picks a free one); the
	// desk runs when a request entity of the project is reviewed by an
	// authority.
	DeskPort int
	// VerifierPort is the attachment scanner's loopback port (0 picks a free
	// one); the scanner runs when the project has an http verifier on a
	// plain-http loopback endpoint, which dev points at this port.
	VerifierPort int
	// Command is how the user invokes registrum, for the printed next steps.
	Command string
	// Args are the arguments dev was started with (after the binary), for
	// the printed command that starts it again with another flag.
	Args []string
	// EventDestinations, when set, is a file holding an eventDestinations
	// block (and optionally instanceId) in the runtime configuration's
	// format, used instead of the example receiver dev starts; the keys it
	// names are looked up in the data folder's secrets folder.
	EventDestinations string
	// ReviewConfig, when set, is a file holding a reviewAuthorities block
	// and/or an executors block in the runtime configuration's format: the
	// project's review authorities (and executors) are the operator's own,
	// and dev runs no review desk. The secrets it names are looked up in
	// the data folder's secrets folder.
	ReviewConfig string
	// OwnVerifiers leaves the package's http verifiers at the endpoints it
	// names (the operator's own services, their credentials in the data
	// folder's secrets folder) instead of serving them with dev's EICAR
	// scanner. go-plugin verifiers always run as the package pins them.
	OwnVerifiers bool
	// ConfirmDestructive lets a changed project's destructive table changes
	// (dropped fields or entities, whose data is lost) apply on start, as
	// `registrum activate --confirm-destructive` does.
	ConfirmDestructive bool
	// Out receives the next steps; Log the services' logs.
	Out io.Writer
	Log *slog.Logger
}

const databaseName = "registrum"

// clusterExitGrace is how long a failed service waits for PostgreSQL's exit
// to be noticed, so that a dead cluster is named as the cause.
const clusterExitGrace = 2 * time.Second

// Run starts the system, prints what to try next, and serves until ctx ends.
func Run(ctx context.Context, o Options) error {
	o = o.withDefaults()
	data, err := filepath.Abs(o.DataDir)
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	// The lock comes before any write: a second dev on the same folder, or a
	// folder holding anything dev did not make, changes nothing.
	dd, err := openDataDir(data)
	if err != nil {
		return err
	}
	defer dd.close()

	// The operator's own configuration files are checked (their secrets
	// resolved) before anything starts.
	ownEvents, err := readOwnEvents(o, data)
	if err != nil {
		return err
	}
	var review *fragment
	if o.ReviewConfig != "" {
		review, err = readFragment("--review-config", o.ReviewConfig, []string{"reviewAuthorities", "executors"}, filepath.Join(data, "secrets"), nil)
		if err != nil {
			return err
		}
	}

	res, sc, err := preparePackage(o, data)
	if err != nil {
		return err
	}
	if sc != nil {
		defer sc.ln.Close()
	}
	cluster, err := startCluster(ctx, dd)
	if err != nil {
		return err
	}
	defer cluster.Stop()
	// dev runs the review desk for the project's reviewed requests, unless
	// the operator brings the review authorities.
	runDesk := review == nil && hasReviewedEntities(res.Package)
	lns, err := openListeners(o, runDesk)
	if err != nil {
		return err
	}
	defer lns.close()

	walk := planWalkthrough(res.Package)
	demo := planDemoClients(res.Package, walk)
	usable := demo.Profiles[issuer.DevStandardClientID]
	journey := planRequestJourney(res.Package, usable, demo.Claims)
	gis := planGIS(res.Package, usable, demo.Claims)
	bulk := planIngest(res.Package, o.ProjectDir, usable, demo.Claims)
	reviewed := planReviewedJourney(res.Package, usable, demo.Claims, journey)
	setup, icfg, err := writeIssuerSetup(data, res.Package, demo, lns.issuer, runDesk)
	if err != nil {
		return err
	}
	var rd *reviewDesk
	if runDesk {
		if rd, err = planReviewDesk(res.Package, data, lns.deskURL(), icfg, lns.issuer.Addr().String()); err != nil {
			return err
		}
	}
	iss, err := openIssuer(icfg, lns.issuer, o.Log)
	if err != nil {
		return err
	}
	defer iss.Close()

	svc, ctx := newServices(ctx)
	defer svc.cancel()
	svc.start(func() error { return iss.Serve(ctx, lns.issuer) })
	auth := authBlock(icfg, lns.issuer.Addr().String(), demo.PurposeClaim)
	if rd != nil {
		auth += reviewBlock(rd, res.Package, lns.deskURL(), setup)
	} else if review != nil {
		auth += review.text
	}
	if rd != nil {
		d, err := desk.New(rd.Config, desk.Options{Log: o.Log})
		if err != nil {
			svc.stop()
			return err
		}
		svc.start(func() error { return d.Serve(ctx, lns.desk) })
	}
	if sc != nil {
		svc.start(func() error { return sc.serve(ctx) })
	}
	events, err := startEvents(ctx, ownEvents, data, res.Package)
	if err != nil {
		svc.stop()
		return err
	}
	defer events.close()
	h, err := openHost(ctx, dd, cluster, lns.host, auth+events.config, o)
	if err != nil {
		svc.stop()
		cfgPath := filepath.Join(data, "registrum.yaml")
		return review.blame(events.own.blame(err, cfgPath), cfgPath)
	}
	defer h.Close()
	svc.start(func() error { return h.Serve(ctx, lns.host, nil) })

	var standard issuer.DevClient
	for _, c := range setup.Clients {
		if c.ID == issuer.DevStandardClientID {
			standard = c
		}
	}
	st := runningState{PID: os.Getpid(), Host: "http://" + lns.host.Addr().String(), TokenURL: setup.TokenURL,
		ClientID: standard.ID, KeyFile: standard.KeyFile, ReceiverLog: events.logPath}
	if st.ProjectDir, err = filepath.Abs(o.ProjectDir); err != nil {
		svc.stop()
		return fmt.Errorf("dev: %w", err)
	}
	if rd != nil {
		st.Desk, st.PasswordFile = rd.Config.PublicURL, rd.PasswordFile
	}
	if err := writeRunning(data, st); err != nil {
		svc.stop()
		return err
	}
	defer os.Remove(filepath.Join(data, runningName))
	printSummary(summary{
		Command:  o.Command,
		Out:      o.Out,
		DataDir:  dd,
		HostAddr: lns.host.Addr().String(),
		Setup:    setup,
		Clients:  demo,
		Desk:     rd,
		Review:   review,
		Scanner:  sc,
		Events:   events,
		Tour:     walk != nil || journey != nil || gis != nil || bulk != nil || reviewed != nil,
	})
	fmt.Fprintln(o.Out, "Press Ctrl-C to stop; the data folder keeps everything for the next start.")
	return svc.wait(cluster)
}

// withDefaults returns o with its unset fields given their defaults: the
// data folder ./.registrum-dev, the project examples/childsupport, the
// command "registrum", and discarded logs and output.
func (o Options) withDefaults() Options {
	if o.DataDir == "" {
		o.DataDir = ".registrum-dev"
	}
	if o.ProjectDir == "" {
		o.ProjectDir = filepath.Join("examples", "childsupport")
	}
	if o.Command == "" {
		o.Command = "registrum"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return o
}

// preparePackage compiles the project, printing its warnings to o.Out,
// starts the attachment scanner (nil when dev serves no verifier of the
// package), and writes the compiled package to <data>/package. The caller
// closes the scanner's listener; on an error there is nothing to close.
func preparePackage(o Options, data string) (*project.Result, *scanner, error) {
	// Compile first: a broken project should not cost a cluster start.
	res, err := project.Compile(o.ProjectDir, project.Options{Fingerprint: layout.Fingerprint})
	if err != nil {
		return nil, nil, fmt.Errorf("dev: compile %s: %w", o.ProjectDir, err)
	}
	for _, w := range res.Warnings {
		w.File = filepath.Join(o.ProjectDir, w.File)
		fmt.Fprintln(o.Out, w.String())
	}
	// The scanner's port is known before the package is written: the
	// package's copy names it.
	var sc *scanner
	if !o.OwnVerifiers {
		if sc, err = startScanner(res.Package, data, o.VerifierPort); err != nil {
			return nil, nil, err
		}
	}
	fail := func(err error) (*project.Result, *scanner, error) {
		if sc != nil {
			sc.ln.Close()
		}
		return nil, nil, err
	}
	pkgDir := filepath.Join(data, "package")
	if err := os.RemoveAll(pkgDir); err != nil {
		return fail(fmt.Errorf("dev: %w", err))
	}
	if err := res.Write(pkgDir); err != nil {
		return fail(fmt.Errorf("dev: write package: %w", err))
	}
	return res, sc, nil
}

// startCluster starts the data folder's PostgreSQL cluster and makes sure
// it holds the registrum database. The caller stops the cluster; on an
// error it is already stopped.
func startCluster(ctx context.Context, dd *dataDir) (*pglocal.Cluster, error) {
	clusterDir, err := dd.clusterDir()
	if err != nil {
		return nil, err
	}
	cluster, err := pglocal.Start(ctx, pglocal.Options{Dir: clusterDir})
	if err != nil {
		return nil, fmt.Errorf("dev: %w", err)
	}
	if err := cluster.EnsureDatabase(ctx, databaseName); err != nil {
		cluster.Stop()
		return nil, err
	}
	return cluster, nil
}

// listeners are the loopback listeners of the record host, the token
// issuer and the review desk, opened before any of them starts so that
// each one's address is known to the others' configuration.
type listeners struct {
	// host is the record host's listener (Options.Port).
	host net.Listener
	// issuer is the token issuer's listener (Options.IssuerPort).
	issuer net.Listener
	// desk is the review desk's listener (Options.DeskPort), nil when no
	// desk runs.
	desk net.Listener
}

// openListeners opens the host's and the issuer's listeners on their ports
// in o, and the desk's when desk is set. On an error the ones already open
// are closed.
func openListeners(o Options, desk bool) (*listeners, error) {
	l := &listeners{}
	var err error
	if l.host, err = listen(o.Port); err != nil {
		return nil, fmt.Errorf("dev: record host: %w", err)
	}
	if l.issuer, err = listen(o.IssuerPort); err != nil {
		l.host.Close()
		return nil, fmt.Errorf("dev: token issuer: %w", err)
	}
	if !desk {
		return l, nil
	}
	if l.desk, err = listen(o.DeskPort); err != nil {
		l.issuer.Close()
		l.host.Close()
		return nil, fmt.Errorf("dev: review desk: %w", err)
	}
	return l, nil
}

// close closes the listeners, the last opened first.
func (l *listeners) close() {
	if l.desk != nil {
		l.desk.Close()
	}
	l.issuer.Close()
	l.host.Close()
}

// deskURL is the review desk's public URL; call it only when the desk's
// listener is open.
func (l *listeners) deskURL() string {
	return "http://" + l.desk.Addr().String()
}

// writeIssuerSetup writes the dev issuer's setup under <data>/issuer, its
// standard demo client holding every scope the package requires and demo's
// claims, registers the record host's client of the review desk when desk
// is set (dev runs one), and loads the issuer's configuration.
func writeIssuerSetup(data string, p *model.Package, demo *demoClients, issuerLn net.Listener, desk bool) (*issuer.DevSetup, *issuer.Config, error) {
	devOpts := issuer.DevOptions{Port: issuerLn.Addr().(*net.TCPAddr).Port, Scopes: requiredScopes(p), Claims: demo.Claims}
	setup, err := issuer.WriteDevSetup(filepath.Join(data, "issuer"), devOpts)
	if err != nil {
		return nil, nil, err
	}
	if desk {
		if err := writeReviewClient(data, filepath.Dir(setup.ConfigPath)); err != nil {
			return nil, nil, err
		}
	}
	icfg, err := issuer.LoadConfig(setup.ConfigPath)
	if err != nil {
		return nil, nil, err
	}
	return setup, icfg, nil
}

// openIssuer opens the token issuer of icfg, its discovery documents naming
// the endpoints served on ln.
func openIssuer(icfg *issuer.Config, ln net.Listener, log *slog.Logger) (*issuer.Server, error) {
	// The identifier stays the https one seed 000 requires; the discovery
	// documents name the endpoints dev really serves: plain HTTP on loopback
	// (docs/decisions/dev-issuer-scheme.md).
	icfg.EndpointBaseURL = "http://" + ln.Addr().String()
	return issuer.New(icfg, log)
}

// services are the services dev runs side by side (the issuer, the desk,
// the scanner and the host), each serving in its own goroutine until the
// context they share ends.
type services struct {
	// stopped ends when the user stops dev.
	stopped context.Context
	// cancel ends the services' context, stopping every service.
	cancel context.CancelFunc
	// errs receives what each service's Serve returned; it has room for
	// every service, so none waits to be collected.
	errs chan error
	// pending counts the services started whose Serve result is not yet
	// received.
	pending int
}

// newServices returns the services of a dev system stopped by the end of
// ctx, and the context they serve under, ended by their cancel.
func newServices(ctx context.Context) (*services, context.Context) {
	sctx, cancel := context.WithCancel(ctx)
	return &services{stopped: ctx, cancel: cancel, errs: make(chan error, 4)}, sctx
}

// start runs serve in its own goroutine, its result sent on errs.
func (s *services) start(serve func() error) {
	s.pending++
	go func() { s.errs <- serve() }()
}

// stop cancels the services and waits for every pending one to end.
func (s *services) stop() {
	s.cancel()
	for ; s.pending > 0; s.pending-- {
		<-s.errs
	}
}

// clean returns err, or nil when it is the context's error of a service
// still starting when dev was stopped (the host's job workers making their
// first connection): that is a clean stop, not a failure.
func (s *services) clean(err error) error {
	if s.stopped.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// wait serves until the context ends, a service fails, or PostgreSQL dies
// (a host without its database would only answer errors), then stops every
// service and returns the first failure, or nil for a clean stop.
func (s *services) wait(cluster *pglocal.Cluster) error {
	var first error
	select {
	case first = <-s.errs:
		s.pending--
		first = s.clean(first)
		// A service that fails because PostgreSQL died (the host's job
		// workers lose their connections at once) says less than the
		// cluster's own exit does: give the cluster a moment to be seen.
		if first != nil {
			select {
			case <-cluster.Done():
				first = clusterDied(cluster)
			case <-time.After(clusterExitGrace):
			}
		}
	case <-cluster.Done():
		first = clusterDied(cluster)
	}
	s.cancel()
	for ; s.pending > 0; s.pending-- {
		if err := s.clean(<-s.errs); first == nil {
			first = err
		}
	}
	return first
}

// clusterDied is the error dev stops with when its PostgreSQL exits under it.
func clusterDied(c *pglocal.Cluster) error {
	lines := strings.Split(strings.TrimRight(c.Log(), "\n"), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return fmt.Errorf("dev: PostgreSQL (pid %d) stopped unexpectedly, so registrum dev stopped too; start it again (its log is %s):\n%s",
		c.PID(), filepath.Join(c.Dir(), "postgres.log"), strings.Join(lines, "\n"))
}

// requiredScopes returns every scope the package's profiles require, so
// that the standard demo client can use every profile.
func requiredScopes(p *model.Package) []string {
	seen := map[string]bool{}
	var out []string
	for _, pr := range p.Profiles {
		for _, s := range pr.RequiredScopes {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out
}

// authBlock is the record host's authentication settings for the dev
// issuer: its principal and evidence claim names are the issuer's
// accessTokens.claims and its revoked key ids the issuer's, as the issuer
// specification pairs a verifier with it.
func authBlock(icfg *issuer.Config, issuerAddr, purposeClaim string) string {
	claims := fmt.Sprintf("principal: sub, purpose: %q", purposeClaim)
	if n := icfg.AccessTokens.Claims; n != nil {
		claims = fmt.Sprintf("principal: %q, purpose: %q, requesterTags: %q, evidenceAudience: %q, grantId: %q, grantAuthority: %q",
			n.Principal, purposeClaim, n.RequesterTags, n.EvidenceAudience, n.GrantID, n.GrantAuthority)
		if n.Actor != "" {
			claims += fmt.Sprintf(", actor: %q", n.Actor)
		}
	}
	revoked, _ := json.Marshal(append([]string{}, icfg.Signing.RevokedKeyIDs...))
	return fmt.Sprintf(`authentication:
  issuer: %q
  jwksUrl: %q
  audience: %q
  scopeClaim: scope
  scopeSeparator: " "
  authorityClaims: {%s}
  revokedKeyIds: %s
`, icfg.Issuer, "http://"+issuerAddr+icfg.Signing.JWKSPath, icfg.AccessTokens.Audiences[0], claims, revoked)
}

// openHost writes the record host's configuration, migrates the database
// and opens the host.
func openHost(ctx context.Context, dd *dataDir, cluster *pglocal.Cluster, ln net.Listener, auth string, o Options) (*host.Host, error) {
	data, log, out := dd.path, o.Log, o.Out
	cfgPath, err := writeHostConfig(data, cluster.DSN(databaseName), ln.Addr().(*net.TCPAddr).Port, auth)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, err
	}
	pool, err := store.Connect(ctx, cluster.DSN(databaseName))
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if _, err = store.Migrate(ctx, pool); err != nil {
		return nil, err
	}
	// A changed project moves the database to its package as `registrum
	// activate` does: additive changes apply, destructive ones are refused.
	pkg, err := model.Load(cfg.Package)
	if err != nil {
		return nil, err
	}
	act, err := store.Activate(ctx, pool, pkg, o.ConfirmDestructive)
	var destructive *store.DestructiveError
	if errors.As(err, &destructive) {
		// Every remedy works as printed: dev has stopped its database by the
		// time the user reads this, so it is dev that must apply them.
		return nil, fmt.Errorf("dev: the project changed since the data folder was last used: %w\n"+
			"Apply them (the data they drop is lost) by starting dev again with --confirm-destructive:\n  %s\n"+
			"or keep this data folder as it is and start afresh in another one with --data NEW_FOLDER.",
			err, devCommand(o, "--confirm-destructive"))
	}
	if err != nil {
		return nil, err
	}
	if len(act.Changes) > 0 {
		fmt.Fprintf(out, "The project changed since the data folder was last used; its package is now active with these table changes:\n")
		for _, c := range act.Changes {
			fmt.Fprintf(out, "  - %s\n", c.Description)
		}
		fmt.Fprintln(out)
	}
	h, err := host.Open(ctx, cfg, log)
	return h, err
}

func listen(port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", fmt.Sprint(port)))
	if err != nil {
		return nil, fmt.Errorf("listen on 127.0.0.1:%d: %w (pass another port)", port, err)
	}
	return ln, nil
}

// writeHostConfig writes the record host's runtime configuration and its
// root secret (kept across runs).
func writeHostConfig(data, dsn string, port int, auth string) (string, error) {
	secrets := filepath.Join(data, "secrets")
	if err := os.MkdirAll(secrets, 0o700); err != nil {
		return "", fmt.Errorf("dev: %w", err)
	}
	keyPath := filepath.Join(secrets, "host-key")
	if _, err := os.Stat(keyPath); errors.Is(err, os.ErrNotExist) {
		key := make([]byte, 32)
		rand.Read(key)
		if err := os.WriteFile(keyPath, key, 0o600); err != nil {
			return "", fmt.Errorf("dev: write host key: %w", err)
		}
	}
	dsnJSON, _ := json.Marshal(dsn)
	cfg := fmt.Sprintf(configHeader+` on every start.
version: 1
listener:
  address: 127.0.0.1
  port: %d
  drainSeconds: 0
database:
  url: %s
package: package
secrets:
  root: secrets
hostKeyRef: secret:file/host-key
%s`, port, dsnJSON, auth)
	path := filepath.Join(data, "registrum.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return "", fmt.Errorf("dev: write configuration: %w", err)
	}
	return path, nil
}

// summary is what printSummary tells the user once every service is up:
// where each service listens, how to get a token, and how to take the
// tour. A nil service is left out.
type summary struct {
	// Command is how the user invokes registrum (Options.Command).
	Command string
	// Out receives the summary (Options.Out).
	Out io.Writer
	// DataDir is the data folder, and where its PostgreSQL cluster lives
	// when that is outside it.
	DataDir *dataDir
	// HostAddr is the record host's address, host:port.
	HostAddr string
	// Setup is the dev issuer's setup: its token URL and demo clients.
	Setup *issuer.DevSetup
	// Clients tells which demo client satisfies which profile, and the
	// standard client's claims.
	Clients *demoClients
	// Desk is the review desk, nil when none runs.
	Desk *reviewDesk
	// Review is the operator's own review configuration, nil when none.
	Review *fragment
	// Scanner is the attachment scanner, nil when none runs.
	Scanner *scanner
	// Events are the event destinations: the example receiver's log when
	// dev runs it.
	Events *devEvents
	// Tour is set when the project supports a step of the tour.
	Tour bool
}

// printSummary prints s: the services and their addresses, the demo
// clients' token commands, and the tour's command.
func printSummary(s summary) {
	base := "http://" + s.HostAddr
	w := s.Out
	dd, setup := s.DataDir, s.Setup
	fmt.Fprintf(w, "Registrum dev is running (data in %s).\n", dd.path)
	if dd.marker.ClusterDir != "" {
		fmt.Fprintf(w, "Its PostgreSQL cluster is in %s: the cluster's system user cannot enter the data folder.\n", dd.marker.ClusterDir)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  record host   %s\n", base)
	fmt.Fprintf(w, "  token issuer  %s\n", strings.TrimSuffix(setup.TokenURL, "/token"))
	if rd := s.Desk; rd != nil {
		fmt.Fprintf(w, "  review desk   %s  (authority %s; the reviewer's password is in %s)\n", rd.Config.PublicURL, strings.Join(rd.Authorities, ", "), rd.PasswordFile)
	}
	if s.Review != nil {
		fmt.Fprintf(w, "  review        the review authorities and executors of %s\n", s.Review.path)
	}
	if sc := s.Scanner; sc != nil {
		fmt.Fprintf(w, "  scanner       http://%s  (the EICAR scanner of examples/plugins/eicar-verifier as http verifier %s)\n", sc.Addr(), strings.Join(sc.IDs, ", "))
	}
	if ev := s.Events; ev != nil && ev.ln != nil {
		fmt.Fprintf(w, "  webhooks      http://%s%s  (examples/webhookreceiver; its log is %s)\n", ev.ln.Addr(), receiverPath, ev.logPath)
	} else if ev != nil && ev.own != nil {
		fmt.Fprintf(w, "  webhooks      the destinations of %s\n", ev.own.path)
	}
	fmt.Fprintln(w)
	s.Clients.print(w, setup)
	q := invocation.ShellQuote
	fmt.Fprintln(w, "A token of a demo client (short-lived: run it again when it expires; the standard client first):")
	for _, c := range setup.Clients {
		line := fmt.Sprintf("%s token --token-url %s --client-id %s --key %s", s.Command, q(setup.TokenURL), q(c.ID), q(c.KeyFile))
		if c.ID == issuer.DevStandardClientID {
			line = "export TOKEN=$(" + line + ")"
		}
		fmt.Fprintf(w, "  %s\n", line)
	}
	fmt.Fprintln(w)
	if s.Tour {
		tour := tourCommand(s.Command, dd.path)
		fmt.Fprintf(w, "Take the guided tour in another terminal: each request with every value filled in, its answer, and what to notice:\n  %s\n", tour)
		fmt.Fprintln(w, "The same walk-through, explained: docs/tour.md.")
		fmt.Fprintln(w)
	}
}

// devCommand is the command line that starts dev again as the user did,
// with extra added: the printed remedy the user can paste.
func devCommand(o Options, extra ...string) string {
	parts := []string{o.Command}
	for _, a := range o.Args {
		if !slices.Contains(extra, a) {
			parts = append(parts, invocation.ShellQuote(a))
		}
	}
	for _, a := range extra {
		parts = append(parts, invocation.ShellQuote(a))
	}
	return strings.Join(parts, " ")
}
