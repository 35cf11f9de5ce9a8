package host_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestSubmitIsOfferedOnlyWhenItWouldBeAccepted: a draft offers
// submit_request exactly when a submit would be accepted by its slots: not
// while a required slot is empty, nor while any slot (optional included)
// holds content pending or rejected by its verifier. Each time it is not
// offered, the submit itself answers 412.
func TestSubmitIsOfferedOnlyWhenItWouldBeAccepted(t *testing.T) {
	env := startAttachments(t, true)
	owner := env.owner
	loc, etag := owner.create(t, "claims", `{"text":"an offered claim"}`)
	submitHref := loc + "/actions/submit?accessProfile=family"

	// offers reads the draft and reports whether submit is offered, and
	// cancel (which no slot blocks) always is; it returns the read's ETag.
	offers := func(what string, b []byte) bool {
		t.Helper()
		var doc envelope
		if err := json.Unmarshal(b, &doc); err != nil || doc.Data.Request == nil {
			t.Fatalf("%s: not a request envelope: %s", what, b)
		}
		if doc.Data.Request.action("cancel_request") == nil {
			t.Fatalf("%s: cancel not offered: %s", what, doc.Data.Request.operations())
		}
		s := doc.Data.Request.action("submit_request")
		if s != nil && !strings.HasPrefix(s.Href, submitHref) {
			t.Fatalf("%s: submit offered at %s", what, s.Href)
		}
		return s != nil
	}
	read := func() ([]byte, string) {
		t.Helper()
		resp, b := owner.do(t, "GET", loc, "", "")
		if resp.StatusCode != 200 {
			t.Fatalf("read: %d %s", resp.StatusCode, b)
		}
		return b, resp.Header.Get("ETag")
	}
	refused := func(what, etag, key string) {
		t.Helper()
		_, b := owner.act(t, submitHref, etag, key, `{"actorReference":"me"}`)
		wantProblem(t, what, 412, b, "precondition.failed")
	}
	status := func() string {
		b, _ := read()
		if m := slotOf(t, b, "scan"); m != nil {
			s, _ := m["verificationStatus"].(string)
			return s
		}
		return ""
	}

	// The required evidence slot is empty.
	b, _ := read()
	if offers("empty required slot", b) {
		t.Fatal("submit offered while the required slot is empty")
	}
	refused("submit with the required slot empty", etag, "s-empty")

	// Filled: offered.
	resp, b := owner.upload(t, loc, "evidence", "text/plain", etag, "u-evidence", []byte("evidence"))
	if resp.StatusCode != 200 {
		t.Fatalf("evidence: %d %s", resp.StatusCode, b)
	}
	if !offers("required slot filled", b) {
		t.Fatal("submit not offered once the required slot is filled")
	}
	etag = resp.Header.Get("ETag")

	// Pending content in the optional verified slot (the scanner holds
	// its answer): not offered, on the upload's answer and on a read.
	hold := make(chan struct{})
	env.scanner.mu.Lock()
	env.scanner.hold = hold
	env.scanner.mu.Unlock()
	resp, b = owner.upload(t, loc, "scan", "application/octet-stream", etag, "u-clean", []byte("clean bytes"))
	if resp.StatusCode != 200 || slotOf(t, b, "scan")["verificationStatus"] != "pending" {
		t.Fatalf("upload to the verified slot: %d %s", resp.StatusCode, b)
	}
	if offers("pending upload's answer", b) {
		t.Fatal("submit offered on the answer of a pending upload")
	}
	b, etag = read()
	if offers("pending content", b) {
		t.Fatal("submit offered while a slot is pending")
	}
	refused("submit with pending content", etag, "s-pending")

	// Approved: offered.
	env.scanner.mu.Lock()
	env.scanner.hold = nil
	env.scanner.mu.Unlock()
	close(hold)
	waitFor(t, 30*time.Second, "approval", func() bool { return status() == "approved" })
	if b, _ = read(); !offers("approved content", b) {
		t.Fatal("submit not offered once the content is approved")
	}

	// Rejected: not offered.
	_, etag = read()
	resp, b = owner.upload(t, loc, "scan", "application/octet-stream", etag, "u-malware", []byte("MALWARE inside"))
	if resp.StatusCode != 200 {
		t.Fatalf("replacement: %d %s", resp.StatusCode, b)
	}
	waitFor(t, 30*time.Second, "rejection", func() bool { return status() == "rejected" })
	b, etag = read()
	if offers("rejected content", b) {
		t.Fatal("submit offered while a slot holds rejected content")
	}
	refused("submit with rejected content", etag, "s-rejected")

	// Removed: offered again, and the offer is accepted.
	resp, b = owner.do(t, "DELETE", loc+"/attachments/scan", "", "", "If-Match", etag, "Idempotency-Key", "d-scan")
	if resp.StatusCode != 200 || !offers("rejected content removed", b) {
		t.Fatalf("removal: %d %s", resp.StatusCode, b)
	}
	var doc envelope
	json.Unmarshal(b, &doc)
	s := doc.Data.Request.action("submit_request")
	if code, b := owner.act(t, s.Href, s.IfMatch, "s-ok", `{"actorReference":"me"}`); code != 200 {
		t.Fatalf("submit as offered: %d %s", code, b)
	}
}
