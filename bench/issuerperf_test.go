package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/issuer/signer"
	"github.com/registrum/registrum/sdk/tokensource"
)

// TestThroughputReport measures the issuer over loopback HTTP with durable
// audit against the crypto-only ceiling of one request, in one run. It runs
// only with REGISTRUM_ISSUER_BENCH=1; figures go to docs/performance/issuer.md.
func TestThroughputReport(t *testing.T) {
	if os.Getenv("REGISTRUM_ISSUER_BENCH") != "1" {
		t.Skip("set REGISTRUM_ISSUER_BENCH=1 to run the throughput report")
	}
	is := issuertest.Start(t, issuertest.Options{Edit: func(dir string) {
		p := filepath.Join(dir, "issuer.yaml")
		raw, _ := os.ReadFile(p)
		os.WriteFile(p, []byte(strings.Replace(string(raw), "clientAssertion:\n", "clientAssertion:\n  replayCacheEntries: 1000000\n", 1)), 0o644)
	}})
	// The standard demo client's assertions, signed as the SDK's token
	// source signs them; the requests' are valid for 4 minutes, since they
	// are all signed before their level starts.
	client := is.Source(t, issuertest.StandardClientID, func(c *tokensource.Config) { c.AssertionLifetime = 4 * time.Minute })
	assertion := func() string {
		a, err := client.Assertion()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	var key *jose.JSONWebKey
	for _, c := range is.Setup.Clients {
		if c.ID == issuertest.StandardClientID {
			k, err := tokensource.LoadKeyFile(c.KeyFile)
			if err != nil {
				t.Fatal(err)
			}
			key = k
		}
	}
	if key == nil {
		t.Fatalf("the dev issuer has no client %s", issuertest.StandardClientID)
	}

	// Baseline: the cryptography of one request (verify an ES256 assertion,
	// sign an ES256 token) in a loop on every core.
	sample := assertion()
	pubKey := key.Public()
	priv, err := os.ReadFile(filepath.Join(filepath.Dir(is.Setup.ConfigPath), "secrets", "signing-key.jwk"))
	if err != nil {
		t.Fatal(err)
	}
	local, err := signer.NewLocalJWK(priv, is.Config.Signing.Active)
	if err != nil {
		t.Fatal(err)
	}
	// The signing input of a token the issuer issued to the client: its
	// header and claims, base64url, as the issuer signs them.
	token := strings.Split(is.Token(t, issuertest.StandardClientID), ".")
	input := []byte(token[0] + "." + token[1])
	cryptoOnce := func() {
		jws, err := jose.ParseSigned(sample, []jose.SignatureAlgorithm{jose.ES256})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := jws.Verify(pubKey.Key); err != nil {
			t.Fatal(err)
		}
		if _, err := local.Sign(context.Background(), input); err != nil {
			t.Fatal(err)
		}
	}
	workers := runtime.GOMAXPROCS(0)
	// measureCeiling runs the crypto of one request on every core for d.
	measureCeiling := func(d time.Duration) float64 {
		var ops atomic.Int64
		stop := time.Now().Add(d)
		start := time.Now()
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for time.Now().Before(stop) {
					cryptoOnce()
					ops.Add(1)
				}
			})
		}
		wg.Wait()
		return float64(ops.Load()) / time.Since(start).Seconds()
	}

	transport := &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 128}
	httpClient := &http.Client{Transport: transport}
	defer transport.CloseIdleConnections()
	auditBefore := len(auditLines(t, is.Config.Audit.Path))
	total := 0
	var rows []string
	// runLevel sends n pre-signed requests from conc clients and returns the
	// rate and each request's latency.
	runLevel := func(conc, n int) (float64, []time.Duration) {
		// Assertions are signed before the clock starts: the client's own
		// signing would otherwise compete for the same cores.
		bodies := make([]string, n)
		for i := range bodies {
			bodies[i] = tokenRequest(assertion())
		}
		lat := make([]time.Duration, n)
		var next, failures atomic.Int64
		begin := time.Now()
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= n {
						return
					}
					t0 := time.Now()
					resp, err := httpClient.Post(is.BaseURL+"/token", "application/x-www-form-urlencoded", strings.NewReader(bodies[i]))
					if err != nil {
						failures.Add(1)
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						failures.Add(1)
					}
					lat[i] = time.Since(t0)
				}
			})
		}
		wg.Wait()
		if failures.Load() > 0 {
			t.Fatalf("%d failed requests at concurrency %d", failures.Load(), conc)
		}
		total += n
		return float64(n) / time.Since(begin).Seconds(), lat
	}
	const rounds = 3
	for _, conc := range []int{1, 16, 64} {
		n := 2000
		if conc == 1 {
			n = 500
		}
		// Each round measures the baseline right before the issuer, in the
		// same run, so load from elsewhere on the machine affects both alike;
		// the median round is reported.
		var ratios, rates, ceilings []float64
		var lat []time.Duration
		for range rounds {
			ceiling := measureCeiling(time.Second)
			rate, l := runLevel(conc, n)
			ceilings, rates, ratios = append(ceilings, ceiling), append(rates, rate), append(ratios, rate/ceiling)
			lat = append(lat, l...)
		}
		slices.Sort(lat)
		slices.Sort(ratios)
		slices.Sort(rates)
		slices.Sort(ceilings)
		rows = append(rows, fmt.Sprintf("| %d | %d × %d | %.0f | %.2f ms | %.2f ms | %.0f | %.0f%% (%.0f–%.0f%%) |", conc, rounds, n, rates[rounds/2],
			float64(lat[len(lat)/2].Microseconds())/1000, float64(lat[len(lat)*99/100].Microseconds())/1000, ceilings[rounds/2],
			100*ratios[rounds/2], 100*ratios[0], 100*ratios[rounds-1]))
	}
	fmt.Fprintf(os.Stderr, "\n%d cores (GOMAXPROCS), durable audit (fsync per group commit), loopback HTTP/1.1 keep-alive\n\n", workers)
	fmt.Fprintf(os.Stderr, "| concurrent clients | requests | tokens/s (median round) | p50 | p99 | crypto-only ceiling (req/s, median) | ratio: median (min–max) |\n| --- | --- | --- | --- | --- | --- | --- |\n%s\n", strings.Join(rows, "\n"))
	// Every token has its durable audit record.
	if got := len(auditLines(t, is.Config.Audit.Path)) - auditBefore; got != total {
		t.Fatalf("%d audit records for %d tokens", got, total)
	}
}

// tokenRequest is the form body of a client_credentials token request
// authenticated by the client assertion.
func tokenRequest(assertion string) string {
	return url.Values{
		"grant_type":            {"client_credentials"},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion":      {assertion},
	}.Encode()
}

// auditLines returns the lines of the issuer's active audit segment at path.
func auditLines(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
}
