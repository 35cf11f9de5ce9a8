package soak

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// goodState is a small run that breaks nothing: two creates and a patch
// acknowledged, a refused patch, a create whose answer was lost in a host's
// crash (landed), every revision audited, three events received once (one
// of them again inside the crash window), one 503 inside the database's
// restart window, jobs finished; two uploads whose verifications ended
// with the scanner's verdicts; a host stopped with SIGTERM that answered
// the request in flight and one sent during its drain (a later one, after
// its listener closed, unanswered inside the window); goroutines at the end
// exactly at the bound; an immediate action that created a survey and
// patched a parcel, acknowledged with both revisions; an ingestion run of
// three lines in two chunks, complete, each line one record written by its
// chunk's commit and audited under the chunk's trace id.
func goodState() *State {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ok := func(host, s, status int) Attempt {
		return Attempt{Host: host, At: at(s), Latency: 5 * time.Millisecond, Status: status}
	}
	return &State{
		Ops: []*Op{
			{Kind: "create", Write: true, TraceID: "t1", Key: "k1", Items: 1, Attempts: []Attempt{ok(0, 1, 201)},
				Written: []Written{{Entity: "parcel", Record: "r1", Revision: 1}}},
			{Kind: "create", Write: true, TraceID: "t2", Key: "k2", Items: 1,
				Attempts: []Attempt{{Host: 1, At: at(10), Err: "connection reset"}, ok(0, 11, 201)},
				Written:  []Written{{Entity: "parcel", Record: "r2", Revision: 1}}},
			{Kind: "patch", Write: true, TraceID: "t3", Key: "k3", Items: 1,
				Attempts: []Attempt{{Host: 0, At: at(20), Status: 503, Code: "source.unavailable"}, ok(1, 21, 200)},
				Written:  []Written{{Entity: "parcel", Record: "r1", Revision: 2}}},
			{Kind: "patch", Write: true, TraceID: "t4", Key: "k4", Items: 1, Attempts: []Attempt{{Host: 1, At: at(30), Status: 412, Code: "precondition.failed"}}},
			{Kind: "list", TraceID: "t5", Attempts: []Attempt{ok(0, 31, 200)}},
			{Kind: "upload", Write: true, TraceID: "t6", Key: "k6", Items: 1, Attempts: []Attempt{ok(1, 32, 200)},
				Upload: &Upload{SHA256: "s1", ContentType: "application/octet-stream", Want: "approved"}},
			{Kind: "upload", Write: true, TraceID: "t7", Key: "k7", Items: 1, Attempts: []Attempt{ok(1, 33, 200)},
				Upload: &Upload{SHA256: "s2", ContentType: "application/octet-stream", Want: "rejected"}},
			{Kind: "get", TraceID: "t8", Attempts: []Attempt{{Host: 0, At: at(50).Add(-100 * time.Millisecond), Latency: 300 * time.Millisecond, Status: 200}}},
			{Kind: "list", TraceID: "t9", Attempts: []Attempt{{Host: 0, At: at(50).Add(500 * time.Millisecond), Latency: 20 * time.Millisecond, Status: 200}}},
			{Kind: "get", TraceID: "t10", Attempts: []Attempt{{Host: 0, At: at(52), Err: "connection refused"}}},
			{Kind: "action", Write: true, TraceID: "t11", Key: "k11", Items: 2, ReportsAll: true, Attempts: []Attempt{ok(1, 60, 200)},
				Written: []Written{{Entity: "survey", Record: "s1", Revision: 1}, {Entity: "parcel", Record: "r2", Revision: 2}}},
		},
		DB: DB{
			Revisions: []Revision{
				{Entity: "parcel", Record: "r1", Revision: 1, Lifecycle: "active", Data: map[string]any{"code": "a", "area": 1.0}},
				{Entity: "parcel", Record: "r1", Revision: 2, Lifecycle: "active", Data: map[string]any{"code": "a", "area": 2.0}},
				{Entity: "parcel", Record: "r2", Revision: 1, Lifecycle: "active", Data: map[string]any{"code": "b"}},
				{Entity: "parcel", Record: "r2", Revision: 2, Lifecycle: "active", Data: map[string]any{"code": "b", "address": "surveyed"}},
				{Entity: "survey", Record: "s1", Revision: 1, Lifecycle: "active", Data: map[string]any{"parcel_id": "r2"}},
				{Entity: "import_row", Record: "i1", Revision: 1, Lifecycle: "active", Data: map[string]any{"code": "ing0-1"}, Commit: "m1"},
				{Entity: "import_row", Record: "i2", Revision: 1, Lifecycle: "active", Data: map[string]any{"code": "ing0-2"}, Commit: "m1"},
				{Entity: "import_row", Record: "i3", Revision: 1, Lifecycle: "active", Data: map[string]any{"code": "ing0-3"}, Commit: "m2"},
			},
			Current: map[RecordKey]Current{
				{"parcel", "r1"}:     {Revision: 2, Lifecycle: "active"},
				{"parcel", "r2"}:     {Revision: 2, Lifecycle: "active"},
				{"survey", "s1"}:     {Revision: 1, Lifecycle: "active"},
				{"import_row", "i1"}: {Revision: 1, Lifecycle: "active"},
				{"import_row", "i2"}: {Revision: 1, Lifecycle: "active"},
				{"import_row", "i3"}: {Revision: 1, Lifecycle: "active"},
			},
			Audit: []AuditRow{
				{Operation: "create", Outcome: "succeeded", Entity: "parcel", Revision: 1, TraceID: "t1"},
				{Operation: "create", Outcome: "succeeded", Entity: "parcel", Revision: 1, TraceID: "t2"},
				{Operation: "patch", Outcome: "succeeded", Entity: "parcel", Revision: 2, TraceID: "t3"},
				{Operation: "create", Outcome: "succeeded", Entity: "survey", Revision: 1, TraceID: "t11"},
				{Operation: "patch", Outcome: "succeeded", Entity: "parcel", Revision: 2, TraceID: "t11"},
				{Operation: "create", Outcome: "succeeded", Entity: "import_row", Revision: 1, TraceID: "c1"},
				{Operation: "create", Outcome: "succeeded", Entity: "import_row", Revision: 1, TraceID: "c1"},
				{Operation: AuditIngestionChunk, Outcome: "succeeded", Entity: "import_row", TraceID: "c1"},
				{Operation: "create", Outcome: "succeeded", Entity: "import_row", Revision: 1, TraceID: "c2"},
				{Operation: AuditIngestionChunk, Outcome: "succeeded", Entity: "import_row", TraceID: "c2"},
			},
			IngestRuns: []IngestRun{{RunID: "run1", Entity: "import_row", Status: "complete", ItemCount: 3, ChunkCount: 2, CommittedItems: 3, NextChunk: 2}},
			IngestChunks: []IngestChunk{
				{RunID: "run1", Commit: "m2", Index: 1, Items: 1, EndItem: 3},
				{RunID: "run1", Commit: "m1", Index: 0, Items: 2, EndItem: 2},
			},
			Deliveries: []EventDelivery{
				{EventID: "e1", Hook: "parcel-created", Handler: "url", State: "delivered", Generation: 1, Attempt: 1},
				{EventID: "e2", Hook: "parcel-created", Handler: "url", State: "delivered", Generation: 1, Attempt: 2},
				{EventID: "e3", Hook: "parcel-area-changed", Handler: "url", State: "delivered", Generation: 1, Attempt: 1},
				{EventID: "e4", Hook: "parcel-removed-gone", Handler: "url", State: "dead_lettered", Generation: 1, Attempt: 1},
			},
			Jobs: []Job{{ID: 1, Kind: "registrum.event.deliver", State: "completed"}, {ID: 2, Kind: kindReap, State: "scheduled"}},
			Verifications: []Verification{
				{SHA256: "s1", ContentType: "application/octet-stream", Verdict: "approved", Attempts: 3},
				{SHA256: "s2", ContentType: "application/octet-stream", Verdict: "rejected", Attempts: 1},
			},
			Requests: []Request{
				{Entity: "boundary_change", Record: "q1", State: "applied", Submission: "accepted", Delivery: "received"},
				{Entity: "boundary_change", Record: "q2", State: "draft"},
				{Entity: "address_change", Record: "q3", State: "submitted"},
			},
		},
		Received: []Received{
			{ID: "e1", Generation: 1, Type: "parcel-created-v1", Record: "r1", Revision: 1, At: at(2), Status: 204},
			{ID: "e2", Generation: 1, Type: "parcel-created-v1", Record: "r2", Revision: 1, At: at(11), Status: 204},
			{ID: "e2", Generation: 1, Type: "parcel-created-v1", Record: "r2", Revision: 1, At: at(13), Status: 204},
			{ID: "e3", Generation: 1, Type: "parcel-area-changed-v1", Record: "r1", Revision: 2, At: at(40), Status: 503},
			{ID: "e3", Generation: 1, Type: "parcel-area-changed-v1", Record: "r1", Revision: 2, At: at(41), Status: 204},
		},
		Windows: []Window{
			{Fault: "kill-host", Host: 1, Start: at(9), End: at(12)},
			{Fault: "postgres-restart", Host: AllHosts, Start: at(19), End: at(20)},
			{Fault: "receiver-503", Host: NoHost, Start: at(39), End: at(41)},
			{Fault: "term-host", Host: 0, Start: at(50), End: at(54), Drain: 2 * time.Second},
		},
		Footprints:        []Footprint{{Process: "host0", WarmGoroutines: 40, EndGoroutines: 40 + FlatGoroutineSlack, WarmHeap: 10 << 20, EndHeap: 20 << 20}},
		Grace:             time.Second,
		ExpectedEvents:    expectedEvents,
		WriteOperations:   []string{"create", "patch", "tombstone"},
		PeriodicJobs:      []string{kindReap},
		AutomaticRequests: []string{"boundary_change"},
		GoneHooks:         []string{"parcel-removed-gone"},
		Ingestions:        []Ingestion{{RunID: "run1", Entity: "import_row", Codes: []string{"ing0-1", "ing0-2", "ing0-3"}}},
	}
}

