package issuer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/ratelimit"
	"github.com/registrum/registrum/internal/secrets"
	"github.com/registrum/registrum/internal/telemetry"
	"github.com/registrum/registrum/issuer/audit"
	"github.com/registrum/registrum/issuer/signer"
)

// OAuth error codes the token endpoint answers.
const (
	ErrorInvalidRequest       = "invalid_request"
	ErrorInvalidClient        = "invalid_client"
	ErrorUnsupportedGrantType = "unsupported_grant_type"
	ErrorServerError          = "server_error"
)

// DefaultSelfTestInterval is how often the signer self-test runs.
const DefaultSelfTestInterval = 10 * time.Second

// Option adjusts a Server built by New.
type Option func(*options)

type options struct {
	selfTestInterval time.Duration
	now              func() time.Time
	signer           signer.Signer
	wrapSigner       func(signer.Signer) signer.Signer // tests: observe or break the signer
	metrics          prometheus.Registerer
	rateLimit        *ratelimit.Limiter // nil: no limit
}

// WithSelfTestInterval sets how often the signer self-test runs (default
// DefaultSelfTestInterval). A failing self-test makes /ready answer 503; a
// passing one makes it ready again.
func WithSelfTestInterval(d time.Duration) Option {
	return func(o *options) { o.selfTestInterval = d }
}

// WithClock replaces the clock used to judge assertions and stamp tokens.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithSigner uses s instead of building the signer from the configuration.
// The server closes it on Close.
func WithSigner(s signer.Signer) Option {
	return func(o *options) { o.signer = s }
}

