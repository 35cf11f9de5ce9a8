// Package hooks delivers the events a registry emits.
//
// Events are captured in the same transaction as the write that causes them
// (Events implements store.Capturer: conditions evaluated on the stored
// before and after values, the declared projection, one delivery row and one
// River job carrying only its id), then delivered after commit by the River
// workers of this package: as signed CloudEvents (HTTP binary mode) to
// webhook destinations, with a durable attempt audit before each send, the
// compiled retry schedule, dead letters and operator replay, and to local
// handlers (reviewed tengo or wasm modules run through package plugins).
// Nothing here runs a network call inside a request's transaction.
package hooks

import (
	"crypto/hmac"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"time"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
)

// Network policies of a destination.
const (
	// NetworkPublic (the default) needs https and a public address.
	NetworkPublic = "public"
	// NetworkPrivate admits http and private or loopback addresses too.
	NetworkPrivate = "private"
	// NetworkLoopback admits only loopback addresses, http or https.
	NetworkLoopback = "loopback"
)

// Destination is a webhook destination bound by the runtime configuration.
type Destination struct {
	ID string
	// URL is the destination: scheme, host and the fixed request path.
	URL *url.URL
	// Key is the signing key, its exact bytes (at least MinKeyBytes).
	Key []byte
	// PreviousKey is the key being retired during a rotation, its exact
	// bytes, or nil. While it is set every delivery's webhook-signature
	// carries a second entry made with it; X-Registry-Signature, which the
	// seed defines as one value, is made with Key only.
	PreviousKey []byte
	// Network is NetworkPublic, NetworkPrivate or NetworkLoopback.
	Network string
	// Ceiling is the highest event classification the destination may get.
	Ceiling string
	// MaximumAttempts, AttemptTimeoutMs and PayloadRetentionSeconds tighten
	// the compiled policy when set (0: as compiled); they never widen it.
	MaximumAttempts, AttemptTimeoutMs int
	PayloadRetentionSeconds           int64
}

// BindingDigest identifies what a delivery was captured for: the
// destination's id, URL, network policy and ceiling (not its key, so a key
// can be rotated under retained work).
func (d *Destination) BindingDigest() string {
	dg, err := canonjson.Digest(map[string]string{"destinationId": d.ID, "url": d.URL.String(), "network": d.Network, "classificationCeiling": d.Ceiling})
	if err != nil {
		panic("hooks: binding digest: " + err.Error()) // strings always encode
	}
	return dg
}

// Keys returns the keys deliveries to d are signed with: Key, then
// PreviousKey while a rotation holds one.
func (d *Destination) Keys() [][]byte {
	if d.PreviousKey == nil {
		return [][]byte{d.Key}
	}
	return [][]byte{d.Key, d.PreviousKey}
}

// Options configure the events of one host (New). Package and
// RecordReference are required; every other field has the default its
// comment names.
type Options struct {
	// Package is the active package whose hooks are captured and
	// delivered. Required.
	Package *model.Package
	// InstanceID names this deployment in the event source: lowercase
	// letters, digits and dashes, at most 64. Required when a url hook is
	// delivered; default "" (a package whose hooks are all local handlers
	// is sourced as instance "local").
	InstanceID string
	// Destinations are the bound webhook destinations by id. Default none:
	// a production package's url hook is then refused, a development
	// package's left out.
	Destinations map[string]*Destination
	// DataSchemas maps "<entity>.<event>" to the event's dataschema URN;
	// every hook with a handler needs one. Default none.
	DataSchemas map[string]string
	// RecordReference returns the keyed reference of a record, the subject
	// of its events. Required.
	RecordReference func(entityID, recordID string) string
	// Handlers run local handler modules. Default nil: the package has
	// none (a local handler hook is then refused).
	Handlers *plugins.Set
	// Logger receives warnings. Default: discarded.
	Logger *slog.Logger
	// ReapEvery is the period of the lease reaper and payload expiry.
	// Default 5 s; negative is refused.
	ReapEvery time.Duration
	// LeaseGrace is added to the attempt timeout to make a lease. Default
	// 5 s; negative is refused.
	LeaseGrace time.Duration
	// Metrics receives the delivery figures. Default: unregistered.
	Metrics *Metrics
}

