package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/registrum/registrum/host/auth/authtest"
	"github.com/registrum/registrum/host/hosttest"
	"github.com/registrum/registrum/issuer/issuertest"
	"github.com/registrum/registrum/store/storetest"
)

// patternReader yields n bytes of content that differs by seed, without
// holding it: the client side of the report allocates nothing per byte.
type patternReader struct {
	n, off int64
	seed   byte
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.off >= r.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n-r.off)]
	for i := range p {
		p[i] = byte(r.off+int64(i)) ^ r.seed ^ byte((r.off+int64(i))>>11)
	}
	r.off += int64(len(p))
	return len(p), nil
}

// TestAttachmentReport measures uploads and downloads of a 5 MiB
// attachment through the record host against writing and reading the same
// bytes with pgx alone, in the same run, and the host's peak heap growth
// during one upload and download at the 5 MiB and at the 16 MiB slot
// limit. Opt in with REGISTRUM_ATTACH_BENCH=1 (docs/performance.md).
func TestAttachmentReport(t *testing.T) {
	if os.Getenv("REGISTRUM_ATTACH_BENCH") != "1" {
		t.Skip("set REGISTRUM_ATTACH_BENCH=1 to run the attachment report")
	}
	const size = 5 << 20
	rounds := 12
	if s := os.Getenv("REGISTRUM_ATTACH_BENCH_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	is := authtest.StartIssuer(t, issuertest.DevOptions{Scopes: []string{"perf:write"}}, nil)
	dsn := storetest.NewDatabase(t)
	cfg := hosttest.Deployment(t, "testdata/attachperf", dsn, is.HostAuthentication())
	_, srv := hosttest.Serve(t, cfg)
	c := hosttest.Caller{URL: srv.URL, Token: is.Token(t, issuertest.StandardClientID)}

	upload := func(slot string, n int64, seed byte) (string, time.Duration) {
		loc, etag := c.Create(t, "filings", `{"text":"report"}`)
		req, _ := http.NewRequest("PATCH", srv.URL+loc+"/attachments/"+slot, &patternReader{n: n, seed: seed})
		req.ContentLength = n
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Authorization", "Bearer "+c.Token)
		req.Header.Set("If-Match", etag)
		req.Header.Set("Idempotency-Key", fmt.Sprintf("up-%s-%d", slot, seed))
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		if resp.StatusCode != 200 {
			t.Fatalf("upload: %d %s", resp.StatusCode, b)
		}
		return loc, d
	}
	download := func(loc, slot string, n int64) time.Duration {
		req, _ := http.NewRequest("GET", srv.URL+loc+"/attachments/"+slot+"?proposalVersion=1", nil)
		req.Header.Set("Authorization", "Bearer "+c.Token)
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || got != n {
			t.Fatalf("download: %d, %d bytes", resp.StatusCode, got)
		}
		return time.Since(t0)
	}

	// Baseline: the same bytes as one bytea value, written and read with pgx.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE baseline_blobs (id int PRIMARY KEY, bytes bytea NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	content := make([]byte, size)
	var pgxWrite, pgxRead, hostUp, hostDown time.Duration
	upload("five", size, 255) // warm-up
	for i := 0; i < rounds; i++ {
		(&patternReader{n: size, seed: byte(i)}).Read(content)
		t0 := time.Now()
		if _, err := conn.Exec(ctx, `INSERT INTO baseline_blobs (id, bytes) VALUES ($1, $2)`, i, content); err != nil {
			t.Fatal(err)
		}
		pgxWrite += time.Since(t0)
		t0 = time.Now()
		var back []byte
		if err := conn.QueryRow(ctx, `SELECT bytes FROM baseline_blobs WHERE id = $1`, i).Scan(&back); err != nil || len(back) != size {
			t.Fatal(err)
		}
		pgxRead += time.Since(t0)
		loc, d := upload("five", size, byte(i))
		hostUp += d
		hostDown += download(loc, "five", size)
	}
	mib := float64(size*rounds) / (1 << 20)
	rate := func(d time.Duration) float64 { return mib / d.Seconds() }
	t.Logf("5 MiB x %d: upload host %.1f MiB/s, pgx write %.1f MiB/s: %.2f of pgx", rounds, rate(hostUp), rate(pgxWrite), pgxWrite.Seconds()/hostUp.Seconds())
	t.Logf("5 MiB x %d: download host %.1f MiB/s, pgx read %.1f MiB/s: %.2f of pgx", rounds, rate(hostDown), rate(pgxRead), pgxRead.Seconds()/hostDown.Seconds())
	content = nil

	// Peak heap growth during one upload and one download, per slot limit.
	// The collector runs at GOGC=5 meanwhile, so the peak is what is live
	// (content held) rather than garbage waiting for the next cycle.
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	peak := func(fn func()) uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapInuse
		var top atomic.Uint64
		done := make(chan struct{})
		go func() {
			var m runtime.MemStats
			for {
				select {
				case <-done:
					return
				case <-time.After(2 * time.Millisecond):
				}
				runtime.ReadMemStats(&m)
				if m.HeapInuse > base && m.HeapInuse-base > top.Load() {
					top.Store(m.HeapInuse - base)
				}
			}
		}()
		fn()
		close(done)
		return top.Load()
	}
	for _, c := range []struct {
		slot string
		n    int64
	}{{"five", 5 << 20}, {"sixteen", 16 << 20}} {
		var loc string
		up := peak(func() { loc, _ = upload(c.slot, c.n, 77) })
		down := peak(func() { download(loc, c.slot, c.n) })
		t.Logf("slot limit %d MiB, content %d MiB: peak heap growth upload %.1f MiB, download %.1f MiB", c.n>>20, c.n>>20, float64(up)/(1<<20), float64(down)/(1<<20))
	}
}
