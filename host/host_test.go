package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/host"
	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Run(m)) }

// tokenIssuer starts a real issuer whose standard demo client holds the
// minimal project's scope, and returns it with the host's authentication block.
func tokenIssuer(t *testing.T) (*authtest.Issuer, string) {
	t.Helper()
	return hosttest.TokenIssuer(t)
}

// serve opens the host of cfg and serves it over loopback HTTP until t ends.
func serve(t *testing.T, cfg *config.Config) (*host.Host, *httptest.Server) {
	t.Helper()
	return hosttest.Serve(t, cfg)
}

// deployment compiles a project and writes a runtime configuration for it.
func deployment(t *testing.T, projectDir, dsn string, extra ...string) *config.Config {
	t.Helper()
	return hosttest.Deployment(t, projectDir, dsn, extra...)
}

func get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestHostServesThePackagesPublishedDocuments(t *testing.T) {
	_, auth := tokenIssuer(t)
	cfg := deployment(t, "../project/testdata/minimal", storetest.NewDatabase(t), auth)
	h, srv := serve(t, cfg)

	want, err := os.ReadFile(filepath.Join(cfg.Package, "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, srv.URL+"/openapi.json")
	if resp.StatusCode != 200 || !bytes.Equal(body, want) {
		t.Fatalf("/openapi.json: %d, %d bytes (package holds %d)", resp.StatusCode, len(body), len(want))
	}
	want, _ = os.ReadFile(filepath.Join(cfg.Package, "schemas", "parcel.schema.json"))
	resp, body = get(t, srv.URL+"/v1/schemas/parcel")
	if resp.StatusCode != 200 || !bytes.Equal(body, want) || resp.Header.Get("Content-Type") != "application/schema+json" {
		t.Fatalf("/v1/schemas/parcel: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	resp, body = get(t, srv.URL+"/v1/schemas/nothing")
	if resp.StatusCode != 404 || !strings.Contains(string(body), "resource.not_found") {
		t.Fatalf("/v1/schemas/nothing: %d %s", resp.StatusCode, body)
	}
	metrics := httptest.NewServer(h.MetricsHandler())
	defer metrics.Close()
	_, m := get(t, metrics.URL)
	if !strings.Contains(string(m), `registrum_http_requests_total{method="GET",route="/v1/schemas/{entity}",status="200"} 1`) {
		t.Errorf("metrics lack the request count:\n%s", m)
	}
}

func TestHostRefusesAnUnmigratedOrNewerSchema(t *testing.T) {
	_, auth := tokenIssuer(t)
	dsn := storetest.NewDatabase(t)
	cfg := deployment(t, "../project/testdata/minimal", dsn, auth)
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	conn.Exec(context.Background(), "insert into registrum.schema_migrations (version, name) values (999, 'future')")
	if _, err := host.Open(context.Background(), cfg, slog.New(slog.DiscardHandler)); !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("newer schema: err = %v", err)
	}
	conn.Exec(context.Background(), "drop schema registrum cascade")
	_, err = host.Open(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if !errors.Is(err, store.ErrNotMigrated) || !strings.Contains(err.Error(), "registrum migrate") {
		t.Fatalf("unmigrated schema: err = %v", err)
	}
}

func TestHostRefusesAModifiedPackage(t *testing.T) {
	cfg := deployment(t, "../project/testdata/minimal", storetest.NewDatabase(t))
	path := filepath.Join(cfg.Package, "schemas", "parcel.schema.json")
	b, _ := os.ReadFile(path)
	os.WriteFile(path, append(b, ' '), 0o644)
	if _, err := host.Open(context.Background(), cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("modified package: err = %v", err)
	}
}

func TestRegistryDocumentDescribesWhatTheCallerMayUse(t *testing.T) {
	is, auth := tokenIssuer(t)
	cfg := deployment(t, "../project/testdata/minimal", storetest.NewDatabase(t), auth)
	_, srv := serve(t, cfg)
	// Without a token, the clerk profile shows nothing.
	resp, body := get(t, srv.URL+"/v1/registry")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"entities":[]`) {
		t.Fatalf("anonymous registry: %d %s", resp.StatusCode, body)
	}
	// A rejected token is refused as such.
	req, _ := http.NewRequest("GET", srv.URL+"/v1/registry", nil)
	req.Header.Set("Authorization", "Bearer not-a-token")
	r401, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r401.Body.Close()
	if r401.StatusCode != 401 {
		t.Fatalf("rejected token: %d", r401.StatusCode)
	}
	req, _ = http.NewRequest("GET", srv.URL+"/v1/registry", nil)
	req.Header.Set("Authorization", "Bearer "+is.Token(t, issuertest.StandardClientID))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var doc struct {
		Registry        struct{ ID string } `json:"registry"`
		PackageRevision string              `json:"packageRevision"`
		Entities        []struct {
			ID         string `json:"id"`
			Route      string `json:"route"`
			Schema     string `json:"schema"`
			Fields     []struct{ ID, APIName string }
			Operations []struct {
				Operation             string   `json:"operation"`
				ReadableFields        []string `json:"readableFields"`
				ReadableRequestFields []string `json:"readableRequestFields"`
			} `json:"operations"`
		} `json:"entities"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Registry.ID != "parcels" || !strings.HasPrefix(doc.PackageRevision, "sha256:") || len(doc.Entities) != 1 {
		t.Fatalf("registry document %s", body)
	}
	e := doc.Entities[0]
	if e.Route != "parcels" || e.Schema != "/v1/schemas/parcel" || len(e.Fields) != 3 || e.Fields[0].APIName != "parcelCode" {
		t.Fatalf("entity entry %+v", e)
	}
	if len(e.Operations) == 0 || e.Operations[0].ReadableRequestFields == nil || len(e.Operations[0].ReadableRequestFields) != 0 {
		t.Fatalf("operations %+v: a non-request entity lists no readable request fields", e.Operations)
	}
}

func TestHostServesTheExamplesFormAndConcealsRequestEntities(t *testing.T) {
	is, auth := tokenIssuer(t)
	cfg := deployment(t, "../examples/childsupport", storetest.NewDatabase(t), auth)
	// The example's http verifier needs its credential to open; nothing here
	// uploads, so no scanner runs.
	if err := os.WriteFile(filepath.Join(cfg.Secrets.Root, "eicar-scanner-token"), []byte("unused"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, srv := serve(t, cfg)
	want, err := os.ReadFile(filepath.Join(cfg.Package, "forms", "child-support-application", "schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, srv.URL+"/metadata/forms/child-support-application/schema.json")
	if resp.StatusCode != 200 || !bytes.Equal(body, want) {
		t.Fatalf("form schema: %d %s", resp.StatusCode, body)
	}
	var form map[string]any
	json.Unmarshal(body, &form)
	if form["$id"] != "https://childsupport.example.test/metadata/forms/child-support-application/schema.json" {
		t.Errorf("form $id = %v", form["$id"])
	}
	// Applications are change requests: not served as ordinary records.
	req, _ := http.NewRequest("GET", srv.URL+"/v1/records/applications", nil)
	req.Header.Set("Authorization", "Bearer "+is.Token(t, issuertest.StandardClientID))
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 404 {
		t.Fatalf("request entity list answered %d", r.StatusCode)
	}
	// Service offices are public through the anonymous profile.
	resp, body = get(t, srv.URL+"/v1/records/service-offices")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"items":[]`) {
		t.Fatalf("public list: %d %s", resp.StatusCode, body)
	}
}

// TestThePoolIsSizedForAServer holds the pool sizes of store.Connect: 32
// connections unless the connection string sets pool_max_conns, which is
// honoured down to the smallest pool the host runs on (2) and refused
// below it.
func TestThePoolIsSizedForAServer(t *testing.T) {
	dsn := storetest.NewDatabase(t)
	ctx := context.Background()
	for _, c := range []struct {
		dsn  string
		want int32
	}{{dsn, store.DefaultMaxConns}, {dsn + " pool_max_conns=2", 2}, {dsn + " pool_max_conns=64", 64}} {
		pool, err := store.Connect(ctx, c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if got := pool.Config().MaxConns; got != c.want {
			t.Errorf("%s: pool of %d, want %d", c.dsn, got, c.want)
		}
		pool.Close()
	}
	if store.DefaultMaxConns < 32 {
		t.Fatalf("the default pool (%d) cannot serve 32 concurrent clients at once", store.DefaultMaxConns)
	}
	if _, err := store.Connect(ctx, dsn+" pool_max_conns=1"); err == nil || !strings.Contains(err.Error(), "at least 2") {
		t.Fatalf("a pool of one: %v, want a refusal naming the smallest pool", err)
	}
}

// TestTheSmallestPoolServesRequestsAndJobs serves the events project on a
// pool of two connections with the workers running (River's listener holds
// one of them): concurrent writes succeed and their events are delivered.
func TestTheSmallestPoolServesRequestsAndJobs(t *testing.T) {
	rcv := newReceiver(t)
	cfg := eventsDeployment(t, storetest.NewDatabase(t)+" pool_max_conns=2", rcv.srv.URL+"/hooks/registry")
	h, srv := serve(t, cfg)
	runWorkers(t, h)
	const clients = 8
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			resp, b := hosttest.Caller{URL: srv.URL}.Do(t, "POST", "/v1/records/parcels", "application/json", fmt.Sprintf(`{"data":{"parcelCode":"P-%d","area":%d}}`, i, i))
			if resp.StatusCode != 201 {
				t.Errorf("create %d: %d %s", i, resp.StatusCode, b)
			}
		})
	}
	wg.Wait()
	rcv.wait(t, clients, 60*time.Second)
}
