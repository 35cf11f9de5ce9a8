package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/httpapi"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/host/requests"
	"github.com/registrum/registrum/store/storetest"
)

// refusing refuses every presented token, as a profile decider does with a
// token that fails verification, and grants everything to callers without
// one.
type refusing struct{ access.Unrestricted }

func (r refusing) Decide(ctx context.Context, req access.Request) (*access.Grant, error) {
	if req.Bearer != "" || req.UnusableCredential {
		return nil, problem.New(problem.AuthenticationRefused, "The access token was refused.")
	}
	return r.Unrestricted.Decide(ctx, req)
}

// newEnvOn serves the test package from the database at dsn, with decider.
func newEnvOn(t *testing.T, dsn string, decider access.Decider) *env {
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := storetest.Open(t, pool, testPackage(t))
	keys, err := records.DeriveKeys(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := records.New(records.Options{Store: st, Keys: keys, Access: decider, Plans: requests.FrozenPlans{}})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	api := httpapi.New(withRooms(t, httpapi.Options{Records: svc, Access: decider, Logger: slog.New(slog.NewJSONHandler(logs, nil)), Ready: st.Ping}))
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &env{srv: srv, pool: pool, logs: logs}
}

func problemDoc(t *testing.T, b []byte) problem.Document {
	t.Helper()
	var d problem.Document
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("not a problem document: %s", b)
	}
	return d
}

// TestSingleRecordReadAppliesSelect checks the seed's "Query options on
// reads" on GET of one record: $select narrows domainData as on a
// collection, and an unknown option is query.invalid.
func TestSingleRecordReadAppliesSelect(t *testing.T) {
	e := newEnv(t)
	id, _ := e.create(t, `{"data":{"nationalId":"S-1","age":4,"active":true}}`)
	path := "/v1/records/children/" + id
	resp, b := e.do(t, "GET", path+"?"+url.Values{"$select": {"age,nationalId"}}.Encode(), "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("$select: %d %s", resp.StatusCode, b)
	}
	var got struct {
		Data struct {
			DomainData map[string]any `json:"domainData"`
		} `json:"data"`
	}
	json.Unmarshal(b, &got)
	dd := got.Data.DomainData
	if len(dd) != 2 || dd["age"] == nil || dd["nationalId"] == nil {
		t.Fatalf("$select=age,nationalId gave domainData %v", dd)
	}
	for name, q := range map[string]url.Values{
		"unknown $ option":      {"$expand": {"x"}},
		"collection-only":       {"$filter": {"age eq 4"}},
		"unknown field":         {"$select": {"shoeSize"}},
		"empty $select":         {"$select": {""}},
		"$select given twice":   {"$select": {"age", "age"}},
		"misspelled $select":    {"$selct": {"age"}},
		"an option of no kind":  {"page": {"2"}},
		"$top on a record read": {"$top": {"1"}},
	} {
		resp, b := e.do(t, "GET", path+"?"+q.Encode(), "", "")
		if resp.StatusCode != 400 || problemDoc(t, b).Code != problem.QueryInvalid {
			t.Errorf("%s: %d %s, want 400 query.invalid", name, resp.StatusCode, b)
		}
	}
	// An unknown record is still the concealed 404, options or not.
	resp, _ = e.do(t, "GET", "/v1/records/children/00000000-0000-4000-8000-000000000000?$select=age", "", "")
	if resp.StatusCode != 404 {
		t.Errorf("unknown record: %d", resp.StatusCode)
	}
}

