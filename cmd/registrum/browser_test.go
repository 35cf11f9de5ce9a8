package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/registrum/registrum/cmd/registrum/internal/dev"
)

// requireBrowser, when set, makes a missing Chromium a failure instead of a
// skip (.ci/run sets it).
const requireBrowser = "REGISTRUM_REQUIRE_BROWSER"

// screenshotDir, when set, is where the browser test writes its
// screenshots (default: a temporary folder, named in the test log).
const screenshotDir = "REGISTRUM_SCREENSHOTS"

// chromium returns the path of a Chromium (Debian's chromium package) or
// Chrome binary, or "".
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestReviewDeskInABrowser runs the guided tour against `registrum dev`
// with the reviewed request approved in headless Chromium: the reviewer
// signs in, finds the request, approves it; the tour then reads the request
// until apply is offered, applies it and goes on to its last step. Every
// page of the desk is captured.
func TestReviewDeskInABrowser(t *testing.T) {
	browser := chromium()
	if browser == "" {
		if os.Getenv(requireBrowser) != "" {
			t.Fatalf("%s is set but no chromium is installed (apt-get install -y chromium)", requireBrowser)
		}
		t.Skipf("no chromium on this machine: the review desk's browser test is skipped (apt-get install -y chromium, or set %s=1 to make this a failure)", requireBrowser)
	}
	shots := os.Getenv(screenshotDir)
	if shots == "" {
		shots = t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.MkdirTemp("", "rgdesk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	data := filepath.Join(root, "data")
	run := startDev(t, data)
	defer run.stop(t, data, syscall.SIGTERM)

	approve := approveInBrowser(browser, shots)
	approved := false
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	err = dev.Tour(ctx, dev.TourOptions{DataDir: data, NoPause: true, Out: &out, Executable: binary,
		Approve: func(_ context.Context, deskURL, password, recordID string) error {
			approve(t, deskURL, password, recordID)
			approved = true
			return nil
		}})
	if err != nil {
		t.Fatalf("the tour with the approval in the browser: %v\n%s", err, out.String())
	}
	if !approved {
		t.Fatalf("the tour never asked for the desk's approval:\n%s", out.String())
	}
	// The tour only goes on past the reviewed request once the host offers
	// its apply and the apply succeeded.
	if !strings.Contains(out.String(), "apply_request") {
		t.Fatalf("the tour did not apply the approved request:\n%s", out.String())
	}
	t.Logf("screenshots of the review desk in %s", shots)
}

// approver approves the reviewed request of recordID in the desk at
// deskURL, signing in with password.
type approver func(t *testing.T, deskURL, password, recordID string)

// approveInBrowser approves in headless Chromium, capturing each page into
// shots: the sign-in page, the list, the request, the settled request.
func approveInBrowser(browser, shots string) approver {
	return func(t *testing.T, deskURL, password, recordID string) {
		t.Helper()
		// The profile, and what Chromium puts in the temporary folder (its
		// singleton socket folder, and the shared-memory files that
		// disable-dev-shm-usage moves there), stay in folders of the test,
		// removed when it ends, however the browser ended.
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1200, 900), chromedp.UserDataDir(t.TempDir()),
			chromedp.Env("TMPDIR="+t.TempDir()))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		defer cancelAlloc()
		ctx, cancelCtx := chromedp.NewContext(alloc)
		defer cancelCtx()
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		must := func(what string, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("browser: %s: %v", what, err)
			}
		}
		shot := func(name string) {
			t.Helper()
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			must("screenshot "+name, err)
			must("write "+name, os.WriteFile(filepath.Join(shots, name), png, 0o644))
		}

		// Signed out, the desk shows its sign-in page.
		must("open the desk", chromedp.Do(ctx, chromedp.Navigate(deskURL+"/"), chromedp.WaitVisible(chromedp.ID("password"))))
		shot("1-sign-in.png")
		must("type the password", chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("password"), password)))
		_, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.ID("sign-in")))
		must("sign in", err)

		// The request arrives once the host's job has sent it.
		find := fmt.Sprintf(`(() => { const r = [...document.querySelectorAll("tbody tr")].find(r => r.textContent.includes(%q)); return r ? r.querySelector("a").getAttribute("href") : ""; })()`, recordID)
		deadline := time.Now().Add(30 * time.Second)
		var href string
		for {
			href, err = chromedp.Run(ctx, chromedp.Evaluate[string](find))
			must("read the list", err)
			if href != "" {
				break
			}
			if time.Now().After(deadline) {
				html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
				t.Fatalf("the desk never listed the request of %s:\n%s", recordID, html)
			}
			time.Sleep(300 * time.Millisecond)
			must("reload the list", chromedp.Do(ctx, chromedp.Navigate(deskURL+"/")))
		}
		shot("2-requests.png")
		_, err = chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`a[href="`+href+`"]`)))
		must("open the request", err)
		must("see the decision forms", chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("approve"))))
		shot("3-request.png")
		_, err = chromedp.RunResponse(ctx, chromedp.Click(chromedp.ID("approve")))
		must("approve", err)
		state, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("state")))
		must("read the state", err)
		shot("4-approved.png")
		if strings.TrimSpace(state) != "approved" {
			t.Fatalf("after Approve the request is %q", state)
		}
	}
}
