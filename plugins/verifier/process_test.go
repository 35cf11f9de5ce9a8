package verifier_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/testslack"
	"github.com/registrum/registrum/plugins/verifier"
)

func verify(t testing.TB, v verifier.Verifier, timeout time.Duration, att verifier.Attachment, content io.Reader) (verifier.Verdict, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return v.Verify(ctx, att, content)
}

// wantRetry checks a Retry verdict with the given cause and a value-free error.
func wantRetry(t testing.TB, v verifier.Verdict, err error, cause verifier.Cause) {
	t.Helper()
	if v.Outcome != verifier.Retry || v.Reason != "" {
		t.Fatalf("verdict %+v, want retry", v)
	}
	if got := verifier.CauseOf(err); got != cause {
		t.Fatalf("cause %q (error %v), want %q", got, err, cause)
	}
	noSecretText(t, err)
}

func TestEICARVerifierApprovesCleanAndRejectsSignature(t *testing.T) {
	p := newProcess(t, "eicar-verifier")
	big := filler(1 << 20) // eight chunks
	withSig := append(filler(300<<10), eicar()...)
	cases := []struct {
		name    string
		content []byte
		want    verifier.Verdict
	}{
		{"clean small", []byte("%PDF-1.7 an ordinary file"), verifier.Verdict{Outcome: verifier.Approved}},
		{"eicar alone", eicar(), verifier.Verdict{Outcome: verifier.Rejected, Reason: verifier.ReasonMalware}},
		{"clean 1 MiB", big, verifier.Verdict{Outcome: verifier.Approved}},
		{"eicar after 300 KiB", withSig, verifier.Verdict{Outcome: verifier.Rejected, Reason: verifier.ReasonMalware}},
		{"exactly one chunk", filler(128 << 10), verifier.Verdict{Outcome: verifier.Approved}},
	}
	for _, tc := range cases {
		v, err := verify(t, p, 10*time.Second, attachment("evidence", tc.content), bytes.NewReader(tc.content))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if v != tc.want {
			t.Fatalf("%s: verdict %+v, want %+v", tc.name, v, tc.want)
		}
	}
	if p.Starts() != 1 {
		t.Fatalf("process started %d times for consecutive calls, want 1", p.Starts())
	}
}