// Server is a running token issuer. Its methods are safe for concurrent use.
type Server struct {
	cfg      *Config
	log      *slog.Logger
	opts     options
	signer   signer.Signer
	audit    *audit.Writer
	auth     *authenticator
	registry atomic.Pointer[Registry]
	reloadMu sync.Mutex

	signerReady atomic.Bool
	metrics     *metrics // nil without WithMetrics
	probing     atomic.Bool
	// telemetry exports traces when the configuration has a telemetry
	// block; nil otherwise.
	telemetry *telemetry.Provider

	jwks     []byte
	metadata []byte
	handler  http.Handler

	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// New builds an issuer from a loaded configuration: it builds the signer and
// runs its self-test, loads the client registry, and opens the audit chain
// (taking its single-writer lock). Any failure refuses start-up.
func New(cfg *Config, logger *slog.Logger, opt ...Option) (*Server, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: logger, opts: options{selfTestInterval: DefaultSelfTestInterval, now: time.Now}, stop: make(chan struct{})}
	for _, o := range opt {
		o(&s.opts)
	}
	var err error
	if s.signer = s.opts.signer; s.signer == nil {
		if s.signer, err = buildSigner(cfg); err != nil {
			return nil, err
		}
	}
	if s.opts.wrapSigner != nil {
		s.signer = s.opts.wrapSigner(s.signer)
	}
	fail := func(err error) (*Server, error) {
		s.signer.Close()
		if s.audit != nil {
			s.audit.Close()
		}
		s.stopTelemetry()
		return nil, err
	}
	if s.signer.KeyID() != cfg.Signing.Active.KeyID {
		return fail(fmt.Errorf("issuer: signer key id does not equal signing.activePublicJwkFile's kid"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = s.signer.SelfTest(ctx)
	cancel()
	if err != nil {
		return fail(fmt.Errorf("issuer: signer self-test: %w", err))
	}
	s.signerReady.Store(true)
	if s.auth, err = newAuthenticator(cfg); err != nil {
		return fail(fmt.Errorf("issuer: prepare authenticator: %w", err))
	}
	reg, err := LoadRegistry(cfg)
	if err != nil {
		return fail(err)
	}
	s.registry.Store(reg)
	if s.jwks, err = jwksDocument(cfg); err != nil {
		return fail(err)
	}
	if s.metadata, err = metadataDocument(cfg); err != nil {
		return fail(err)
	}
	auditCfg := cfg.Audit
	if s.opts.metrics != nil {
		if s.metrics, err = newMetrics(s.opts.metrics, s.signerReady.Load); err != nil {
			return fail(fmt.Errorf("issuer: register metrics: %w", err))
		}
		auditCfg.OnCommit = s.metrics.auditCommit
	}
	if s.audit, err = audit.Open(auditCfg); err != nil {
		return fail(fmt.Errorf("issuer: %s: audit.path: %w", cfg.File, err))
	}
	if cfg.Telemetry != nil {
		if s.telemetry, err = telemetry.Start(context.Background(), *cfg.Telemetry); err != nil {
			return fail(fmt.Errorf("issuer: %s: telemetry: %w", cfg.File, err))
		}
	}
	s.handler = s.routes()
	s.wg.Add(1)
	go s.selfTestLoop()
	s.log.Info("issuer ready to serve", "clients", reg.Len(), "signer", cfg.Signer.Kind, "kid", cfg.Signing.Active.KeyID)
	return s, nil
}

func buildSigner(cfg *Config) (signer.Signer, error) {
	switch cfg.Signer.Kind {
	case SignerLocalJWK:
		priv, err := secrets.ResolveFile(cfg.SecretRoot, cfg.Signer.PrivateKeyRef)
		if err != nil {
			return nil, fmt.Errorf("issuer: %s: signer.privateKeyRef: %w", cfg.File, err)
		}
		s, err := signer.NewLocalJWK(priv, cfg.Signing.Active)
		if err != nil {
			return nil, fmt.Errorf("issuer: %s: signer.privateKeyRef: %w", cfg.File, err)
		}
		return s, nil
	case SignerTransit:
		tc := signer.TransitConfig{
			UnixSocketPath: cfg.Signer.UnixSocketPath, Mount: cfg.Signer.Mount, KeyName: cfg.Signer.KeyName,
			KeyVersion: cfg.Signer.KeyVersion, Timeout: cfg.Signer.Timeout, Active: cfg.Signing.Active,
		}
		if cfg.Signer.TokenRef != "" {
			tok, err := secrets.ResolveFile(cfg.SecretRoot, cfg.Signer.TokenRef)
			if err != nil {
				return nil, fmt.Errorf("issuer: %s: signer.tokenRef: %w", cfg.File, err)
			}
			tc.Token = tok
		}
		s, err := signer.NewTransit(tc)
		if err != nil {
			return nil, fmt.Errorf("issuer: %s: signer: %w", cfg.File, err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("issuer: %s: signer.kind %q is not supported", cfg.File, cfg.Signer.Kind)
}

// Config returns the configuration the server runs with.
func (s *Server) Config() *Config { return s.cfg }

// Registry returns the client registry currently served.
func (s *Server) Registry() *Registry { return s.registry.Load() }

// Handler returns the HTTP handler of every issuer endpoint.
func (s *Server) Handler() http.Handler { return s.handler }

// Reload re-reads clients.directory. On success the new registry replaces the
// old one atomically (requests in flight keep the one they started with); on
// failure the registry already loaded keeps being served and the error says
// why.
func (s *Server) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	reg, err := LoadRegistry(s.cfg)
	if err != nil {
		s.log.Error("client registry reload refused; keeping the registry already loaded", "error", err.Error(), "clients", s.registry.Load().Len())
		return err
	}
	s.registry.Store(reg)
	s.log.Info("client registry reloaded", "clients", reg.Len())
	return nil
}

// Ready reports whether the issuer admits traffic: at least one client is
// registered, the audit writer is healthy and the signer works.
func (s *Server) Ready() bool {
	return s.registry.Load().Len() > 0 && s.audit.Err() == nil && s.signerReady.Load()
}

// Serve answers HTTP on ln until ctx is done, then shuts down gracefully.
// The listener's request size and time-out limits apply.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	to := s.cfg.Listener.RequestTimeout
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: to,
		ReadTimeout:       to,
		WriteTimeout:      to + time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    int(s.cfg.Listener.MaximumRequestBytes),
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		// Requests in flight at shutdown finish: their context is not
		// cancelled with ctx (Shutdown waits for them).
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), to+time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ListenAndServe listens on the configured listener address and port and
// serves until ctx is done. Each value received on reload re-reads the client
// registrations (the binary connects it to SIGHUP); a refused reload is logged
// and the registry already loaded keeps being served.
func (s *Server) ListenAndServe(ctx context.Context, reload <-chan os.Signal) error {
	ln, err := Listen(s.cfg)
	if err != nil {
		return err
	}
	return s.ServeReloading(ctx, ln, reload)
}

// Listen opens the listener cfg names. Open it before New, so that a port
// already in use is refused before the issuer logs that it is ready.
func Listen(cfg *Config) (net.Listener, error) {
	addr := net.JoinHostPort(cfg.Listener.Address.String(), strconv.Itoa(int(cfg.Listener.Port)))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("issuer: %s: listener: %w", cfg.File, err)
	}
	return ln, nil
}

// ServeReloading serves on ln until ctx is done, re-reading the client
// registrations on each value received on reload, as ListenAndServe does.
func (s *Server) ServeReloading(ctx context.Context, ln net.Listener, reload <-chan os.Signal) error {
	s.log.Info("issuer listening", "address", ln.Addr().String())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-reload:
				_ = s.Reload() // logged by Reload
			}
		}
	}()
	return s.Serve(ctx, ln)
}

