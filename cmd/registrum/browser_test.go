package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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

// TestReviewDeskInABrowser runs the reviewed journey `registrum dev`
// prints with the approval given in headless Chromium: the reviewer signs
// in, finds the request, approves it; the record host then offers the apply
// and the apply changes the record. Every page is captured.
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
	first, reviewedPart, found := strings.Cut(run.output.String(), reviewedHeading)
	if !found {
		t.Fatalf("no reviewed request journey in:\n%s", run.output.String())
	}
	subst := map[string]string{"$TOKEN": printedToken(t, run, first)}
	// The reviewed journey uses the records the change-request journey
	// creates first (its lines before the draft).
	_, journey, _ := strings.Cut(first, "Change records through a change request")
	journey, _, _ = strings.Cut(journey, "Draft the request")
	for _, line := range printed(journey, "curl ") {
		resp, b := runCurl(t, line, subst)
		var doc journeyDoc
		if resp.StatusCode != 201 || jsonInto(b, &doc) != nil {
			t.Fatalf("the printed setup create answered %d %s", resp.StatusCode, b)
		}
		subst["<"+doc.Meta.EntityTypeIdentifier+" id>"] = doc.Data.RecordIdentifier
	}
	runReviewedJourney(t, reviewedPart, subst, approveInBrowser(browser, shots))
	t.Logf("screenshots of the review desk in %s", shots)
}

// approveInBrowser approves in headless Chromium, capturing each page into
// shots: the sign-in page, the list, the request, the settled request.
func approveInBrowser(browser, shots string) approver {
	return func(t *testing.T, deskURL, password, recordID string) {
		t.Helper()
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1200, 900), chromedp.UserDataDir(t.TempDir()))
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

func jsonInto(b []byte, v any) error { return json.Unmarshal(b, v) }
