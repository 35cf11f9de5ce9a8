package plugins_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
)

// probeKind runs the hostile module's hook handler, which reports its clock
// year and random bytes as the retry kind "y<year>_<hex>".
func probeKind(t *testing.T, caps []model.Capability) (year int, random string) {
	t.Helper()
	rt := newRuntime(t, plugins.Config{InstancePerCall: true})
	m, dir := pinned(t, "probe", model.EngineWASM, model.KindHookHandler, filepath.Join(wasmDir, "hostile.wasm"))
	m.Capabilities = caps
	set := loadOne(t, rt, m, dir)
	res, err := set.HandleEvent(context.Background(), "probe", []byte(`{}`))
	if err != nil {
		t.Fatalf("%v (%v)", err, detail(err))
	}
	y, r, _ := strings.Cut(strings.TrimPrefix(res.Kind, "y"), "_")
	year, err = strconv.Atoi(y)
	if err != nil {
		t.Fatalf("kind %q", res.Kind)
	}
	return year, r
}

// TestWASMCapabilities checks clock and random are deterministic unless the
// module is granted them.
func TestWASMCapabilities(t *testing.T) {
	now := time.Now().Year()
	y1, r1 := probeKind(t, nil)
	y2, r2 := probeKind(t, nil)
	if y1 == now || y1 != y2 || r1 != r2 {
		t.Fatalf("without capabilities: years %d %d (now %d), random %s %s", y1, y2, now, r1, r2)
	}
	y3, r3 := probeKind(t, []model.Capability{model.CapabilityClock, model.CapabilityRandom})
	_, r4 := probeKind(t, []model.Capability{model.CapabilityRandom})
	if y3 != now || r3 == r4 || r3 == r1 {
		t.Fatalf("with capabilities: year %d (now %d), random %s %s", y3, now, r3, r4)
	}
}

// TestTengoCapabilities checks the clock and random modules exist only when
// granted, and a planner can be granted nothing.
func TestTengoCapabilities(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := []byte(`clock := import("clock"); random := import("random")
b := random.bytes(4)
output = {outcome: "retry", kind: "t" + string(clock.now_unix_ms()) + "_" + string(len(b))}`)
	file := filepath.Join(dir, "h.tengo")
	if err := os.WriteFile(file, src, 0o600); err != nil {
		t.Fatal(err)
	}
	m, _ := pinned(t, "h", model.EngineTengo, model.KindHookHandler, file)
	rt := newRuntime(t, plugins.Config{})
	if _, err := rt.Load(ctx, []plugins.Module{m}, dir); err == nil || !strings.Contains(err.Error(), "compile tengo script") {
		t.Fatalf("clock and random without capabilities: %v", err)
	}
	m.Capabilities = []model.Capability{model.CapabilityClock, model.CapabilityRandom}
	set := loadOne(t, rt, m, dir)
	res, err := set.HandleEvent(ctx, "h", []byte(`{}`))
	if err != nil {
		t.Fatalf("%v (%v)", err, detail(err))
	}
	ms, n, _ := strings.Cut(strings.TrimPrefix(res.Kind, "t"), "_")
	got, _ := strconv.ParseInt(ms, 10, 64)
	if d := time.Since(time.UnixMilli(got)); d < 0 || d > time.Minute || n != "4" {
		t.Fatalf("kind %q", res.Kind)
	}

	for _, tc := range []struct {
		kind model.ModuleKind
		caps []model.Capability
		want string
	}{
		{model.KindPlanner, []model.Capability{model.CapabilityClock}, "may have no capabilities"},
		{model.KindHookHandler, []model.Capability{"network"}, `capability "network"`},
	} {
		m := m
		m.Kind, m.Capabilities = tc.kind, tc.caps
		if _, err := rt.Load(ctx, []plugins.Module{m}, dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: want %q, got %v", tc.kind, tc.caps, tc.want, err)
		}
	}
	// The capabilities member is read from a package.
	var decoded plugins.Module
	if err := json.Unmarshal([]byte(`{"id":"h","engine":"tengo","kind":"hook-handler","path":"h.tengo","sha256":"`+m.SHA256+`","capabilities":["clock"]}`), &decoded); err != nil || len(decoded.Capabilities) != 1 {
		t.Fatalf("%+v %v", decoded, err)
	}
}