// Close stops the self-test loop and closes the audit writer (releasing its
// lock) and the signer.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.stop)
		s.wg.Wait()
		err = errors.Join(s.audit.Close(), s.signer.Close())
		s.stopTelemetry()
	})
	return err
}

// stopTelemetry exports the spans still buffered, within a bound, and stops
// the export (nothing when telemetry is off).
func (s *Server) stopTelemetry() {
	if s.telemetry == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.telemetry.Shutdown(ctx); err != nil {
		s.log.Warn("telemetry: spans not exported on close", "error", err.Error())
	}
	s.telemetry = nil
}

func (s *Server) selfTestLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.selfTestInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.selfTest()
		}
	}
}

// selfTest runs one signer self-test unless one is already running.
func (s *Server) selfTest() {
	if !s.probing.CompareAndSwap(false, true) {
		return
	}
	defer s.probing.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Listener.RequestTimeout+5*time.Second)
	defer cancel()
	if err := s.signer.SelfTest(ctx); err != nil {
		if s.signerReady.Swap(false) {
			s.log.Error("signer self-test failed; not ready", "error", err.Error())
		}
		return
	}
	if !s.signerReady.Swap(true) {
		s.log.Info("signer self-test passed; signer ready again")
	}
}

func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(traced, commonHeaders)
	r.Post(tokenPath, s.limitTokenRequests(s.handleToken))
	r.Get(s.cfg.Signing.JWKSPath, s.serveStatic("application/jwk-set+json", s.jwks))
	r.Get(metadataPath, s.serveStatic("application/json", s.metadata))
	r.Get(openIDConfigurationPath, s.serveStatic("application/json", s.metadata))
	r.Get(healthPath, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
	})
	r.Get(readyPath, s.handleReady)
	notFound := func(w http.ResponseWriter, _ *http.Request) { writeError(w, ErrorInvalidRequest) }
	r.NotFound(notFound)
	r.MethodNotAllowed(notFound)
	return r
}

// traced gives each request a server span named by its route pattern, the
// child of an inbound traceparent, when telemetry is on (off, the span is a
// no-op one and the request goes through as it came).
func traced(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := telemetry.ServerSpan(r.Context(), r)
		if !span.IsRecording() {
			// Off: ctx is the request's own. Sampled out: it carries the
			// trace context, for the work under it.
			span.End()
			if ctx != r.Context() {
				r = r.WithContext(ctx)
			}
			next.ServeHTTP(w, r)
			return
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			// chi's route context is the one the router put in the
			// request's context before the middleware ran.
			pattern := "unmatched"
			if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
				pattern = rc.RoutePattern()
			}
			telemetry.EndServerSpan(span, r.Method, pattern, rec.status)
		}()
		next.ServeHTTP(rec, r.WithContext(ctx))
	})
}

// statusRecorder notes the status a handler answered, for its span.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader implements http.ResponseWriter.
func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func commonHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Pragma", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

func (s *Server) serveStatic(contentType string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	}
}

func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	if !s.signerReady.Load() {
		s.selfTest() // single-flight: a concurrent probe just answers 503
	}
	if s.Ready() {
		writeJSON(w, http.StatusOK, []byte(`{"status":"ready"}`))
		return
	}
	writeJSON(w, http.StatusServiceUnavailable, []byte(`{"status":"not ready"}`))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

func writeError(w http.ResponseWriter, code string) {
	status := http.StatusBadRequest
	switch code {
	case ErrorInvalidClient:
		status = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_client"`)
	case ErrorServerError:
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, []byte(`{"error":"`+code+`"}`))
}

