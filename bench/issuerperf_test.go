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
// audit against the crypto-only ceiling of one request and, at 64 clients,
// against the thinnest HTTP issuer (issuerthin_test.go), in one run. It runs
// only with REGISTRUM_ISSUER_BENCH=1; REGISTRUM_ISSUER_BENCH_REQUESTS sets
// the requests of a round at 16 and 64 clients (default 2,000),
// REGISTRUM_ISSUER_BENCH_PROFILE=DIR writes the process's CPU profile of
// each phase there. Figures go to docs/performance/issuer.md and
// docs/performance/floors.md.
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
	// The thinnest HTTP issuer (issuerthin_test.go), at the top level only:
	// the same signer, the same audit chain settings in the same folder.
	thin := newThinIssuer(t, is, issuertest.StandardClientID, &pubKey, local, strings.Join(token, "."), filepath.Dir(is.Config.Audit.Path))
	profiles := os.Getenv("REGISTRUM_ISSUER_BENCH_PROFILE")
	// requests is the number of token requests of a round at 16 and 64
	// clients (a profile wants more samples than the default gives).
	requests := 2000
	if v := os.Getenv("REGISTRUM_ISSUER_BENCH_REQUESTS"); v != "" {
		if _, err := fmt.Sscan(v, &requests); err != nil || requests < 1 {
			t.Fatalf("REGISTRUM_ISSUER_BENCH_REQUESTS=%q: a positive integer is expected", v)
		}
	}
	auditBefore := len(auditLines(t, is.Config.Audit.Path))
	total, thinTotal := 0, 0
	var rows []string
	// runLevel sends n pre-signed requests from conc clients to the token
	// endpoint at base and returns the rate, each request's latency and
	// this process's CPU time per request (the clients' and the server's);
	// with a profile name and REGISTRUM_ISSUER_BENCH_PROFILE set, the
	// process's CPU profile of the sending is written to that folder.
	runLevel := func(base string, conc, n int, profile string) (float64, []time.Duration, time.Duration) {
		// Assertions are signed before the clock starts: the client's own
		// signing would otherwise compete for the same cores.
		bodies := make([]string, n)
		for i := range bodies {
			bodies[i] = tokenRequest(assertion())
		}
		if profiles != "" && profile != "" {
			stop := startCPUProfile(t, filepath.Join(profiles, profile+".pprof"))
			defer stop()
		}
		lat := make([]time.Duration, n)
		var next, failures atomic.Int64
		cpuBefore := processCPU()
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
					resp, err := httpClient.Post(base+"/token", "application/x-www-form-urlencoded", strings.NewReader(bodies[i]))
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
			t.Fatalf("%d failed requests at concurrency %d (%s)", failures.Load(), conc, base)
		}
		rate := float64(n) / time.Since(begin).Seconds()
		return rate, lat, (processCPU() - cpuBefore) / time.Duration(n)
	}
	const rounds = 3
	const thinLevel = 64
	var thinRow string
	var issuerCPU, thinCPU []time.Duration
	for _, conc := range []int{1, 16, thinLevel} {
		n := requests
		if conc == 1 {
			n = 500
		}
		// Each round measures the baseline right before the issuer, in the
		// same run, so load from elsewhere on the machine affects both alike;
		// the median round is reported.
		var ratios, rates, ceilings, thinRates, thinRatios, thinCeil []float64
		var lat, thinLat []time.Duration
		for r := range rounds {
			ceiling := measureCeiling(time.Second)
			issuerRound := func() float64 {
				rate, l, cpu := runLevel(is.BaseURL, conc, n, fmt.Sprintf("issuer-%d-r%d", conc, r+1))
				total += n
				if conc == thinLevel {
					issuerCPU = append(issuerCPU, cpu)
				}
				ceilings, rates, ratios = append(ceilings, ceiling), append(rates, rate), append(ratios, rate/ceiling)
				lat = append(lat, l...)
				return rate
			}
			if conc != thinLevel {
				issuerRound()
				continue
			}
			// The issuer and the thinnest issuer take turns at going first,
			// so neither always follows the ceiling's burst of crypto.
			var rate float64
			if r%2 == 1 {
				rate = issuerRound()
			}
			thinRate, l, cpu := runLevel(thin.srv.URL, conc, n, fmt.Sprintf("thinnest-%d-r%d", conc, r+1))
			thinTotal += n
			thinCPU = append(thinCPU, cpu)
			thinRates, thinLat, thinCeil = append(thinRates, thinRate), append(thinLat, l...), append(thinCeil, thinRate/ceiling)
			if r%2 == 0 {
				rate = issuerRound()
			}
			thinRatios = append(thinRatios, rate/thinRate)
		}
		slices.Sort(lat)
		slices.Sort(ratios)
		slices.Sort(rates)
		slices.Sort(ceilings)
		rows = append(rows, fmt.Sprintf("| %d | %d × %d | %.0f | %.2f ms | %.2f ms | %.0f | %.0f%% (%.0f–%.0f%%) |", conc, rounds, n, rates[rounds/2],
			float64(lat[len(lat)/2].Microseconds())/1000, float64(lat[len(lat)*99/100].Microseconds())/1000, ceilings[rounds/2],
			100*ratios[rounds/2], 100*ratios[0], 100*ratios[rounds-1]))
		if conc == thinLevel {
			slices.Sort(thinLat)
			slices.Sort(thinRates)
			slices.Sort(thinRatios)
			slices.Sort(thinCeil)
			thinRow = fmt.Sprintf("| %d | %d × %d | %.0f | %.2f ms | %.2f ms | %.0f%% (%.0f–%.0f%%) | %.2f (%.2f–%.2f) | %.2f (%.2f–%.2f) |", conc, rounds, n, thinRates[rounds/2],
				float64(thinLat[len(thinLat)/2].Microseconds())/1000, float64(thinLat[len(thinLat)*99/100].Microseconds())/1000,
				100*thinCeil[rounds/2], 100*thinCeil[0], 100*thinCeil[rounds-1],
				thinRatios[rounds/2], thinRatios[0], thinRatios[rounds-1], ratios[rounds/2], ratios[0], ratios[rounds-1])
		}
	}
	fmt.Fprintf(os.Stderr, "\n%d cores (GOMAXPROCS), durable audit (fsync per group commit), loopback HTTP/1.1 keep-alive, load average %s\n\n", workers, loadAverage())
	fmt.Fprintf(os.Stderr, "| concurrent clients | requests | tokens/s (median round) | p50 | p99 | crypto-only ceiling (req/s, median) | ratio: median (min–max) |\n| --- | --- | --- | --- | --- | --- | --- |\n%s\n", strings.Join(rows, "\n"))
	fmt.Fprintf(os.Stderr, "\nthe thinnest HTTP issuer (bare net/http, form parse, assertion verify, sign, the same group-committed audit append), in the same rounds, taking turns with the issuer at going first:\n\n"+
		"| concurrent clients | requests | thinnest tokens/s (median round) | p50 | p99 | thinnest / crypto-only | issuer/thinnest (goal ≥ 0.75) | issuer/crypto-only (goal ≥ 0.40) |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n%s\n", thinRow)
	slices.Sort(issuerCPU)
	slices.Sort(thinCPU)
	commits, grouped, took := thin.commitStats()
	fmt.Fprintf(os.Stderr, "\nat %d clients, CPU of this process (clients and server) per token, median round: issuer %.0f µs, thinnest %.0f µs; thinnest / issuer by CPU %.2f\n"+
		"the thinnest issuer's audit chain: %d group commits, %.1f tokens per fsync, %.2f ms per commit (write and fsync)\n",
		thinLevel, float64(issuerCPU[rounds/2].Microseconds()), float64(thinCPU[rounds/2].Microseconds()), float64(thinCPU[rounds/2])/float64(issuerCPU[rounds/2]),
		commits, float64(grouped)/float64(max(commits, 1)), float64(took.Microseconds())/1000/float64(max(commits, 1)))
	if got := len(auditLines(t, thin.chainPath)); got != thinTotal {
		t.Fatalf("%d audit records of the thinnest issuer for %d tokens", got, thinTotal)
	}
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
