package dev

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// The review desk's pages, as the tour reads them: the form's CSRF token,
// the approval's preset availableUntil, and the links of the request list.
var (
	deskCSRF  = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	deskUntil = regexp.MustCompile(`name="availableUntil" type="datetime-local" value="([^"]+)"`)
	deskLink  = regexp.MustCompile(`href="(/requests/[^"]+)"`)
)

// approveInDesk approves, in the review desk at deskURL, the review
// request of the request record recordID, as a reviewer does with a
// browser: it signs in with the password kept in passwordFile, finds the
// request in the list (waiting for the host to have sent it), opens it and
// posts the Approve form.
func approveInDesk(ctx context.Context, base *http.Client, deskURL, passwordFile, recordID string) error {
	pw, err := os.ReadFile(passwordFile)
	if err != nil {
		return fmt.Errorf("review desk: %w", err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: base.Timeout}
	page := func(method, path string, form url.Values) (string, error) {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(ctx, method, deskURL+path, body)
		if err != nil {
			return "", err
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := c.Do(req)
		if err != nil {
			return "", fmt.Errorf("review desk: %w", err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("review desk: %s %s answered %d", method, path, resp.StatusCode)
		}
		return string(b), nil
	}
	field := func(re *regexp.Regexp, html, what string) (string, error) {
		m := re.FindStringSubmatch(html)
		if m == nil {
			return "", fmt.Errorf("review desk: the page shows no %s", what)
		}
		return m[1], nil
	}
	login, err := page(http.MethodGet, "/login", nil)
	if err != nil {
		return err
	}
	csrf, err := field(deskCSRF, login, "sign-in form")
	if err != nil {
		return err
	}
	list, err := page(http.MethodPost, "/login", url.Values{"csrf": {csrf}, "password": {strings.TrimSpace(string(pw))}})
	if err != nil {
		return err
	}
	href := ""
	deadline := time.Now().Add(tourWait)
	for href == "" {
		for _, row := range strings.Split(list, "<tr") {
			if m := deskLink.FindStringSubmatch(row); m != nil && strings.Contains(row, recordID) {
				href = m[1]
			}
		}
		if href != "" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("review desk: no request of record %s arrived within %v", recordID, tourWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		if list, err = page(http.MethodGet, "/", nil); err != nil {
			return err
		}
	}
	detail, err := page(http.MethodGet, href, nil)
	if err != nil {
		return err
	}
	if csrf, err = field(deskCSRF, detail, "decision form"); err != nil {
		return err
	}
	until, err := field(deskUntil, detail, "approval form")
	if err != nil {
		return err
	}
	done, err := page(http.MethodPost, href+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}, "availableUntil": {until}})
	if err != nil {
		return err
	}
	if !strings.Contains(done, `<dd id="state">approved</dd>`) {
		return fmt.Errorf("review desk: the approval of %s did not take", href)
	}
	return nil
}