// decision is the outcome of one token request before it is audited.
type decision struct {
	code  string // error code; empty when a token is issued
	body  []byte
	entry audit.Entry
	why   string // operator-facing reason, value-free
}

func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	opID := audit.NewOperationID()
	d := s.decide(r)
	d.entry.OperationID = opID
	var appendTook time.Duration
	defer func() { s.metrics.tokenRequest(d.code, appendTook) }()
	if d.code != "" {
		d.entry.Outcome = audit.OutcomeDenied
		d.entry.Category = d.code
	} else {
		d.entry.Outcome = audit.OutcomeIssued
	}
	// The record must be durable before anything is released, even if the
	// client has gone away meanwhile.
	start := time.Now()
	err := s.appendAudit(context.WithoutCancel(r.Context()), d.entry)
	appendTook = time.Since(start)
	if err != nil {
		d.code = ErrorServerError
		s.log.Error("audit append failed; no token released", "operation", opID, "error", err.Error())
		writeError(w, ErrorServerError)
		return
	}
	if d.code != "" {
		s.log.Info("token request denied", "operation", opID, "error", d.code, "reason", d.why)
		writeError(w, d.code)
		return
	}
	s.log.Info("token issued", "operation", opID, "token", d.entry.TokenID)
	writeJSON(w, http.StatusOK, d.body)
}

// appendAudit appends the request's audit record and waits for the group
// commit that makes it durable, under a span "audit.append" of the request
// (one span per request waiting for its group: a group holds requests of
// several traces). A failed append marks the span failed without the
// error's text.
func (s *Server) appendAudit(ctx context.Context, e audit.Entry) error {
	ctx, span := telemetry.StartSpan(ctx, "audit.append")
	defer span.End()
	err := s.audit.Append(ctx, e)
	if err != nil {
		span.SetStatus(codes.Error, "the audit record was not appended")
	}
	return err
}

// decide parses, authenticates and mints. It never writes the response.
func (s *Server) decide(r *http.Request) decision {
	deny := func(code, why string) decision { return decision{code: code, why: why} }
	if !formContentType(r.Header.Get("Content-Type")) {
		return deny(ErrorInvalidRequest, "content type is not application/x-www-form-urlencoded")
	}
	limit := s.cfg.Listener.MaximumRequestBytes
	if r.ContentLength > limit {
		return deny(ErrorInvalidRequest, "request body larger than listener.maximumRequestBytes")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return deny(ErrorInvalidRequest, "request body could not be read in time")
	}
	if int64(len(body)) > limit {
		return deny(ErrorInvalidRequest, "request body larger than listener.maximumRequestBytes")
	}
	form, err := parseTokenForm(string(body))
	if err != nil {
		return deny(ErrorInvalidRequest, err.Error())
	}
	switch {
	case form.grantType == nil:
		return deny(ErrorInvalidRequest, "grant_type missing")
	case form.assertionType == nil || form.assertion == nil:
		return deny(ErrorInvalidRequest, "client_assertion_type or client_assertion missing")
	case *form.grantType != clientCredentialsGrant:
		return deny(ErrorUnsupportedGrantType, "grant_type is not client_credentials")
	case *form.assertionType != jwtBearerAssertionType:
		return deny(ErrorInvalidRequest, "client_assertion_type is not the JWT-bearer URN")
	}
	now := s.opts.now()
	reg := s.registry.Load()
	client, obo, err := s.auth.authenticate(reg, *form.assertion, now)
	if err != nil {
		if err == errReplayFull {
			s.log.Warn("replay cache is full of live assertion ids; refusing assertions until entries expire", "capacity", s.cfg.ClientAssertion.ReplayCacheEntries)
		}
		return deny(ErrorInvalidClient, err.Error())
	}
	if form.clientID != nil && *form.clientID != client.ID {
		return deny(ErrorInvalidClient, "client_id does not equal the authenticated client")
	}
	m := &mintRequest{client: client, now: now, jti: newTokenID(), kid: s.signer.KeyID(), obo: obo}
	// A client going away does not cancel signing: a cancelled call would
	// wrongly mark the signer unavailable. The request time-out bounds it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.Listener.RequestTimeout)
	defer cancel()
	resp, err := mint(ctx, s.cfg, s.signer, m)
	if err != nil {
		s.signerReady.Store(false)
		return deny(ErrorServerError, "signing failed: "+err.Error())
	}
	s.signerReady.Store(true)
	pseudo := map[string]string{
		audit.LabelClient:    s.audit.Pseudonym(audit.LabelClient, client.ID),
		audit.LabelPrincipal: s.audit.Pseudonym(audit.LabelPrincipal, client.Principal),
		audit.LabelAuthority: s.audit.Pseudonym(audit.LabelAuthority, client.authority),
	}
	if obo != nil {
		pseudo[audit.LabelActor] = s.audit.Pseudonym(audit.LabelActor, obo.Actor)
		if subj, err := canonjson.Marshal(obo.Subject); err == nil {
			pseudo[audit.LabelSubject] = s.audit.Pseudonym(audit.LabelSubject, string(subj))
		}
	}
	return decision{body: resp, entry: audit.Entry{
		TokenID:    m.jti,
		KeyID:      m.kid,
		ExpiresAt:  now.Add(s.cfg.AccessTokens.Lifetime),
		Delegated:  obo != nil,
		Pseudonyms: pseudo,
	}}
}