// TestDatabaseDownAnswers503 stops the database under a running host: reads
// and writes answer 503 source.unavailable with Retry-After, not 500.
func TestDatabaseDownAnswers503(t *testing.T) {
	dsn := storetest.NewDatabase(t)
	e := newEnvOn(t, dsn, access.Unrestricted{})
	id, tag := e.create(t, `{"data":{"nationalId":"D-1"}}`)

	// Take the database away: refuse new connections and end every open one.
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := cfg.Database
	cfg.Database = "postgres"
	admin, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(context.Background(), "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" ALLOW_CONNECTIONS false"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(context.Background(), "select pg_terminate_backend(pid) from pg_stat_activity where datname = $1", name); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ method, path, ctype, body, ifMatch string }{
		{"GET", "/v1/records/children/" + id, "", "", ""},
		{"GET", "/v1/records/children", "", "", ""},
		{"POST", "/v1/records/children", "application/json", `{"data":{"nationalId":"D-2"}}`, ""},
		{"PATCH", "/v1/records/children/" + id, "application/json-patch+json", `[{"op":"replace","path":"/data/age","value":3}]`, tag},
	} {
		var hdr []string
		if c.ifMatch != "" {
			hdr = []string{"If-Match", c.ifMatch}
		}
		resp, b := e.do(t, c.method, c.path, c.ctype, c.body, hdr...)
		if resp.StatusCode != http.StatusServiceUnavailable || problemDoc(t, b).Code != problem.SourceUnavailable {
			t.Errorf("%s %s with the database down: %d %s, want 503 source.unavailable", c.method, c.path, resp.StatusCode, b)
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: 503 without Retry-After", c.method, c.path)
		}
	}
	if resp, _ := e.do(t, "GET", "/ready", "", ""); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/ready with the database down: %d", resp.StatusCode)
	}
}

