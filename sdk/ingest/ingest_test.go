package ingest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/registrum/registrum/internal/chunking"
)

func testPlan(t *testing.T) *Plan {
	t.Helper()
	var b strings.Builder
	for i := range 5 {
		b.WriteString(`{"operation":"create","data":{"n":` + string(rune('0'+i)) + `}}` + "\n")
	}
	p, err := PlanReader(strings.NewReader(b.String()), Create, Bounds{MaximumItems: 2, MaximumBytes: 4096})
	if err != nil || len(p.Chunks) != 3 {
		t.Fatalf("plan %+v, %v", p, err)
	}
	return p
}

// runOf is the run a host keeps for plan after its first n chunks.
func runOf(p *Plan, n int) *Run {
	r := &Run{RunID: "r", Status: "open", Operation: p.Operation, InputDigest: p.InputDigest, InputLength: p.InputLength, ItemCount: p.ItemCount,
		ChunkCount: len(p.Chunks), MaximumItems: p.Bounds.MaximumItems, MaximumBytes: p.Bounds.MaximumBytes, NextChunkIndex: n, CommittedPrefixDigest: chunking.EmptyDigest}
	if n > 0 {
		r.CommittedItems, r.CommittedPrefixDigest = p.Chunks[n-1].FirstItem+p.Chunks[n-1].Items, p.Chunks[n-1].PrefixDigest
	}
	return r
}

func TestMatchesOnlyTheRunOfThisPlan(t *testing.T) {
	p := testPlan(t)
	for n := range 4 {
		if err := Matches(runOf(p, n), p); err != nil {
			t.Errorf("after %d chunks: %v", n, err)
		}
	}
	for name, edit := range map[string]func(*Run){
		"another source":         func(r *Run) { r.InputDigest = strings.Repeat("0", 64) },
		"another operation":      func(r *Run) { r.Operation = Patch },
		"other bounds":           func(r *Run) { r.MaximumItems = 3 },
		"a prefix off the plan":  func(r *Run) { r.CommittedPrefixDigest = p.Chunks[0].PrefixDigest },
		"items off the plan":     func(r *Run) { r.CommittedItems = 3 },
		"past the last chunk":    func(r *Run) { r.NextChunkIndex = 4 },
		"another chunk count":    func(r *Run) { r.ChunkCount = 4 },
		"another length of file": func(r *Run) { r.InputLength++ },
	} {
		r := runOf(p, 2)
		edit(r)
		if err := Matches(r, p); err == nil {
			t.Errorf("%s: matched", name)
		}
	}
}

// Messages number chunks from 1, as lines are: chunk index 1 is "chunk 2".
func TestRefusalNamesTheSourceLine(t *testing.T) {
	p := testPlan(t)
	c := &Client{}
	at := "/items/1/data/n"
	r := c.refusal(runOf(p, 1), p, 1, &Problem{Status: 400, Code: "request.invalid", Detail: "bad", FieldPath: &at})
	if r.Item != 3 || r.Line != 4 || r.Committed != 2 || !strings.Contains(r.Error(), "line 4 (in chunk 2)") {
		t.Fatalf("refusal %+v: %v", r, r)
	}
	r = c.refusal(runOf(p, 1), p, 1, &Problem{Status: 412, Code: "precondition.failed", Detail: "moved"})
	if r.Line != 0 || !strings.Contains(r.Error(), "chunk 2 (lines 3-4)") {
		t.Fatalf("refusal without an item %+v: %v", r, r)
	}
	out := "/items/9/data"
	if r = c.refusal(runOf(p, 1), p, 1, &Problem{FieldPath: &out}); r.Line != 0 {
		t.Fatalf("an item index outside the chunk named line %d", r.Line)
	}
}

// TestRefusalDetailIsBounded: an answer that is no problem document (a
// proxy's error page) or a problem whose detail is huge is echoed in the
// error, and so on the command's output at every retry, at most
// MaxDetailBytes long; the token never appears in it.
func TestRefusalDetailIsBounded(t *testing.T) {
	page := "<html>" + strings.Repeat("gateway error ", 1<<16) + "</html>"
	huge := `{"status":400,"code":"request.invalid","detail":"` + strings.Repeat("é", 1<<16) + `"}`
	for _, tc := range []struct{ ct, body string }{{"text/html", page}, {"application/problem+json", huge}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", tc.ct)
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, tc.body)
		}))
		c := &Client{BaseURL: srv.URL, Route: "items", Token: func(context.Context) (string, error) { return "secret-token", nil }}
		_, err := c.Binding(context.Background())
		srv.Close()
		var p *Problem
		if !errors.As(err, &p) || p.Status != 400 {
			t.Fatalf("%s: %v", tc.ct, err)
		}
		if len(p.Detail) > MaxDetailBytes || !utf8.ValidString(p.Detail) || len(err.Error()) > MaxDetailBytes+200 || strings.Contains(err.Error(), "secret-token") {
			t.Errorf("%s: a detail of %d bytes (valid UTF-8: %v), an error of %d", tc.ct, len(p.Detail), utf8.ValidString(p.Detail), len(err.Error()))
		}
	}
}

// TestReceiptResults holds the receipt check to what decoding the receipt
// with encoding/json and counting its results gives.
func TestReceiptResults(t *testing.T) {
	for _, c := range []struct {
		body string
		n    int
		ok   bool
	}{
		{`{"snapshot":"s","results":[]}`, 0, true},
		{`{"snapshot":"s","results":[ ]}`, 0, true},
		{`{"results":[{"id":"a","data":{"x":[1,2,{"y":"],[,{"}]}},{"id":"b\"],"}]}`, 2, true},
		{` { "results" : [ 1 , "2" , null , [3,4] ] } `, 4, true},
		{`{"results":null}`, 0, false},
		{`{"results":{}}`, 0, false},
		{`{"snapshot":"s"}`, 0, false},
		{`[1,2]`, 0, false},
		{`{"results":[1,2]`, 0, false},
		{`{"results":[1,2]} x`, 0, false},
		{`{"results":[1,2],"results":[3]}`, 0, false},
	} {
		n, ok := receiptResults([]byte(c.body))
		if n != c.n || ok != c.ok {
			t.Errorf("receiptResults(%s) = %d, %v; want %d, %v", c.body, n, ok, c.n, c.ok)
		}
	}
}