func TestConcurrentCallsShareOneProcess(t *testing.T) {
	p := newProcess(t, "eicar-verifier")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			content := filler(1000 + i)
			v, err := verify(t, p, 20*time.Second, attachment("evidence", content), bytes.NewReader(content))
			if err == nil && v.Outcome != verifier.Approved {
				err = errors.New("not approved: " + string(v.Outcome))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if p.Starts() != 1 {
		t.Fatalf("started %d processes, want 1", p.Starts())
	}
}

func TestCrashMidStreamIsRetryAndNextCallRestarts(t *testing.T) {
	p := newProcess(t, "hostile")
	content := filler(300 << 10) // three chunks; the plugin exits on the second
	v, err := verify(t, p, 10*time.Second, attachment("crashMidStream", content), bytes.NewReader(content))
	wantRetry(t, v, err, verifier.CauseCrashed)

	v, err = verify(t, p, 10*time.Second, attachment("ok", content), bytes.NewReader(content))
	if err != nil || v.Outcome != verifier.Approved {
		t.Fatalf("call after the crash: %+v, %v; want approved", v, err)
	}
	if p.Starts() != 2 {
		t.Fatalf("started %d times, want 2 (one restart)", p.Starts())
	}
}

func TestPluginThatExitsInsideVerifyIsRetry(t *testing.T) {
	p := newProcess(t, "hostile")
	v, err := verify(t, p, 10*time.Second, attachment("exits", []byte("x")), strings.NewReader("x"))
	wantRetry(t, v, err, verifier.CauseCrashed)
	v, err = verify(t, p, 10*time.Second, attachment("ok", []byte("x")), strings.NewReader("x"))
	if err != nil || v.Outcome != verifier.Approved {
		t.Fatalf("after exit: %+v, %v", v, err)
	}
}

func TestHungVerifierIsRetryAtTheDeadlineAndKilled(t *testing.T) {
	p := newProcess(t, "hostile")
	pidFile := filepath.Join(bins, "hostile.pid")
	_ = os.Remove(pidFile)
	// Warm the process so the deadline measures the hang, not the start.
	if _, err := verify(t, p, 10*time.Second, attachment("ok", []byte("x")), strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	const deadline = 300 * time.Millisecond
	start := time.Now()
	v, err := verify(t, p, deadline, attachment("hang", []byte("x")), strings.NewReader("x"))
	elapsed := time.Since(start)
	wantRetry(t, v, err, verifier.CauseDeadline)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v does not wrap context.DeadlineExceeded", err)
	}
	if elapsed < deadline || elapsed > deadline+testslack.Scheduling {
		t.Fatalf("returned after %v, want at the %v deadline", elapsed, deadline)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("hung plugin wrote no pid file: %v", err)
	}
	pid, _ := strconv.Atoi(string(b))
	gone := time.Now().Add(2 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(gone) {
			t.Fatalf("hung verifier process %d still alive 2 s after the deadline", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	v, err = verify(t, p, 10*time.Second, attachment("ok", []byte("x")), strings.NewReader("x"))
	if err != nil || v.Outcome != verifier.Approved {
		t.Fatalf("call after the kill: %+v, %v", v, err)
	}
	if p.Starts() != 2 {
		t.Fatalf("started %d times, want 2", p.Starts())
	}
}

func TestCallWaitingBehindAHungCallGivesUpAtItsDeadline(t *testing.T) {
	p := newProcess(t, "hostile")
	pidFile := filepath.Join(bins, "hostile.pid")
	_ = os.Remove(pidFile)
	hung := make(chan struct{})
	go func() {
		defer close(hung)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = p.Verify(ctx, attachment("hang", []byte("x")), strings.NewReader("x"))
	}()
	defer func() { <-hung }()
	// Wait until the first call is inside the plugin's Verify.
	for waited := time.Duration(0); ; waited += 10 * time.Millisecond {
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		if waited > 5*time.Second {
			t.Fatal("the hanging call never reached the plugin")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	v, err := verify(t, p, 200*time.Millisecond, attachment("ok", []byte("x")), strings.NewReader("x"))
	wantRetry(t, v, err, verifier.CauseDeadline)
	if elapsed := time.Since(start); elapsed > 200*time.Millisecond+testslack.Scheduling {
		t.Fatalf("waiting call returned after %v", elapsed)
	}
}

func TestPluginSideFailuresAreValueFreeRetries(t *testing.T) {
	p := newProcess(t, "hostile")
	cases := map[string]verifier.Cause{
		"panics":         verifier.CauseVerifierError,
		"fails":          verifier.CauseVerifierError,
		"invalidVerdict": verifier.CauseInvalidVerdict,
		"asksRetry":      verifier.CauseVerifierRetry,
		"nonsense":       verifier.CauseProtocol,
		"unknownCause":   verifier.CauseProtocol,
		"rpcError":       verifier.CauseProtocol,
	}
	big := filler(200 << 10)
	for slot, cause := range cases {
		v, err := verify(t, p, 10*time.Second, attachment(slot, []byte("x")), strings.NewReader("x"))
		wantRetry(t, v, err, cause)
		v, err = verify(t, p, 10*time.Second, attachment(slot, big), bytes.NewReader(big))
		wantRetry(t, v, err, cause)
	}
	v, err := verify(t, p, 10*time.Second, attachment("rejects", []byte("x")), strings.NewReader("x"))
	if err != nil || v != (verifier.Verdict{Outcome: verifier.Rejected, Reason: verifier.ReasonPolicy}) {
		t.Fatalf("rejects: %+v, %v", v, err)
	}
}

func TestHostSendsOnlyExactlyTheDeclaredBytes(t *testing.T) {
	p := newProcess(t, "hostile")
	// 100 bytes go in one call, 200 KiB in a Begin/Write/Finish session.
	for _, size := range []int{100, 200 << 10} {
		content := filler(size)
		att := attachment("rejects", content) // the plugin would reject anything it got to judge
		cases := map[string]struct {
			content io.Reader
			cause   verifier.Cause
		}{
			"longer than declared":  {io.MultiReader(bytes.NewReader(content), strings.NewReader("!")), verifier.CauseLongerThanDeclared},
			"shorter than declared": {bytes.NewReader(content[:len(content)-1]), verifier.CauseShorterThanDeclared},
			"digest mismatch":       {bytes.NewReader(append(filler(size-1), '!')), verifier.CauseDigestMismatch},
			"read error":            {io.MultiReader(bytes.NewReader(content[:50]), errReader{}), verifier.CauseReadError},
		}
		for name, tc := range cases {
			v, err := verify(t, p, 10*time.Second, att, tc.content)
			if verifier.CauseOf(err) != tc.cause {
				t.Fatalf("%d bytes, %s: %+v, %v; want cause %s", size, name, v, err, tc.cause)
			}
			wantRetry(t, v, err, tc.cause)
		}
		v, err := verify(t, p, 10*time.Second, att, bytes.NewReader(content))
		if err != nil || v.Outcome != verifier.Rejected {
			t.Fatalf("%d bytes, exact content: %+v, %v", size, v, err)
		}
	}
	if p.Starts() != 1 {
		t.Fatalf("content errors restarted the process: %d starts", p.Starts())
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("disk gone") }

func TestInvalidAttachmentMetadataIsRefusedBeforeStarting(t *testing.T) {
	path, digest := binary(t, "eicar-verifier")
	p, err := verifier.NewProcess(verifier.ProcessConfig{ID: "v", Path: path, SHA256: digest, MaxBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	good := attachment("evidence", filler(1000))
	bad := map[string]func(a *verifier.Attachment){
		"empty slot":       func(a *verifier.Attachment) { a.SlotID = "" },
		"media parameters": func(a *verifier.Attachment) { a.MediaType = "text/plain; charset=utf-8" },
		"uppercase media":  func(a *verifier.Attachment) { a.MediaType = "Application/PDF" },
		"zero size":        func(a *verifier.Attachment) { a.DeclaredSize = 0 },
		"over the limit":   func(a *verifier.Attachment) { a.DeclaredSize = 1001 },
		"uppercase digest": func(a *verifier.Attachment) { a.SHA256 = strings.ToUpper(a.SHA256) },
		"prefixed digest":  func(a *verifier.Attachment) { a.SHA256 = "sha256:" + a.SHA256[7:] },
	}
	for name, mutate := range bad {
		a := good
		mutate(&a)
		v, err := verify(t, p, 5*time.Second, a, bytes.NewReader(filler(1000)))
		if verifier.CauseOf(err) != verifier.CauseInvalidAttachment {
			t.Fatalf("%s: %+v, %v", name, v, err)
		}
	}
	if p.Starts() != 0 {
		t.Fatal("invalid metadata started the process")
	}
	v, err := verify(t, p, 10*time.Second, good, bytes.NewReader(filler(1000)))
	if err != nil || v.Outcome != verifier.Approved {
		t.Fatalf("at the 1000-byte limit: %+v, %v", v, err)
	}
}

func TestUnreviewedBinaryIsRefused(t *testing.T) {
	path, digest := binary(t, "eicar-verifier")
	_, otherDigest := binary(t, "hostile")
	_, err := verifier.NewProcess(verifier.ProcessConfig{ID: "v", Path: path, SHA256: otherDigest})
	if err == nil || !strings.Contains(err.Error(), "digest mismatch") || !strings.Contains(err.Error(), path) {
		t.Fatalf("wrong digest: %v", err)
	}
	_, err = verifier.NewProcess(verifier.ProcessConfig{ID: "v", Path: path + ".missing", SHA256: digest})
	if err == nil || !strings.Contains(err.Error(), path+".missing") {
		t.Fatalf("missing binary: %v", err)
	}
	_, err = verifier.NewProcess(verifier.ProcessConfig{ID: "v", Path: path, SHA256: strings.TrimPrefix(digest, "sha256:")})
	if err == nil || !strings.Contains(err.Error(), "sha256:<64 lowercase hex>") {
		t.Fatalf("malformed pin: %v", err)
	}

	// A binary swapped after it was pinned is refused at the next start.
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "verifier")
	copyFile(t, path, copyPath)
	p, err := verifier.NewProcess(verifier.ProcessConfig{ID: "v", Path: copyPath, SHA256: digest})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	hostile, _ := binary(t, "hostile")
	copyFile(t, hostile, copyPath)
	v, err := verify(t, p, 5*time.Second, attachment("evidence", []byte("x")), strings.NewReader("x"))
	wantRetry(t, v, err, verifier.CauseBinaryChanged)
	if p.Starts() != 0 {
		t.Fatal("a swapped binary was started")
	}
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestBadHandshakeIsRetryWithoutItsText(t *testing.T) {
	for _, name := range []string{"garbage", "wronghandshake"} {
		p := newProcess(t, name)
		start := time.Now()
		// Refused for what the process said, not by the call's deadline.
		const deadline = 30 * time.Second
		v, err := verify(t, p, deadline, attachment("evidence", []byte("x")), strings.NewReader("x"))
		wantRetry(t, v, err, verifier.CauseStartFailed)
		if elapsed := time.Since(start); elapsed >= deadline {
			t.Fatalf("%s: refused after %v, at the call's deadline", name, elapsed)
		}
	}
}

func TestStartIsBoundedByTheDeadline(t *testing.T) {
	// The garbage binary never completes a handshake when its line is slow to come;
	// with a deadline shorter than the start timeout the call still returns on time.
	path, digest := binary(t, "garbage")
	p, err := verifier.NewProcess(verifier.ProcessConfig{ID: "v", Path: path, SHA256: digest})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v, err := p.Verify(ctx, attachment("evidence", []byte("x")), strings.NewReader("x"))
	wantRetry(t, v, err, verifier.CauseDeadline)
}

func TestClosedProcessAnswersRetry(t *testing.T) {
	p := newProcess(t, "eicar-verifier")
	if _, err := verify(t, p, 10*time.Second, attachment("evidence", []byte("x")), strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	v, err := verify(t, p, 10*time.Second, attachment("evidence", []byte("x")), strings.NewReader("x"))
	wantRetry(t, v, err, verifier.CauseClosed)
}

func TestBinaryRefusesToRunWithoutTheHost(t *testing.T) {
	path, _ := binary(t, "eicar-verifier")
	out, err := exec.Command(path).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(out), "plugin") {
		t.Fatalf("run by hand: %v, %q", err, out)
	}
}
