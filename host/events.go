package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/registrum/registrum/hooks"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
)

// openEvents binds the package's hooks to the configured destinations and
// local handler modules, before the store opens. It returns the events
// (the capturer the store is opened with, store.Options.Capture; the
// caller checks retained work against their bindings once the store is
// open, Events.CheckBindings) and the plugin runtime of the local handlers
// (nil when there are none).
func openEvents(ctx context.Context, cfg *config.Config, pkg *model.Package, keys records.Keys, log *slog.Logger, reg prometheus.Registerer) (*hooks.Events, *plugins.Runtime, error) {
	dests := map[string]*hooks.Destination{}
	for id, d := range cfg.EventDestinations {
		key, err := cfg.EventKey(id)
		if err != nil {
			return nil, nil, err
		}
		prev, err := cfg.PreviousEventKey(id)
		if err != nil {
			return nil, nil, err
		}
		u, err := url.Parse(d.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("host: event destination %s: %w", id, err)
		}
		dests[id] = &hooks.Destination{ID: id, URL: u, Key: key, PreviousKey: prev, Network: d.Network, Ceiling: d.ClassificationCeiling,
			MaximumAttempts: d.MaximumAttempts, AttemptTimeoutMs: d.AttemptTimeoutMs, PayloadRetentionSeconds: d.PayloadRetentionSeconds}
	}
	dir := packageDir(cfg.Package)
	schemas := map[string]string{}
	var mods []plugins.Module
	for _, e := range pkg.Entities {
		for _, h := range e.Hooks {
			urn, err := dataSchema(pkg, dir, e, h)
			if err != nil {
				return nil, nil, err
			}
			schemas[e.ID+"."+h.ID] = urn
			if h.Handler != nil && h.Handler.Module != "" {
				if m := pkg.ModuleByID(h.Handler.Module); m != nil {
					mods = append(mods, plugins.Module{Module: *m})
				}
			}
		}
	}
	var rt *plugins.Runtime
	var set *plugins.Set
	if len(mods) > 0 {
		var err error
		if rt, err = plugins.NewRuntime(ctx, plugins.Config{}); err != nil {
			return nil, nil, err
		}
		if set, err = rt.Load(ctx, mods, dir); err != nil {
			rt.Close(ctx)
			return nil, nil, fmt.Errorf("host: load hook handler modules: %w", err)
		}
	}
	ev, err := hooks.New(hooks.Options{Package: pkg, InstanceID: cfg.InstanceID, Destinations: dests, DataSchemas: schemas,
		RecordReference: keys.RecordReference, Handlers: set, Logger: log, Metrics: hooks.NewMetrics(reg)})
	if err != nil {
		if rt != nil {
			rt.Close(ctx)
		}
		return nil, nil, err
	}
	return ev, rt, nil
}

// dataSchema returns an event's dataschema URN from its packaged schema
// file. The host does not regenerate schemas: a package whose folder does
// not hold the file must be recompiled.
func dataSchema(pkg *model.Package, dir string, e *model.Entity, h *model.Hook) (string, error) {
	rel := model.EventSchemaPath(e.ID, h.ID)
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("host: event schema of %s.%s: the package does not hold %s: recompile it with this release", e.ID, h.ID, rel)
	}
	if err != nil {
		return "", fmt.Errorf("host: event schema of %s.%s: %w", e.ID, h.ID, err)
	}
	return model.EventSchemaURNOf(pkg.Registry.ID, e.ID, h.ID, b)
}

// packageDir is the folder of a package path (a folder or its package.json).
func packageDir(p string) string {
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		return filepath.Dir(p)
	}
	return p
}