// formContentType accepts application/x-www-form-urlencoded, optionally with
// the single parameter charset=utf-8.
func formContentType(v string) bool {
	mt, params, err := mime.ParseMediaType(v)
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return false
	}
	for k, val := range params {
		if k != "charset" || !strings.EqualFold(val, "utf-8") {
			return false
		}
	}
	return true
}

type tokenForm struct {
	grantType, assertionType, assertion, clientID *string
}

// parseTokenForm decodes the form body. The fields the endpoint reads must not
// repeat; other parameters are ignored (RFC 6749 §3.1).
func parseTokenForm(body string) (*tokenForm, error) {
	f := &tokenForm{}
	for part := range strings.SplitSeq(body, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, errors.New("malformed form encoding")
		}
		var dst **string
		switch key {
		case "grant_type":
			dst = &f.grantType
		case "client_assertion_type":
			dst = &f.assertionType
		case "client_assertion":
			dst = &f.assertion
		case "client_id":
			dst = &f.clientID
		default:
			continue
		}
		if *dst != nil {
			return nil, fmt.Errorf("form field %s repeated", key)
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return nil, errors.New("malformed form encoding")
		}
		*dst = &val
	}
	return f, nil
}

// jwksDocument is the key set: the active key and the published keys
// (revoked keys can be neither, so are never listed).
func jwksDocument(cfg *Config) ([]byte, error) {
	type jwk struct {
		Kty string `json:"kty"`
		Kid string `json:"kid"`
		Alg string `json:"alg"`
		Use string `json:"use"`
		Crv string `json:"crv"`
		X   string `json:"x"`
		Y   string `json:"y"`
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	for _, k := range append([]*jose.JSONWebKey{cfg.Signing.Active}, cfg.Signing.Published...) {
		raw, err := k.Public().MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("issuer: encode key set: %w", err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("issuer: encode key set: %w", err)
		}
		set.Keys = append(set.Keys, jwk{Kty: "EC", Kid: k.KeyID, Alg: "ES256", Use: "sig", Crv: fmt.Sprint(m["crv"]), X: fmt.Sprint(m["x"]), Y: fmt.Sprint(m["y"])})
	}
	return encodeJSON(set)
}

// metadataDocument is the RFC 8414 authorization server metadata.
func metadataDocument(cfg *Config) ([]byte, error) {
	base := strings.TrimSuffix(cfg.EndpointBaseURL, "/")
	if base == "" {
		base = strings.TrimSuffix(cfg.Issuer, "/")
	}
	algs := make([]string, 0, len(cfg.ClientAssertion.Algorithms))
	for _, a := range cfg.ClientAssertion.Algorithms {
		algs = append(algs, string(a))
	}
	sort.Strings(algs)
	doc := map[string]any{
		"issuer":                                cfg.Issuer,
		"token_endpoint":                        base + tokenPath,
		"jwks_uri":                              base + cfg.Signing.JWKSPath,
		"grant_types_supported":                 []string{clientCredentialsGrant},
		"token_endpoint_auth_methods_supported": []string{"private_key_jwt"},
		"token_endpoint_auth_signing_alg_values_supported": algs,
		"response_types_supported":                         []string{},
	}
	return encodeJSON(doc)
}