// check refuses options New cannot work with and fills the defaults.
func (o *Options) check() error {
	switch {
	case o.Package == nil:
		return errors.New("hooks: Options.Package is required")
	case o.RecordReference == nil:
		return errors.New("hooks: Options.RecordReference is required: events name their record by its keyed reference")
	case o.ReapEvery < 0:
		return fmt.Errorf("hooks: Options.ReapEvery %s is negative", o.ReapEvery)
	case o.LeaseGrace < 0:
		return fmt.Errorf("hooks: Options.LeaseGrace %s is negative", o.LeaseGrace)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ReapEvery == 0 {
		o.ReapEvery = 5 * time.Second
	}
	if o.LeaseGrace == 0 {
		o.LeaseGrace = 5 * time.Second
	}
	return nil
}

// MaxHop is the loop limit: an event caused, through local handlers, by a
// chain of more than MaxHop earlier events is refused with the write that
// would capture it.
const MaxHop = 8

// ErrLoop refuses a write whose event would exceed MaxHop.
var ErrLoop = errors.New("hooks: the event chain is longer than the loop limit")

var instancePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// bound is one hook as this host captures and delivers it.
type bound struct {
	entity     *model.Entity
	hook       *model.Hook
	dest       *Destination // url handlers
	policy     model.Delivery
	dataschema string
	binding    string
	module     *plugins.Module // local handlers
}

// Events captures and delivers a package's events.
type Events struct {
	cfg    Options
	source string
	hooks  map[string]*bound // by hook id
	log    *slog.Logger
	m      *Metrics
	// clients are the destinations' HTTP clients, by destination id.
	clients map[string]Doer
}

// New checks the options (see Options) and the configuration against the
// package and returns the events of a host. It refuses a url hook whose classification exceeds its
// destination's ceiling, a runtime limit that widens the compiled one, a
// production package whose url hook has no destination, and a local handler
// whose module is not loaded. A development package's url hook without a
// destination is left out (logged): nothing is captured for it.
func New(cfg Options) (*Events, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	p := cfg.Package
	ev := &Events{cfg: cfg, hooks: map[string]*bound{}, log: cfg.Logger, clients: map[string]Doer{}, m: cfg.Metrics,
		source: "urn:engine:registry:" + p.Registry.ID + ":instance:" + cfg.InstanceID}
	for id, d := range cfg.Destinations {
		if id != d.ID {
			return nil, fmt.Errorf("hooks: destination %q is bound under id %q", d.ID, id)
		}
		if len(d.Key) < MinKeyBytes {
			return nil, fmt.Errorf("hooks: destination %s: the signing key must hold at least %d bytes", id, MinKeyBytes)
		}
		if d.PreviousKey != nil && len(d.PreviousKey) < MinKeyBytes {
			return nil, fmt.Errorf("hooks: destination %s: the previous signing key must hold at least %d bytes", id, MinKeyBytes)
		}
		if d.PreviousKey != nil && hmac.Equal(d.PreviousKey, d.Key) {
			return nil, fmt.Errorf("hooks: destination %s: the previous signing key is the current one; a rotation needs a new key", id)
		}
		if model.ClassificationRank(d.Ceiling) < 0 {
			return nil, fmt.Errorf("hooks: destination %s: unknown classificationCeiling %q", id, d.Ceiling)
		}
		ev.clients[id] = newClient(d)
	}
	if ev.m == nil {
		ev.m = NewMetrics(nil)
	}
	// instanceID is the instance id as configured: a url hook needs it even
	// when a local handler met before it named the source "local".
	instanceID := cfg.InstanceID
	for _, e := range p.Entities {
		for _, h := range e.Hooks {
			if h.Handler == nil {
				continue
			}
			b := &bound{entity: e, hook: h, dataschema: cfg.DataSchemas[e.ID+"."+h.ID]}
			if b.dataschema == "" {
				return nil, fmt.Errorf("hooks: event %s.%s has no data schema", e.ID, h.ID)
			}
			b.policy = *model.DefaultDelivery()
			if h.Delivery != nil {
				b.policy = *h.Delivery
			}
			switch h.Handler.Kind {
			case model.HandlerURL:
				d := cfg.Destinations[h.Handler.DestinationID]
				if d == nil {
					if p.Production {
						return nil, fmt.Errorf("hooks: hook %s of %s delivers to destination %q, which eventDestinations does not bind", h.ID, e.ID, h.Handler.DestinationID)
					}
					ev.log.Warn("events of this hook are not captured: its destination is not bound in eventDestinations", "hook", h.ID, "entity", e.ID, "destination", h.Handler.DestinationID)
					continue
				}
				if instanceID == "" || !instancePattern.MatchString(instanceID) {
					return nil, errors.New("hooks: instanceId is required (lowercase letters, digits and dashes) when events are delivered")
				}
				if model.ClassificationRank(h.Classification) > model.ClassificationRank(d.Ceiling) {
					return nil, fmt.Errorf("hooks: hook %s of %s is classified %s, above the classificationCeiling %s of destination %s",
						h.ID, e.ID, h.Classification, d.Ceiling, d.ID)
				}
				if err := tighten(&b.policy, d); err != nil {
					return nil, fmt.Errorf("hooks: destination %s, hook %s: %w", d.ID, h.ID, err)
				}
				b.dest, b.binding = d, d.BindingDigest()
			case model.HandlerTengo, model.HandlerWASM:
				if cfg.InstanceID == "" {
					cfg.InstanceID = "local"
					ev.source = "urn:engine:registry:" + p.Registry.ID + ":instance:local"
				}
				mod, ok := module(cfg.Handlers, h.Handler.Module)
				if !ok {
					return nil, fmt.Errorf("hooks: hook %s of %s: its handler module %s is not loaded", h.ID, e.ID, h.Handler.Module)
				}
				b.module = mod
			default:
				return nil, fmt.Errorf("hooks: hook %s of %s: unknown handler kind %q", h.ID, e.ID, h.Handler.Kind)
			}
			ev.hooks[h.ID] = b
		}
	}
	return ev, nil
}

// tighten applies a destination's limits to the compiled policy, refusing
// any that would widen it, and a payload retention the retry schedule
// would outlast. The schedule's steps are never changed: a destination
// shortens it by its number of attempts.
func tighten(p *model.Delivery, d *Destination) error {
	if n := d.MaximumAttempts; n != 0 {
		if n < 1 || n > p.MaximumAttempts {
			return fmt.Errorf("maximumAttempts %d must be between 1 and the compiled %d", n, p.MaximumAttempts)
		}
		p.MaximumAttempts = n
	}
	if n := d.AttemptTimeoutMs; n != 0 {
		if n < 100 || n > p.AttemptTimeoutMs {
			return fmt.Errorf("attemptTimeoutMs %d must be between 100 and the compiled %d", n, p.AttemptTimeoutMs)
		}
		p.AttemptTimeoutMs = n
	}
	if n := d.PayloadRetentionSeconds; n != 0 {
		if n < 1 || n > p.PayloadRetentionSeconds {
			return fmt.Errorf("payloadRetentionSeconds %d must be between 1 and the compiled %d", n, p.PayloadRetentionSeconds)
		}
		p.PayloadRetentionSeconds = n
	}
	// Checked on the tightened policy: fewer attempts may make room for a
	// shorter retention.
	if span := model.RetrySpan(p.RetryDelaysMs, p.MaximumAttempts); time.Duration(p.PayloadRetentionSeconds)*time.Second <= span {
		return fmt.Errorf("payloadRetentionSeconds %d is not longer than the retry schedule of %d attempts (up to %s): an event would expire while it is retried; lower maximumAttempts too",
			p.PayloadRetentionSeconds, p.MaximumAttempts, span)
	}
	return nil
}

func module(set *plugins.Set, id string) (*plugins.Module, bool) {
	if set == nil {
		return nil, false
	}
	for _, m := range set.Modules() {
		if m.ID == id {
			return &m, true
		}
	}
	return nil, false
}

// Bindings returns the binding digest of every bound destination, by id:
// what a replay or a start-up check compares retained work with.
func (ev *Events) Bindings() map[string]string {
	out := map[string]string{}
	for id, d := range ev.cfg.Destinations {
		out[id] = d.BindingDigest()
	}
	return out
}

// Modules returns the module digest of every local handler, by hook id.
func (ev *Events) Modules() map[string]string {
	out := map[string]string{}
	for id, b := range ev.hooks {
		if b.module != nil {
			out[id] = b.module.SHA256
		}
	}
	return out
}
