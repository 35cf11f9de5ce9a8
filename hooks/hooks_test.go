package hooks

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
)

// eventsPackage returns a package with the target entity "person" and the
// request entity "application"; each hook is declared on application when
// its trigger is request_lifecycle, on person otherwise.
func eventsPackage(hooks ...*model.Hook) *model.Package {
	person := &model.Entity{ID: "person", Route: "persons", MutationMode: model.Mutable, Fields: []*model.Field{
		{ID: "name", APIName: "name", Type: model.TypeString, Required: true},
		{ID: "status", APIName: "status", Type: model.TypeCode, Values: []string{"active", "inactive"}},
		{ID: "age", APIName: "age", Type: model.TypeInteger},
		{ID: "seen", APIName: "seenAt", Type: model.TypeTimestamp},
		{ID: "note", APIName: "note", Type: model.TypeText},
	}}
	application := &model.Entity{ID: "application", Route: "applications", MutationMode: model.Mutable, ChangeRequest: &model.ChangeRequest{},
		Fields: []*model.Field{{ID: "name", APIName: "applicantName", Type: model.TypeString}}}
	for _, h := range hooks {
		if h.Trigger == model.TriggerRequestLifecycle {
			application.Hooks = append(application.Hooks, h)
		} else {
			person.Hooks = append(person.Hooks, h)
		}
	}
	return &model.Package{Format: model.Format, Registry: model.Registry{ID: "test"}, Entities: []*model.Entity{person, application}}
}

// urlHook returns a hook on created records, classified internal, that
// delivers to the webhook destination dest.
func urlHook(id, dest string) *model.Hook {
	return &model.Hook{ID: id, EventType: id + "-v1", Phase: "after", Trigger: model.TriggerCreated, Projection: []string{"name"},
		Classification: "internal", Handler: &model.Handler{Kind: model.HandlerURL, DestinationID: dest}}
}

// newDestination returns a public destination with the shortest key
// allowed and the ceiling internal.
func newDestination(id string) *Destination {
	u, _ := url.Parse("https://hooks.example.org/registry/" + id)
	return &Destination{ID: id, URL: u, Key: bytes.Repeat([]byte{7}, MinKeyBytes), Network: NetworkPublic, Ceiling: "internal"}
}

// configFor returns a configuration binding dests, with a data schema for
// every hook of pkg and the instance id "host-1".
func configFor(pkg *model.Package, dests ...*Destination) Options {
	cfg := Options{Package: pkg, InstanceID: "host-1", Destinations: map[string]*Destination{}, DataSchemas: map[string]string{},
		RecordReference: func(entityID, recordID string) string { return "ref:" + entityID + ":" + recordID }}
	for _, d := range dests {
		cfg.Destinations[d.ID] = d
	}
	for _, e := range pkg.Entities {
		for _, h := range e.Hooks {
			cfg.DataSchemas[e.ID+"."+h.ID] = "urn:test:event:" + e.ID + ":" + h.ID
		}
	}
	return cfg
}