// dropIngested removes import_row record id from the journal, the current
// rows and, when audited, one of its chunk's create audit rows (trace).
func dropIngested(s *State, id, trace string) {
	s.DB.Revisions = slices.DeleteFunc(s.DB.Revisions, func(r Revision) bool { return r.Entity == "import_row" && r.Record == id })
	delete(s.DB.Current, RecordKey{"import_row", id})
	if i := slices.IndexFunc(s.DB.Audit, func(a AuditRow) bool { return a.Operation == "create" && a.TraceID == trace }); i >= 0 {
		s.DB.Audit = slices.Delete(s.DB.Audit, i, i+1)
	}
}

// TestCheckerReportsBrokenState holds the invariant checker to account:
// the good state passes, and each way of breaking it is reported under the
// invariant it breaks.
func TestCheckerReportsBrokenState(t *testing.T) {
	if f := Check(goodState()); len(f.Violations) != 0 || f.Redelivered != 1 {
		t.Fatalf("the good state: %v, %d redelivered (want none, 1)", f.Violations, f.Redelivered)
	}
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		break_ func(s *State)
		want   []string
		// detail, when set, must be in one of the violations: the check
		// that reports it, where several checks see the same break.
		detail string
	}{
		{"an acknowledged write whose revision is deleted", func(s *State) {
			s.DB.Revisions = slices.DeleteFunc(s.DB.Revisions, func(r Revision) bool { return r.Record == "r1" && r.Revision == 2 })
		}, []string{InvAckedPresent, InvAuditPresent, InvJournal}, ""},
		{"an acknowledged write whose current row is gone", func(s *State) {
			delete(s.DB.Current, RecordKey{"parcel", "r2"})
		}, []string{InvJournal}, ""},
		{"an audit row missing", func(s *State) {
			s.DB.Audit = s.DB.Audit[1:]
		}, []string{InvAuditPresent}, ""},
		{"a refused write that wrote", func(s *State) {
			s.DB.Audit = append(s.DB.Audit, AuditRow{Operation: "patch", Outcome: "succeeded", Entity: "parcel", Revision: 3, TraceID: "t4"})
		}, []string{InvAuditPresent, InvRefusedNothing}, ""},
		{"a create applied twice", func(s *State) {
			s.DB.Revisions = append(s.DB.Revisions, Revision{Entity: "parcel", Record: "r9", Revision: 1, Lifecycle: "active", Data: map[string]any{"code": "b"}})
			s.DB.Current[RecordKey{"parcel", "r9"}] = Current{Revision: 1, Lifecycle: "active"}
			s.DB.Audit = append(s.DB.Audit, AuditRow{Operation: "create", Outcome: "succeeded", Entity: "parcel", Revision: 1, TraceID: "t2"})
			s.Received = append(s.Received, Received{ID: "e9", Generation: 1, Type: "parcel-created-v1", Record: "r9", Revision: 1, At: t0.Add(50 * time.Second), Status: 204})
			s.DB.Deliveries = append(s.DB.Deliveries, EventDelivery{EventID: "e9", Handler: "url", State: "delivered", Generation: 1})
		}, []string{InvOnce}, ""},
		{"a duplicated delivery at the receiver", func(s *State) {
			s.Received = append(s.Received, Received{ID: "e1", Generation: 1, Type: "parcel-created-v1", Record: "r1", Revision: 1, At: t0.Add(50 * time.Second), Status: 204})
		}, []string{InvEventOnce}, ""},
		{"an event never received", func(s *State) {
			s.Received = s.Received[1:]
		}, []string{InvEventCaptured, InvEventReceived}, ""},
		{"an event dead-lettered", func(s *State) {
			s.DB.Deliveries[0].State = "dead_lettered"
		}, []string{InvEventSettled}, ""},
		{"a delivery to the 410 destination retried", func(s *State) {
			s.DB.Deliveries[3].State, s.DB.Deliveries[3].Attempt = "pending", 2
		}, []string{InvGoneDead}, ""},
		{"a delivery to the 410 destination dead-lettered after an answered attempt", func(s *State) {
			s.DB.Deliveries[3].Attempt, s.DB.Deliveries[3].AnsweredBefore = 2, 1
		}, []string{InvGoneDead}, ""},
		{"a delivery to the 410 destination delivered", func(s *State) {
			s.DB.Deliveries[3].State = "delivered"
		}, []string{InvGoneDead}, ""},
		{"an event received that was never captured", func(s *State) {
			s.DB.Deliveries = s.DB.Deliveries[1:]
		}, []string{InvEventPhantom}, ""},
		{"a 500 outside a fault window", func(s *State) {
			s.Ops[4].Attempts[0].Status, s.Ops[4].Attempts[0].Code = 500, "internal"
		}, []string{InvNo5xx}, ""},
		{"a 500 inside a fault window", func(s *State) {
			s.Ops[2].Attempts[0].Status = 500
		}, []string{InvOnly503}, ""},
		{"no answer from a host outside its window", func(s *State) {
			s.Ops[1].Attempts[0].Host = 0
		}, []string{InvAnswered}, ""},
		{"a job stuck", func(s *State) {
			s.DB.Jobs[0].State = "retryable"
		}, []string{InvJobsSettled}, ""},
		{"a reviewed request left unapplied", func(s *State) {
			s.DB.Requests[0].State, s.DB.Requests[0].Delivery = "submitted", "polling"
		}, []string{InvReviewSettled}, ""},
		{"a reviewed request waiting for an operator", func(s *State) {
			s.DB.Requests[0].Attention = "apply_refused"
		}, []string{InvReviewSettled}, ""},
		{"a job discarded", func(s *State) {
			s.DB.Jobs[0].State = "discarded"
		}, []string{InvJobsSettled}, ""},
		{"a verification left pending", func(s *State) {
			s.DB.Verifications[0].Verdict = "pending"
		}, []string{InvVerification}, ""},
		{"an acknowledged upload without a verification", func(s *State) {
			s.DB.Verifications = s.DB.Verifications[:1]
		}, []string{InvVerification}, ""},
		{"a verification with another verdict than the scanner's", func(s *State) {
			s.DB.Verifications[1].Verdict = "approved"
		}, []string{InvVerification}, ""},
		{"a request in flight at the SIGTERM unanswered", func(s *State) {
			s.Ops[7].Attempts[0].Status, s.Ops[7].Attempts[0].Err = 0, "EOF"
		}, []string{InvDrain}, ""},
		{"a request sent during the drain unanswered", func(s *State) {
			s.Ops[8].Attempts[0].Status, s.Ops[8].Attempts[0].Err = 0, "connection refused"
		}, []string{InvDrain}, ""},
		{"a 503 during the drain", func(s *State) {
			s.Ops[8].Attempts[0].Status = 503
		}, []string{InvDrain}, ""},
		{"goroutines leaked", func(s *State) {
			s.Footprints[0].EndGoroutines++
		}, []string{InvFlat}, ""},
		{"the heap grown", func(s *State) {
			s.Footprints[0].EndHeap = FlatHeapFactor*s.Footprints[0].WarmHeap + FlatHeapSlack + 1
		}, []string{InvFlat}, ""},
		{"an immediate action acknowledged without one of its revisions", func(s *State) {
			s.Ops[10].Written = s.Ops[10].Written[:1]
		}, []string{InvAckedPresent}, "acknowledged with 1 revisions, it writes 2"},
		{"an immediate action applied twice", func(s *State) {
			s.DB.Revisions = append(s.DB.Revisions, Revision{Entity: "survey", Record: "s2", Revision: 1, Lifecycle: "active"})
			s.DB.Current[RecordKey{"survey", "s2"}] = Current{Revision: 1, Lifecycle: "active"}
			s.DB.Audit = append(s.DB.Audit, AuditRow{Operation: "create", Outcome: "succeeded", Entity: "survey", Revision: 1, TraceID: "t11"})
		}, []string{InvOnce}, ""},
		{"an ingestion run left open after its first chunk", func(s *State) {
			dropIngested(s, "i3", "c2")
			s.DB.Audit = slices.DeleteFunc(s.DB.Audit, func(a AuditRow) bool { return a.TraceID == "c2" })
			s.DB.IngestChunks = s.DB.IngestChunks[1:]
			s.DB.IngestRuns[0].Status, s.DB.IngestRuns[0].CommittedItems, s.DB.IngestRuns[0].NextChunk = "open", 2, 1
		}, []string{InvIngestion}, "is open with 2 of 3 items committed"},
		{"an ingestion run left open with every chunk committed", func(s *State) {
			s.DB.IngestRuns[0].Status = "open"
		}, []string{InvIngestion}, "is open with 3 of 3 items committed"},
		{"an ingestion run that never opened", func(s *State) {
			s.Ingestions[0].RunID = ""
		}, []string{InvIngestion}, "never opened a run"},
		{"an ingestion run missing from the database", func(s *State) {
			s.DB.IngestRuns = nil
		}, []string{InvIngestion}, "is not in the database"},
		{"a chunk committed where another was expected", func(s *State) {
			s.DB.IngestChunks[0].Index = 2
		}, []string{InvIngestion}, "where chunk 1 from item 3 was expected"},
		{"a chunk's row missing", func(s *State) {
			s.DB.IngestChunks = s.DB.IngestChunks[1:]
		}, []string{InvIngestion}, "1 chunks committed of 2"},
		{"an ingested row missing", func(s *State) {
			dropIngested(s, "i3", "c2")
		}, []string{InvIngestion}, "line 3 (ing0-3) is in import_row 0 times"},
		{"an ingested row present twice", func(s *State) {
			s.DB.Revisions = append(s.DB.Revisions, Revision{Entity: "import_row", Record: "i9", Revision: 1, Lifecycle: "active", Data: map[string]any{"code": "ing0-2"}, Commit: "m1"})
			s.DB.Current[RecordKey{"import_row", "i9"}] = Current{Revision: 1, Lifecycle: "active"}
			s.DB.Audit = append(s.DB.Audit, AuditRow{Operation: "create", Outcome: "succeeded", Entity: "import_row", Revision: 1, TraceID: "c1"})
		}, []string{InvIngestion, InvOnce}, "line 2 (ing0-2) is in import_row 2 times"},
		{"an ingested row without its audit row", func(s *State) {
			s.DB.Audit = slices.DeleteFunc(s.DB.Audit, func(a AuditRow) bool { return a.TraceID == "c2" && a.Operation == "create" })
		}, []string{InvIngestion, InvAuditPresent}, "2 chunk audit entries with [0 2] creates"},
		{"an ingested row audited outside its chunk", func(s *State) {
			s.DB.Audit[slices.IndexFunc(s.DB.Audit, func(a AuditRow) bool { return a.TraceID == "c2" && a.Operation == "create" })].TraceID = "t97"
		}, []string{InvIngestion}, "3 creates audited, 2 of them under a chunk's trace id"},
		{"an ingested row written outside its chunk's commit", func(s *State) {
			s.DB.Revisions[len(s.DB.Revisions)-1].Commit = "m9"
		}, []string{InvIngestion}, "its commit wrote 0 records"},
		{"an ingested row without its current row", func(s *State) {
			delete(s.DB.Current, RecordKey{"import_row", "i1"})
		}, []string{InvIngestion, InvJournal}, "its current row at 0"},
		{"a row no input holds", func(s *State) {
			s.DB.Revisions = append(s.DB.Revisions, Revision{Entity: "import_row", Record: "i8", Revision: 1, Lifecycle: "active", Data: map[string]any{"code": "stray"}, Commit: "m8"})
			s.DB.Current[RecordKey{"import_row", "i8"}] = Current{Revision: 1, Lifecycle: "active"}
			s.DB.Audit = append(s.DB.Audit, AuditRow{Operation: "create", Outcome: "succeeded", Entity: "import_row", Revision: 1, TraceID: "t98"})
		}, []string{InvIngestion}, "which no input holds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := goodState()
			tc.break_(s)
			var got []string
			detailed := tc.detail == ""
			for _, v := range Check(s).Violations {
				if !slices.Contains(got, v.Invariant) {
					got = append(got, v.Invariant)
				}
				detailed = detailed || strings.Contains(v.Detail, tc.detail)
			}
			if !detailed {
				t.Errorf("no violation says %q: %v", tc.detail, Check(s).Violations)
			}
			slices.Sort(got)
			slices.Sort(tc.want)
			if !slices.Equal(got, tc.want) {
				t.Errorf("reported %s, want %s", strings.Join(got, ", "), strings.Join(tc.want, ", "))
			}
		})
	}
}
