// Package desk is the review desk of the example registry: an external
// review authority that speaks the review protocol the record host's
// review workers use (POST /v1/review-requests, GET
// /v1/review-requests/{requestId}/result, bearer tokens of the registry's
// issuer checked against its key set), and serves server-rendered pages on
// which a reviewer signs in with a password and approves, rejects or asks
// for changes to the submitted requests.
//
// Requests are kept in one JSON file (Config.DataFile); reviewer sessions
// are kept in memory, so a restart signs the reviewer out.
package desk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Options are what a program running the desk provides besides its
// configuration.
type Options struct {
	// Log receives the desk's logs; it never holds a token, a password, a
	// session or a form token. Default: discard.
	Log *slog.Logger
	// Now is the desk's clock (default time.Now).
	Now func() time.Time
}

// Desk is a review desk.
type Desk struct {
	cfg      *Config
	log      *slog.Logger
	now      func() time.Time
	store    *fileStore
	tokens   *verifier
	password *passwordHash
	sessions *sessions
	secure   bool
	origin   string
}

// New opens a desk: it validates cfg and reads its data file.
func New(cfg *Config, o Options) (*Desk, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("reviewdesk: %w", err)
	}
	st, err := openStore(cfg.DataFile)
	if err != nil {
		return nil, err
	}
	ph, _ := parseHash(cfg.ReviewerPasswordHash)
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	u, _ := url.Parse(cfg.PublicURL)
	d := &Desk{cfg: cfg, log: o.Log, now: o.Now, store: st, tokens: newVerifier(cfg.Authentication), password: ph,
		secure: u.Scheme == "https", origin: u.Scheme + "://" + u.Host}
	d.tokens.now = o.Now
	d.sessions = newSessions(o.Now)
	return d, nil
}

// Handler returns the desk's routes: the review protocol under /v1 and the
// reviewer's pages.
func (d *Desk) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/review-requests", d.protocol(d.submit))
	mux.HandleFunc("GET /v1/review-requests/{requestId}/result", d.protocol(d.result))
	mux.HandleFunc("POST /v1/review-requests/{requestId}/cancel", d.protocol(d.cancel))
	mux.Handle("GET /desk.css", http.HandlerFunc(d.stylesheet))
	mux.Handle("GET /login", d.page(d.loginForm))
	mux.Handle("POST /login", d.page(d.login))
	mux.Handle("POST /logout", d.page(d.reviewer(d.logout)))
	mux.Handle("GET /{$}", d.page(d.reviewer(d.listPage)))
	mux.Handle("GET /requests/{requestId}", d.page(d.reviewer(d.requestPage)))
	mux.Handle("POST /requests/{requestId}/decision", d.page(d.reviewer(d.decide)))
	return mux
}

// Serve serves the desk on ln until ctx ends.
func (d *Desk) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(d.log.Handler(), slog.LevelWarn)}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
