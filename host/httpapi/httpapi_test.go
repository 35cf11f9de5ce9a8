package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/actions"
	"github.com/registrum/registrum/host/gis"
	"github.com/registrum/registrum/host/history"
	"github.com/registrum/registrum/host/httpapi"
	"github.com/registrum/registrum/host/ingest"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/host/requests"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Run(m)) }

func intp(v int) *int { return &v }

func testPackage(t *testing.T) *model.Package {
	p := &model.Package{
		Format: model.Format,
		Registry: model.Registry{ID: "demo", URLs: model.URLs{
			Profile:         "https://registry.example/profiles/record/v1",
			Context:         "https://registry.example/contexts/record/v1.jsonld",
			ProblemTypeBase: "https://registry.example/problems",
		}},
		Entities: []*model.Entity{{
			ID: "child", Route: "children", Dataset: "children-2026", MutationMode: model.Mutable, MaximumBodyBytes: 256, Tombstone: true,
			Batch: &model.Batch{MaximumItems: 3, MaximumBytes: 4096},
			Fields: []*model.Field{
				{ID: "national-id", APIName: "nationalId", Type: model.TypeString, Required: true, MaxLength: intp(20)},
				{ID: "age", APIName: "age", Type: model.TypeInteger},
				{ID: "active", APIName: "active", Type: model.TypeBoolean},
			},
			Constraints: []*model.Constraint{{ID: "nid-unique", Kind: model.ConstraintUnique, Fields: []string{"national-id"}}},
		}, {
			ID: "birth", Route: "births", Dataset: "births", MutationMode: model.CreateOnly,
			Fields: []*model.Field{{ID: "place", APIName: "place", Type: model.TypeString}},
		}},
	}
	return storetest.Complete(t, p)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type env struct {
	srv  *httptest.Server
	pool *pgxpool.Pool
	logs *syncBuffer
}

func newEnv(t *testing.T) *env { return newEnvFor(t, testPackage(t)) }

// withRooms returns o with the capability rooms the host builds over the
// record kernel o.Records (the spatial adapter, the history reads, the
// immediate actions, the ingestion runs and the change-request workflow).
func withRooms(t *testing.T, o httpapi.Options) httpapi.Options {
	t.Helper()
	var err error
	if o.GIS, err = gis.New(gis.Options{Records: o.Records}); err != nil {
		t.Fatal(err)
	}
	if o.History, err = history.New(history.Options{Records: o.Records}); err != nil {
		t.Fatal(err)
	}
	if o.Actions, err = actions.New(actions.Options{Records: o.Records, Access: o.Access}); err != nil {
		t.Fatal(err)
	}
	if o.Ingest, err = ingest.New(ingest.Options{Records: o.Records}); err != nil {
		t.Fatal(err)
	}
	if o.Requests, err = requests.New(requests.Options{Records: o.Records}); err != nil {
		t.Fatal(err)
	}
	return o
}

// newEnvFor serves the completed package p from a fresh database.
func newEnvFor(t *testing.T, p *model.Package) *env {
	pool := storetest.NewPool(t)
	st := storetest.Open(t, pool, p)
	keys, err := records.DeriveKeys(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := records.New(records.Options{Store: st, Keys: keys, Access: access.Unrestricted{}, Plans: requests.FrozenPlans{}})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	api := httpapi.New(withRooms(t, httpapi.Options{
		Records: svc,
		Logger:  slog.New(slog.NewJSONHandler(logs, nil)),
		Metrics: httpapi.NewMetrics(prometheus.NewRegistry()),
		Ready:   st.Ping,
	}))
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &env{srv: srv, pool: pool, logs: logs}
}

func (e *env) do(t *testing.T, method, path, ctype, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func (e *env) rows(t *testing.T) (records, revisions, audit int) {
	t.Helper()
	ctx := context.Background()
	e.pool.QueryRow(ctx, "select count(*) from registrum_data.e_child").Scan(&records)
	var births int
	e.pool.QueryRow(ctx, "select count(*) from registrum_data.e_birth").Scan(&births)
	records += births
	e.pool.QueryRow(ctx, "select count(*) from registrum.revisions").Scan(&revisions)
	e.pool.QueryRow(ctx, "select count(*) from registrum.audit").Scan(&audit)
	return
}

var (
	etagRE  = regexp.MustCompile(`^"engine-hmac-sha256:[0-9a-f]{64}"$`)
	uuidRE  = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	traceRE = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

func TestCreateThenReadReturnsTheEnvelopeAndHeaders(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do(t, "POST", "/v1/records/children", "application/json", `{"data":{"nationalId":"N-1","age":7}}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	etag := resp.Header.Get("ETag")
	if !etagRE.MatchString(etag) {
		t.Errorf("ETag = %q", etag)
	}
	wantLink := `<https://registry.example/profiles/record/v1>; rel="profile", </v1/schemas/child>; rel="describedby"`
	if got := resp.Header.Get("Link"); got != wantLink {
		t.Errorf("Link = %q, want %q", got, wantLink)
	}
	var created map[string]any
	if err := json.Unmarshal(body, &created); err != nil {
		t.Fatal(err)
	}
	data := created["data"].(map[string]any)
	id, _ := data["recordIdentifier"].(string)
	if !uuidRE.MatchString(id) {
		t.Fatalf("recordIdentifier %q is not a UUID", id)
	}
	if loc := resp.Header.Get("Location"); loc != "/v1/records/children/"+id {
		t.Errorf("Location = %q", loc)
	}
	if data["revisionIdentifier"] != "1" {
		t.Errorf("revisionIdentifier = %v, want \"1\"", data["revisionIdentifier"])
	}
	if snap, _ := data["snapshot"].(string); snap == "" || len(snap) > 4096 {
		t.Errorf("snapshot = %q", snap)
	}
	wantDomain := map[string]any{"nationalId": "N-1", "age": float64(7), "active": nil}
	if fmt.Sprint(data["domainData"]) != fmt.Sprint(wantDomain) {
		t.Errorf("domainData = %v, want %v", data["domainData"], wantDomain)
	}
	wantMeta := map[string]any{"registryIdentifier": "demo", "datasetIdentifier": "children-2026", "entityTypeIdentifier": "child"}
	if fmt.Sprint(created["meta"]) != fmt.Sprint(wantMeta) {
		t.Errorf("meta = %v", created["meta"])
	}
	if len(created) != 2 || len(data) != 4 {
		t.Errorf("envelope has extra members: %s", body)
	}

	resp, body = e.do(t, "GET", "/v1/records/children/"+id, "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("read: %d %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("ETag"); got != etag {
		t.Errorf("read ETag %q differs from create ETag %q", got, etag)
	}
	if got := resp.Header.Get("Link"); got != wantLink {
		t.Errorf("read Link = %q", got)
	}
	var read map[string]any
	json.Unmarshal(body, &read)
	rd := read["data"].(map[string]any)
	if _, has := rd["snapshot"]; has {
		t.Error("a plain read carries a snapshot token")
	}
	delete(data, "snapshot")
	if fmt.Sprint(rd) != fmt.Sprint(data) || fmt.Sprint(read["meta"]) != fmt.Sprint(created["meta"]) {
		t.Errorf("read %s differs from created %v", body, created)
	}

	// JSON-LD: another representation, another validator.
	resp, body = e.do(t, "GET", "/v1/records/children/"+id, "", "", "Accept", "application/ld+json")
	if resp.Header.Get("Content-Type") != "application/ld+json" {
		t.Errorf("JSON-LD Content-Type = %q", resp.Header.Get("Content-Type"))
	}
	var ld map[string]any
	json.Unmarshal(body, &ld)
	if ld["@context"] != "https://registry.example/contexts/record/v1.jsonld" {
		t.Errorf("@context = %v", ld["@context"])
	}
	if resp.Header.Get("ETag") == etag {
		t.Error("JSON and JSON-LD share an ETag")
	}
	recs, revs, aud := e.rows(t)
	if recs != 1 || revs != 1 || aud != 1 {
		t.Errorf("rows = %d records, %d revisions, %d audit; want 1 each", recs, revs, aud)
	}
}

func problemOf(t *testing.T, resp *http.Response, body []byte, status int, code string) map[string]any {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q", ct)
	}
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"type", "title", "status", "detail", "code", "traceId", "fieldPath"} {
		if _, ok := p[m]; !ok {
			t.Errorf("problem lacks %s: %s", m, body)
		}
	}
	if p["code"] != code || p["status"] != float64(status) {
		t.Fatalf("problem %s, want %s", body, code)
	}
	if want := "https://registry.example/problems/" + strings.ReplaceAll(code, ".", "/"); p["type"] != want {
		t.Errorf("type = %v, want %s", p["type"], want)
	}
	if !traceRE.MatchString(fmt.Sprint(p["traceId"])) {
		t.Errorf("traceId = %v", p["traceId"])
	}
	return p
}

func TestRefusedWritesNameTheMemberAndWriteNothing(t *testing.T) {
	e := newEnv(t)
	if resp, body := e.do(t, "POST", "/v1/records/children", "application/json", `{"data":{"nationalId":"TAKEN"}}`); resp.StatusCode != 201 {
		t.Fatalf("seed: %d %s", resp.StatusCode, body)
	}
	exact := `{"data":{"nationalId":"` + strings.Repeat("x", 20) + `"}}`
	padded := exact[:len(exact)-1] + strings.Repeat(" ", 256-len(exact)) + "}"
	cases := []struct {
		name, ctype, body, fieldPath string
	}{
		{"unknown top-level member", "application/json", `{"data":{"nationalId":"A"},"extra":1}`, "/extra"},
		{"unknown field", "application/json", `{"data":{"nationalId":"A","colour":"red"}}`, "/data/colour"},
		{"envelope member as field", "application/json", `{"data":{"nationalId":"A","recordIdentifier":"x"}}`, "/data/recordIdentifier"},
		{"wrong type", "application/json", `{"data":{"nationalId":"A","age":"seven"}}`, "/data/age"},
		{"too long", "application/json", `{"data":{"nationalId":"` + strings.Repeat("x", 21) + `"}}`, "/data/nationalId"},
		{"missing required", "application/json", `{"data":{"age":3}}`, "/data/nationalId"},
		{"null required", "application/json", `{"data":{"nationalId":null}}`, "/data/nationalId"},
		{"missing data", "application/json", `{}`, "/data"},
		{"duplicate member", "application/json", `{"data":{"nationalId":"A","nationalId":"B"}}`, "/data/nationalId"},
		{"unique violated", "application/json", `{"data":{"nationalId":"TAKEN"}}`, "/data/nationalId"},
		{"over the bound", "application/json", padded + " ", ""},
		{"not JSON", "application/json", `{"data":`, "/data"},
		{"wrong content type", "text/plain", `{"data":{"nationalId":"A"}}`, ""},
	}
	before1, before2, before3 := e.rows(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := e.do(t, "POST", "/v1/records/children", c.ctype, c.body)
			p := problemOf(t, resp, body, 400, "request.invalid")
			if p["fieldPath"] != c.fieldPath {
				t.Errorf("fieldPath = %v, want %q", p["fieldPath"], c.fieldPath)
			}
		})
	}
	if a, b, c := e.rows(t); a != before1 || b != before2 || c != before3 {
		t.Fatalf("refused writes changed the tables: %d/%d/%d -> %d/%d/%d", before1, before2, before3, a, b, c)
	}
	// Exactly at the bound is accepted.
	if len(padded) != 256 {
		t.Fatalf("padded body is %d bytes", len(padded))
	}
	if resp, body := e.do(t, "POST", "/v1/records/children", "application/json", padded); resp.StatusCode != 201 {
		t.Fatalf("a body of exactly the bound was refused: %d %s", resp.StatusCode, body)
	}
}

func TestUnknownRoutesRecordsAndMethodsAreTheSameConcealedNotFound(t *testing.T) {
	e := newEnv(t)
	strip := func(b []byte) string {
		var p map[string]any
		json.Unmarshal(b, &p)
		delete(p, "traceId")
		out, _ := json.Marshal(p)
		return string(out)
	}
	var first string
	var firstHeader http.Header
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/records/nope/0b8f7c2e-5d1a-4c3b-9a7e-2f1d3c4b5a69"},
		{"GET", "/v1/records/children/0b8f7c2e-5d1a-4c3b-9a7e-2f1d3c4b5a69"},
		{"GET", "/v1/records/children/not-a-uuid"},
		{"POST", "/v1/records/nope"},
		{"DELETE", "/v1/records/children"},
		{"GET", "/elsewhere"},
	} {
		resp, body := e.do(t, c.method, c.path, "application/json", `{"data":{}}`)
		p := problemOf(t, resp, body, 404, "resource.not_found")
		if p["fieldPath"] != nil {
			t.Errorf("%s %s: fieldPath = %v", c.method, c.path, p["fieldPath"])
		}
		if first == "" {
			first, firstHeader = strip(body), resp.Header.Clone()
			continue
		}
		if got := strip(body); got != first {
			t.Errorf("%s %s answers %s, first answer was %s", c.method, c.path, got, first)
		}
		for _, h := range []string{"Content-Type", "Cache-Control", "X-Content-Type-Options"} {
			if resp.Header.Get(h) != firstHeader.Get(h) {
				t.Errorf("%s %s: header %s = %q, first %q", c.method, c.path, h, resp.Header.Get(h), firstHeader.Get(h))
			}
		}
	}
}

func TestRequestLogCarriesTraceAndRoutePatternButNoBody(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do(t, "POST", "/v1/records/children", "application/json", `{"data":{"nationalId":"SECRET-VALUE","x":1}}`, "Authorization", "Bearer token-must-not-be-logged")
	p := problemOf(t, resp, body, 400, "request.invalid")
	logs := e.logs.String()
	if !strings.Contains(logs, `"trace_id":"`+p["traceId"].(string)+`"`) {
		t.Errorf("log lacks the problem's trace id: %s", logs)
	}
	if !strings.Contains(logs, `"route":"/v1/records/{route}"`) || !strings.Contains(logs, `"status":400`) || !strings.Contains(logs, `"method":"POST"`) {
		t.Errorf("log lacks route pattern, method or status: %s", logs)
	}
	for _, secret := range []string{"SECRET-VALUE", "token-must-not-be-logged", "children"} {
		if strings.Contains(logs, secret) {
			t.Errorf("log contains %q: %s", secret, logs)
		}
	}
}

func TestTraceparentIsAdopted(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do(t, "GET", "/nowhere", "", "", "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	p := problemOf(t, resp, body, 404, "resource.not_found")
	if p["traceId"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("traceId = %v", p["traceId"])
	}
}

func TestHealthAndReadiness(t *testing.T) {
	e := newEnv(t)
	if resp, _ := e.do(t, "GET", "/health", "", ""); resp.StatusCode != 200 {
		t.Errorf("health = %d", resp.StatusCode)
	}
	if resp, _ := e.do(t, "GET", "/ready", "", ""); resp.StatusCode != 200 {
		t.Errorf("ready = %d", resp.StatusCode)
	}
	e.pool.Close()
	if resp, _ := e.do(t, "GET", "/ready", "", ""); resp.StatusCode != 503 {
		t.Errorf("ready with the database gone = %d, want 503", resp.StatusCode)
	}
}