// handlerModules loads a tengo hook handler as module id, the way a host
// loads its handlers, and returns the loaded set and the module's digest.
func handlerModules(t *testing.T, id string) (*plugins.Set, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	src := []byte(`output = {outcome: "acknowledged"}`)
	if err := os.WriteFile(filepath.Join(dir, "handler.tengo"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	digest := canonjson.DigestBytes(src)
	rt, err := plugins.NewRuntime(ctx, plugins.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(ctx) })
	set, err := rt.Load(ctx, []plugins.Module{{Module: model.Module{ID: id, Engine: model.EngineTengo, Kind: model.KindHookHandler,
		Path: "handler.tengo", SHA256: digest}}}, dir)
	if err != nil {
		t.Fatal(err)
	}
	return set, digest
}

// New refuses a configuration it could not deliver under: each case
// breaks one rule of an otherwise valid configuration.
func TestNewRefusesConfigurationItCannotDeliverUnder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hooks []*model.Hook
		edit  func(cfg *Options)
		want  string
	}{
		{"no package", nil, func(cfg *Options) { cfg.Package = nil }, "Options.Package is required"},
		{"no record reference", nil, func(cfg *Options) { cfg.RecordReference = nil }, "Options.RecordReference is required"},
		{"a negative reap period", nil, func(cfg *Options) { cfg.ReapEvery = -time.Second }, "Options.ReapEvery -1s is negative"},
		{"a negative lease grace", nil, func(cfg *Options) { cfg.LeaseGrace = -time.Second }, "Options.LeaseGrace -1s is negative"},
		{"a destination bound under another id", nil,
			func(cfg *Options) { cfg.Destinations["other"] = cfg.Destinations["crm"] },
			`destination "crm" is bound under id "other"`},
		{"a signing key one byte short", nil,
			func(cfg *Options) { cfg.Destinations["crm"].Key = cfg.Destinations["crm"].Key[1:] },
			"the signing key must hold at least 32 bytes"},
		{"an unused destination with a short key", nil,
			func(cfg *Options) {
				d := newDestination("spare")
				d.Key = []byte("short")
				cfg.Destinations["spare"] = d
			},
			"destination spare: the signing key"},
		{"an unknown ceiling", nil,
			func(cfg *Options) { cfg.Destinations["crm"].Ceiling = "secret" },
			`unknown classificationCeiling "secret"`},
		{"a hook without a data schema", nil,
			func(cfg *Options) { delete(cfg.DataSchemas, "person.person-created") },
			"event person.person-created has no data schema"},
		{"a production hook whose destination is not bound", nil,
			func(cfg *Options) { cfg.Package.Production = true; delete(cfg.Destinations, "crm") },
			`delivers to destination "crm", which eventDestinations does not bind`},
		{"no instance id", nil,
			func(cfg *Options) { cfg.InstanceID = "" },
			"instanceId is required"},
		{"an instance id in capitals", nil,
			func(cfg *Options) { cfg.InstanceID = "Host-1" },
			"instanceId is required"},
		{"an instance id starting with a dash", nil,
			func(cfg *Options) { cfg.InstanceID = "-host" },
			"instanceId is required"},
		{"an instance id of 65 characters", nil,
			func(cfg *Options) { cfg.InstanceID = strings.Repeat("h", 65) },
			"instanceId is required"},
		{"a hook classified above its destination's ceiling", nil,
			func(cfg *Options) { cfg.Package.Entities[0].Hooks[0].Classification = "restricted" },
			"is classified restricted, above the classificationCeiling internal of destination crm"},
		{"a public ceiling under an internal hook", nil,
			func(cfg *Options) { cfg.Destinations["crm"].Ceiling = "public" },
			"above the classificationCeiling public"},
		{"a local handler whose module is not loaded",
			[]*model.Hook{{ID: "local", EventType: "local-v1", Trigger: model.TriggerCreated, Classification: "internal",
				Handler: &model.Handler{Kind: model.HandlerTengo, Module: "handler"}}},
			nil, "its handler module handler is not loaded"},
		{"an unknown handler kind",
			[]*model.Hook{{ID: "mail", EventType: "mail-v1", Trigger: model.TriggerCreated, Classification: "internal",
				Handler: &model.Handler{Kind: "email"}}},
			nil, `unknown handler kind "email"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkg := eventsPackage(append([]*model.Hook{urlHook("person-created", "crm")}, tc.hooks...)...)
			cfg := configFor(pkg, newDestination("crm"))
			if tc.edit != nil {
				tc.edit(&cfg)
			}
			if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// What New accepts at the edges of its rules: a key of exactly MinKeyBytes,
// a hook classified at its destination's ceiling, an instance id of 64
// characters; a hook without a handler is left out.
func TestNewAcceptsConfigurationAtTheEdgesOfItsRules(t *testing.T) {
	pkg := eventsPackage(urlHook("person-created", "crm"),
		&model.Hook{ID: "draft-only", EventType: "draft-only-v1", Trigger: model.TriggerCreated, Classification: "internal"})
	pkg.Entities[0].Hooks[0].Classification = "restricted"
	d := newDestination("crm")
	d.Ceiling = "restricted"
	cfg := configFor(pkg, d)
	cfg.InstanceID = "h" + strings.Repeat("-9", 31) + "x"
	delete(cfg.DataSchemas, "person.draft-only")
	ev, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ev.hooks["person-created"] == nil || ev.hooks["person-created"].dest != d {
		t.Fatal("the url hook is not bound to its destination")
	}
	if _, ok := ev.hooks["draft-only"]; ok {
		t.Fatal("a hook without a handler is bound")
	}
	if ev.source != "urn:engine:registry:test:instance:"+cfg.InstanceID {
		t.Fatalf("source %q", ev.source)
	}
	if got := ev.Bindings(); !reflect.DeepEqual(got, map[string]string{"crm": d.BindingDigest()}) {
		t.Fatalf("bindings %v", got)
	}
}

// In a development package, a url hook whose destination is not bound is
// left out with a warning (nothing will be captured for it) rather than
// refused, and no instance id is needed for it.
func TestADevelopmentHookWithoutItsDestinationIsLeftOutAndLogged(t *testing.T) {
	var logs bytes.Buffer
	pkg := eventsPackage(urlHook("person-created", "crm"))
	cfg := configFor(pkg)
	cfg.InstanceID = ""
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	ev, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.hooks) != 0 {
		t.Fatalf("bound hooks %v", ev.hooks)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "hook=person-created") || !strings.Contains(out, "destination=crm") {
		t.Fatalf("log %q", out)
	}
}

// A local handler is bound to its loaded module's digest; a host with local
// handlers only needs no instance id and names itself "local".
func TestLocalHandlersAreBoundToTheirModuleDigest(t *testing.T) {
	set, digest := handlerModules(t, "handler")
	pkg := eventsPackage(&model.Hook{ID: "local", EventType: "local-v1", Trigger: model.TriggerCreated, Classification: "restricted",
		Handler: &model.Handler{Kind: model.HandlerTengo, Module: "handler"}})
	cfg := configFor(pkg)
	cfg.InstanceID = ""
	cfg.Handlers = set
	ev, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.Modules(); !reflect.DeepEqual(got, map[string]string{"local": digest}) {
		t.Fatalf("modules %v, want local → %s", got, digest)
	}
	if ev.source != "urn:engine:registry:test:instance:local" {
		t.Fatalf("source %q", ev.source)
	}
	if b := ev.hooks["local"]; b.dest != nil || b.binding != "" {
		t.Fatalf("a local handler has a destination: %+v", b)
	}
}

// A host that delivers to a webhook destination needs its instance id
// whatever order its hooks are declared in: a local handler met first does
// not lend it the name "local".
func TestUrlHooksNeedAnInstanceIDWhateverTheHookOrder(t *testing.T) {
	set, _ := handlerModules(t, "handler")
	local := &model.Hook{ID: "local", EventType: "local-v1", Trigger: model.TriggerCreated, Classification: "internal",
		Handler: &model.Handler{Kind: model.HandlerTengo, Module: "handler"}}
	for name, hooks := range map[string][]*model.Hook{
		"url hook first":      {urlHook("person-created", "crm"), local},
		"local handler first": {local, urlHook("person-created", "crm")},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := configFor(eventsPackage(hooks...), newDestination("crm"))
			cfg.InstanceID = ""
			cfg.Handlers = set
			if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "instanceId is required") {
				t.Fatalf("New: %v, want the instance id required", err)
			}
		})
	}
}

// The binding digest names what retained work was captured for: the
// destination's id, URL, network policy and ceiling, never its key.
func TestTheBindingDigestCoversEverythingButTheKey(t *testing.T) {
	base := newDestination("crm").BindingDigest()
	rotated := newDestination("crm")
	rotated.Key = bytes.Repeat([]byte{9}, 64)
	if rotated.BindingDigest() != base {
		t.Fatal("rotating the key changed the binding")
	}
	for name, edit := range map[string]func(d *Destination){
		"id":      func(d *Destination) { d.ID = "crm2" },
		"url":     func(d *Destination) { d.URL, _ = url.Parse("https://hooks.example.org/registry/other") },
		"network": func(d *Destination) { d.Network = NetworkPrivate },
		"ceiling": func(d *Destination) { d.Ceiling = "restricted" },
	} {
		d := newDestination("crm")
		edit(d)
		if d.BindingDigest() == base {
			t.Errorf("changing the %s left the binding as it was", name)
		}
	}
}

// A destination may tighten the compiled delivery policy (fewer attempts,
// a shorter attempt timeout, a shorter payload retention) but never widen
// it: New refuses a limit above the compiled one or outside its range, and
// a payload retention the (tightened) retry schedule would outlast, and
// leaves what the destination does not set (0) as compiled. Retry delays
// and the payload size bound are never changed.
func TestRuntimeLimitsTightenButNeverWidenTheCompiledPolicy(t *testing.T) {
	compiled := model.DefaultDelivery()
	for _, tc := range []struct {
		name                string
		attempts, timeoutMs int
		retention           int64
		want                model.Delivery
		refused             string
	}{
		{name: "nothing set", want: *compiled},
		{name: "fewer attempts", attempts: 2, want: withDelivery(func(d *model.Delivery) { d.MaximumAttempts = 2 })},
		{name: "one attempt", attempts: 1, want: withDelivery(func(d *model.Delivery) { d.MaximumAttempts = 1 })},
		{name: "as many attempts", attempts: 10, want: *compiled},
		{name: "more attempts", attempts: 11, refused: "maximumAttempts 11 must be between 1 and the compiled 10"},
		{name: "negative attempts", attempts: -1, refused: "maximumAttempts -1"},
		{name: "a shorter timeout", timeoutMs: 250, want: withDelivery(func(d *model.Delivery) { d.AttemptTimeoutMs = 250 })},
		{name: "the shortest timeout", timeoutMs: 100, want: withDelivery(func(d *model.Delivery) { d.AttemptTimeoutMs = 100 })},
		{name: "a timeout under 100 ms", timeoutMs: 99, refused: "attemptTimeoutMs 99 must be between 100 and the compiled 5000"},
		{name: "a longer timeout", timeoutMs: 5001, refused: "attemptTimeoutMs 5001"},
		{name: "a shorter retention", retention: 2 * 86400, want: withDelivery(func(d *model.Delivery) { d.PayloadRetentionSeconds = 2 * 86400 })},
		// The default schedule spans up to 27 h 15 min 6 s with its jitter.
		{name: "a retention the schedule outlasts", retention: 3600, refused: "payloadRetentionSeconds 3600 is not longer than the retry schedule of 10 attempts"},
		{name: "a retention just shorter than the schedule", retention: 98106,
			refused: "payloadRetentionSeconds 98106 is not longer than the retry schedule of 10 attempts (up to 27h15m6s)"},
		{name: "a retention just longer than the schedule", retention: 98107, want: withDelivery(func(d *model.Delivery) { d.PayloadRetentionSeconds = 98107 })},
		{name: "fewer attempts make room for a short retention", attempts: 4, retention: 3600, want: withDelivery(func(d *model.Delivery) {
			d.MaximumAttempts, d.PayloadRetentionSeconds = 4, 3600
		})},
		{name: "a longer retention", retention: compiled.PayloadRetentionSeconds + 1, refused: "payloadRetentionSeconds 604801 must be between 1 and the compiled 604800"},
		{name: "a negative retention", retention: -5, refused: "payloadRetentionSeconds -5"},
		{name: "everything tightened", attempts: 3, timeoutMs: 1000, retention: 60, want: withDelivery(func(d *model.Delivery) {
			d.MaximumAttempts, d.AttemptTimeoutMs, d.PayloadRetentionSeconds = 3, 1000, 60
		})},
		{name: "one limit widened among tightened ones", attempts: 3, timeoutMs: 6000, retention: 60, refused: "attemptTimeoutMs 6000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDestination("crm")
			d.MaximumAttempts, d.AttemptTimeoutMs, d.PayloadRetentionSeconds = tc.attempts, tc.timeoutMs, tc.retention
			ev, err := New(configFor(eventsPackage(urlHook("person-created", "crm")), d))
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), "destination crm, hook person-created: "+tc.refused) {
					t.Fatalf("New: %v, want a refusal saying %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ev.hooks["person-created"].policy; !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("policy %+v, want %+v", got, tc.want)
			}
		})
	}
}

// withDelivery returns the default compiled policy changed by edit.
func withDelivery(edit func(d *model.Delivery)) model.Delivery {
	d := model.DefaultDelivery()
	edit(d)
	return *d
}

// Tightening is measured against each hook's own compiled policy, not the
// default: one destination's limit may tighten one hook and widen another,
// and then the host does not start. The compiled policy itself is never
// changed, so another host reading the same package sees it as compiled.
func TestRuntimeLimitsAreMeasuredAgainstEachHooksCompiledPolicy(t *testing.T) {
	strict := urlHook("strict", "crm")
	strict.Delivery = withDeliveryPtr(func(d *model.Delivery) { d.MaximumAttempts, d.AttemptTimeoutMs = 3, 2000 })
	lenient := urlHook("lenient", "crm")
	pkg := eventsPackage(lenient, strict)

	d := newDestination("crm")
	d.MaximumAttempts = 4
	if _, err := New(configFor(pkg, d)); err == nil || !strings.Contains(err.Error(), "hook strict: maximumAttempts 4 must be between 1 and the compiled 3") {
		t.Fatalf("New: %v", err)
	}

	d.MaximumAttempts, d.AttemptTimeoutMs = 2, 1500
	ev, err := New(configFor(pkg, d))
	if err != nil {
		t.Fatal(err)
	}
	if p := ev.hooks["strict"].policy; p.MaximumAttempts != 2 || p.AttemptTimeoutMs != 1500 {
		t.Errorf("strict policy %+v", p)
	}
	if p := ev.hooks["lenient"].policy; p.MaximumAttempts != 2 || p.AttemptTimeoutMs != 1500 || p.PayloadRetentionSeconds != model.DefaultDelivery().PayloadRetentionSeconds {
		t.Errorf("lenient policy %+v", p)
	}
	if strict.Delivery.MaximumAttempts != 3 || strict.Delivery.AttemptTimeoutMs != 2000 || lenient.Delivery != nil {
		t.Fatalf("New changed the compiled policies: %+v, %+v", strict.Delivery, lenient.Delivery)
	}
	if p := ev.hooks["strict"].policy; !reflect.DeepEqual(p.RetryDelaysMs, strict.Delivery.RetryDelaysMs) {
		t.Errorf("retry delays %v, compiled %v", p.RetryDelaysMs, strict.Delivery.RetryDelaysMs)
	}
}

// withDeliveryPtr returns a compiled policy: the default changed by edit.
func withDeliveryPtr(edit func(d *model.Delivery)) *model.Delivery {
	d := withDelivery(edit)
	return &d
}