// TestRefusedTokenCarriesBearerChallenge checks RFC 6750's challenge on a
// 401 of the record host, without any detail of the token.
func TestRefusedTokenCarriesBearerChallenge(t *testing.T) {
	e := newEnvOn(t, storetest.NewDatabase(t), refusing{})
	const token = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJzZWNyZXQtcGVyc29uIn0.c2ln"
	for _, path := range []string{"/v1/records/children", "/v1/records/children/00000000-0000-4000-8000-000000000000", "/v1/registry"} {
		resp, b := e.do(t, "GET", path, "", "", "Authorization", "Bearer "+token)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		ch := resp.Header.Get("WWW-Authenticate")
		if !strings.HasPrefix(ch, "Bearer ") || !strings.Contains(ch, `error="invalid_token"`) {
			t.Errorf("%s: WWW-Authenticate %q, want a Bearer challenge with error=\"invalid_token\"", path, ch)
		}
		if strings.Contains(ch, token) || strings.Contains(ch, "secret-person") {
			t.Errorf("%s: the challenge repeats the token: %q", path, ch)
		}
	}
	// Without a token nothing is refused: no challenge.
	if resp, _ := e.do(t, "GET", "/v1/records/children", "", ""); resp.Header.Get("WWW-Authenticate") != "" || resp.StatusCode != 200 {
		t.Errorf("no token: %d, challenge %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

// TestMalformedIfMatchIsNotCalledStale keeps the seed's 412 for If-Match: *
// and for an unquoted tag, with a detail that blames the header.
func TestMalformedIfMatchIsNotCalledStale(t *testing.T) {
	e := newEnv(t)
	id, tag := e.create(t, `{"data":{"nationalId":"M-1"}}`)
	patch := `[{"op":"replace","path":"/data/age","value":9}]`
	for _, h := range []string{"*", strings.Trim(tag, `"`), "W/" + tag, `"unterminated`} {
		for _, method := range []string{"PATCH", "DELETE"} {
			ctype, body := "application/json-patch+json", patch
			if method == "DELETE" {
				ctype, body = "", ""
			}
			resp, b := e.do(t, method, "/v1/records/children/"+id, ctype, body, "If-Match", h)
			d := problemDoc(t, b)
			if resp.StatusCode != 412 || d.Code != problem.PreconditionFailed {
				t.Fatalf("%s If-Match %s: %d %s, want 412", method, h, resp.StatusCode, b)
			}
			if !strings.Contains(d.Detail, "malformed") || strings.Contains(d.Detail, "changed") {
				t.Errorf("%s If-Match %s: detail %q, want it to say the header is malformed", method, h, d.Detail)
			}
		}
	}
	// A well-formed but old tag is still called stale.
	resp, b := e.do(t, "PATCH", "/v1/records/children/"+id, "application/json-patch+json", patch, "If-Match", tag)
	if resp.StatusCode != 200 {
		t.Fatalf("patch: %d %s", resp.StatusCode, b)
	}
	resp, b = e.do(t, "PATCH", "/v1/records/children/"+id, "application/json-patch+json", patch, "If-Match", tag)
	if d := problemDoc(t, b); resp.StatusCode != 412 || strings.Contains(d.Detail, "malformed") {
		t.Errorf("stale tag: %d %q", resp.StatusCode, d.Detail)
	}
}

// TestHeadWorksWhereGetDoes compares HEAD with GET on every kind of read.
func TestHeadWorksWhereGetDoes(t *testing.T) {
	e := newEnv(t)
	id, _ := e.create(t, `{"data":{"nationalId":"H-1"}}`)
	for _, path := range []string{"/v1/records/children", "/v1/records/children/" + id, "/health", "/v1/records/children/00000000-0000-4000-8000-000000000000"} {
		get, _ := e.do(t, "GET", path, "", "")
		head, body := e.do(t, "HEAD", path, "", "")
		if head.StatusCode != get.StatusCode || len(body) != 0 {
			t.Errorf("HEAD %s: %d with %d body bytes, GET %d", path, head.StatusCode, len(body), get.StatusCode)
		}
		for _, h := range []string{"Content-Type", "ETag", "Link", "Cache-Control"} {
			if head.Header.Get(h) != get.Header.Get(h) {
				t.Errorf("HEAD %s: %s %q, GET %q", path, h, head.Header.Get(h), get.Header.Get(h))
			}
		}
	}
	// HEAD is not a way around a route the package does not enable.
	if resp, _ := e.do(t, "HEAD", "/v1/records/nowhere", "", ""); resp.StatusCode != 404 {
		t.Errorf("HEAD of an unknown route: %d", resp.StatusCode)
	}
}

// TestIfNoneMatchAnswersNotModified checks 304 with the ETag on a record read.
func TestIfNoneMatchAnswersNotModified(t *testing.T) {
	e := newEnv(t)
	id, tag := e.create(t, `{"data":{"nationalId":"N-1"}}`)
	path := "/v1/records/children/" + id
	resp, b := e.do(t, "GET", path, "", "", "If-None-Match", tag)
	if resp.StatusCode != http.StatusNotModified || len(b) != 0 || resp.Header.Get("ETag") != tag {
		t.Fatalf("If-None-Match current: %d, ETag %q, body %q", resp.StatusCode, resp.Header.Get("ETag"), b)
	}
	for _, h := range []string{`"engine-hmac-sha256:0000000000000000000000000000000000000000000000000000000000000000"`, "W/" + tag + `, "other"`} {
		resp, _ := e.do(t, "GET", path, "", "", "If-None-Match", h)
		want := 200
		if strings.Contains(h, tag) {
			want = 304
		}
		if resp.StatusCode != want {
			t.Errorf("If-None-Match %s: %d, want %d", h, resp.StatusCode, want)
		}
	}
	// A new revision makes the held tag old.
	if resp, b := e.do(t, "PATCH", path, "application/json-patch+json", `[{"op":"replace","path":"/data/age","value":1}]`, "If-Match", tag); resp.StatusCode != 200 {
		t.Fatalf("patch: %d %s", resp.StatusCode, b)
	}
	if resp, _ := e.do(t, "GET", path, "", "", "If-None-Match", tag); resp.StatusCode != 200 {
		t.Errorf("If-None-Match with an old tag: %d, want 200", resp.StatusCode)
	}
}
