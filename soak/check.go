package soak

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Hosts a fault window names besides a host's index.
const (
	// AllHosts: every host's answers are affected (the database restarts).
	AllHosts = -1
	// NoHost: no host's answers are affected (the worker or the receiver).
	NoHost = -2
)

// Window is a fault window: from Start (the fault injected) to End (its
// recovery observed) the answers of Host may be unavailable.
type Window struct {
	Fault      string // kill-host, term-host, kill-worker, postgres-restart, receiver-503, authority-503, verifier-down
	Host       int    // a host's index, AllHosts or NoHost
	Start, End time.Time
	// Drain is the drain delay of a term-host window: from Start (the
	// SIGTERM) the host keeps serving that long. Every request sent to it
	// before Start plus half of Drain must be answered (the other half is
	// slack for the signal's delivery and the client's own start).
	Drain time.Duration
}

// covers reports whether an answer of host at t is excused by w, grace
// after its end included.
func (w Window) covers(host int, t time.Time, grace time.Duration) bool {
	if w.Host == NoHost || (w.Host != AllHosts && w.Host != host) {
		return false
	}
	return !t.Before(w.Start) && !t.After(w.End.Add(grace))
}

// Attempt is one HTTP exchange of an operation.
type Attempt struct {
	Host    int
	At      time.Time // when it was sent
	Latency time.Duration
	Status  int    // 0: no answer (a transport error)
	Code    string // the problem code of a refusal, when the body had one
	Err     string // the transport error
	// Replayed: the answer carried Idempotent-Replayed: true (an earlier
	// attempt had landed).
	Replayed bool
}

// Written is one revision an acknowledged write answered.
type Written struct {
	Entity, Record string
	Revision       int64
	Tombstoned     bool
}

// Op is one logical operation of a client, every retry included (a write's
// retries carry the same Idempotency-Key and the same trace id).
type Op struct {
	Kind     string
	Write    bool
	TraceID  string
	Key      string
	Items    int // record writes the operation makes when it lands (a batch: its items)
	Attempts []Attempt
	Written  []Written // what the acknowledging answer reported
	// ReportsAll: the acknowledging answer names every revision the
	// operation wrote (a batch's results, an immediate action's results),
	// so it must name Items of them.
	ReportsAll bool
	// Upload is what an attachment upload sent (nil for other operations).
	Upload *Upload
}

// Upload is the content an attachment upload sent and the verdict the
// scanner gives it.
type Upload struct {
	SHA256, ContentType string
	Want                string // approved or rejected
}

// last returns the final attempt (the zero Attempt when none was made).
func (o *Op) last() Attempt {
	if len(o.Attempts) == 0 {
		return Attempt{}
	}
	return o.Attempts[len(o.Attempts)-1]
}

// Acked reports whether the operation's final answer was a 2xx.
func (o *Op) Acked() bool { s := o.last().Status; return s >= 200 && s < 300 }

// Refused reports whether the final answer was a definite refusal: a 4xx
// other than an idempotency conflict (which says another attempt holds the
// key, not that nothing was written).
func (o *Op) Refused() bool {
	a := o.last()
	return a.Status >= 400 && a.Status < 500 && !strings.HasPrefix(a.Code, "idempotency.")
}

// RecordKey names a record.
type RecordKey struct{ Entity, Record string }

// Revision is one row of the revision journal.
type Revision struct {
	Entity, Record string
	Revision       int64
	Lifecycle      string         // active or tombstoned
	Data           map[string]any // stored values by authored field id
	Commit         string         // the commit that wrote it (commit_id)
}

// Current is one row of an entity's current-state table.
type Current struct {
	Revision  int64
	Lifecycle string
}

// AuditRow is one row of the audit journal.
type AuditRow struct {
	Operation, Outcome, Entity string
	Revision                   int64 // 0 when the row names none
	TraceID                    string
}

// EventDelivery is one row of the event deliveries.
type EventDelivery struct {
	EventID, Hook, Entity, Handler, State string
	Generation, Attempt                   int
	// AnsweredBefore counts the attempts of this generation before the
	// last one whose receiver's answer was recorded. An attempt cut off by
	// a crash or a database restart records none (its lease expires), and
	// is sent again: once-at-least, not a retry of an answer.
	AnsweredBefore int
}

// Job is one River job.
type Job struct {
	ID                 int64
	Kind, State, Error string
}

// Request is one change request with its latest review submission.
type Request struct {
	Entity, Record, State string
	// Submission, Delivery and Attention are the review submission's
	// state, result feed state and operator attention ("" without one).
	Submission, Delivery, Attention string
	// Application and ApplicationAttention are the automatic
	// application's state and attention ("" without one).
	Application, ApplicationAttention string
}

// Verification is one row of the attachment verdicts (one per content,
// media type and verification policy).
type Verification struct {
	SHA256, ContentType, Verdict string // verdict: pending, approved or rejected
	Attempts                     int
}

// IngestRun is one ingestion run (registrum.ingestion_runs).
type IngestRun struct {
	RunID, Entity, Status string
	ItemCount, ChunkCount int64
	// CommittedItems and NextChunk are the run's checkpoint.
	CommittedItems, NextChunk int64
}

// IngestChunk is one committed chunk of an ingestion run
// (registrum.ingestion_run_chunks): its items are lines EndItem-Items+1
// through EndItem of the run's input, written by commit Commit.
type IngestChunk struct {
	RunID, Commit         string
	Index, Items, EndItem int64
}

// Ingestion is one ingestion run the harness drove: the code each line of
// its input file carries, in line order, and the run that imported it.
type Ingestion struct {
	RunID  string // "" when no run was ever opened
	Entity string
	Codes  []string
}

// AuditIngestionChunk is the audit operation of a committed ingestion
// chunk (store.Writer.CommitChunk); the chunk's records are audited as
// creates under the same trace id.
const AuditIngestionChunk = "ingestion_chunk"

// DB is what the checker reads from the database.
type DB struct {
	Revisions     []Revision
	Current       map[RecordKey]Current
	Audit         []AuditRow
	Deliveries    []EventDelivery
	Jobs          []Job
	Requests      []Request
	Verifications []Verification
	IngestRuns    []IngestRun
	IngestChunks  []IngestChunk
}

// Footprint is a process incarnation's goroutines and heap in use
// (go_goroutines, go_memstats_heap_inuse_bytes of its metrics listener)
// after warm-up under traffic and at the end of the run, once everything
// drained and idle connections were let go.
type Footprint struct {
	Process                       string
	WarmGoroutines, EndGoroutines int
	WarmHeap, EndHeap             int64 // bytes
}

// The bounds of goroutines-and-heap-flat: generous, so that a busy run's
// pools, caches and River's maintenance fit, while a leak of one goroutine
// per request (hundreds in a minute) or of the heap does not.
const (
	// FlatGoroutineSlack is how many goroutines the end may hold beyond
	// the warm-up sample.
	FlatGoroutineSlack = 64
	// FlatHeapFactor and FlatHeapSlack bound the heap at the end:
	// FlatHeapFactor times the warm-up heap plus FlatHeapSlack bytes.
	FlatHeapFactor = 3
	FlatHeapSlack  = 64 << 20
)

// Received is one delivery the receiver answered.
type Received struct {
	Source, ID  string
	Generation  int
	Attempt     int
	Type        string
	Record      string // data.recordId of the event, when it has one
	Revision    int64  // data.revision of the event, when it has one
	At          time.Time
	Status      int // what the receiver answered
	SignatureOK bool
}

// State is everything the checker decides on.
type State struct {
	Ops      []*Op
	DB       DB
	Received []Received
	Windows  []Window
	// Grace is how long after a window's end its effects are excused
	// (pools reconnecting, a load balancer's health check).
	Grace time.Duration
	// ExpectedEvents returns the events (type and revision) the journal's
	// revision r of a record implies, given its previous revision (nil for
	// the first).
	ExpectedEvents func(prev, r *Revision) []string
	// WriteOperations are the audit operations that append a revision.
	WriteOperations []string
	// PeriodicJobs are job kinds that stay scheduled by design.
	PeriodicJobs []string
	// AutomaticRequests are the request entities applied automatically
	// once reviewed: none of their submitted requests may be left
	// unapplied.
	AutomaticRequests []string
	// GoneHooks are the hooks whose destination answers 410 Gone: each of
	// their deliveries must be dead-lettered after its first attempt, and
	// they are the only dead letters allowed.
	GoneHooks []string
	// Footprints are the processes' goroutines and heap, one per process
	// incarnation that ran to the end.
	Footprints []Footprint
	// Ingestions are the ingestion runs the harness drove.
	Ingestions []Ingestion
}

// Violation is one broken invariant.
type Violation struct {
	Invariant string
	Detail    string
}

func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

// Findings are what a check found: the violations, and counts worth
// reporting that break nothing.
type Findings struct {
	Violations []Violation
	// Redelivered counts deliveries acknowledged again inside a fault window
	// (at-least-once after a crash): allowed, reported.
	Redelivered int
	// LandedUnanswered counts writes whose answer was lost (no answer or a
	// 503) but whose effect is in the journal, complete.
	LandedUnanswered int
	// Replayed counts writes acknowledged by a replay of their
	// Idempotency-Key after an attempt without an answer.
	Replayed int
	// Checked counts what each invariant looked at.
	Checked map[string]int
}

// Invariant names.
const (
	InvAckedPresent   = "acknowledged-write-present"
	InvAuditPresent   = "audit-row-present"
	InvJournal        = "journal-consistent"
	InvRefusedNothing = "refused-write-wrote-nothing"
	InvOnce           = "no-effect-applied-twice"
	InvNo5xx          = "no-5xx-outside-fault-windows"
	InvOnly503        = "only-503-inside-fault-windows"
	InvAnswered       = "hosts-answer-outside-fault-windows"
	InvEventSettled   = "event-delivered"
	InvEventReceived  = "event-received"
	InvEventOnce      = "event-received-once-per-generation"
	InvEventCaptured  = "event-captured-for-every-write"
	InvEventPhantom   = "event-received-was-captured"
	InvJobsSettled    = "jobs-settled"
	InvReviewSettled  = "review-settled"
	InvGoneDead       = "gone-destination-dead-lettered-at-once"
	InvVerification   = "verification-settled"
	InvDrain          = "drain-answers-in-flight"
	InvFlat           = "goroutines-and-heap-flat"
	InvIngestion      = "ingestion-complete-once"
)

// Check checks every invariant of the soak over s.
func Check(s *State) Findings {
	f := Findings{Checked: map[string]int{}}
	bad := func(inv, format string, args ...any) {
		f.Violations = append(f.Violations, Violation{inv, fmt.Sprintf(format, args...)})
	}
	type revKey struct {
		Entity, Record string
		Revision       int64
	}
	revs := map[revKey]*Revision{}
	byRecord := map[RecordKey][]*Revision{}
	for i := range s.DB.Revisions {
		r := &s.DB.Revisions[i]
		revs[revKey{r.Entity, r.Record, r.Revision}] = r
		k := RecordKey{r.Entity, r.Record}
		byRecord[k] = append(byRecord[k], r)
	}
	writeOp := map[string]bool{}
	for _, o := range s.WriteOperations {
		writeOp[o] = true
	}
	type auditKey struct {
		Entity   string
		Revision int64
	}
	auditByTrace := map[string][]AuditRow{}
	auditCount := map[auditKey]int{}
	for _, a := range s.DB.Audit {
		if a.Outcome != "succeeded" || !writeOp[a.Operation] {
			continue
		}
		auditByTrace[a.TraceID] = append(auditByTrace[a.TraceID], a)
		auditCount[auditKey{a.Entity, a.Revision}]++
	}

	// Every acknowledged write is in the journal with its audit row; a
	// refused one left nothing; none landed twice.
	for _, o := range s.Ops {
		if !o.Write {
			continue
		}
		audit := auditByTrace[o.TraceID]
		switch {
		case o.Acked():
			if o.last().Replayed {
				f.Replayed++
			}
			if o.ReportsAll {
				f.Checked[InvAckedPresent]++
				if len(o.Written) != o.Items {
					bad(InvAckedPresent, "%s %s (trace %s) was acknowledged with %d revisions, it writes %d", o.Kind, o.Key, o.TraceID, len(o.Written), o.Items)
				}
			}
			for _, w := range o.Written {
				f.Checked[InvAckedPresent]++
				r, ok := revs[revKey{w.Entity, w.Record, w.Revision}]
				switch {
				case !ok:
					bad(InvAckedPresent, "%s %s (trace %s) acknowledged %s/%s revision %d, which the journal does not hold", o.Kind, o.Key, o.TraceID, w.Entity, w.Record, w.Revision)
				case w.Tombstoned != (r.Lifecycle == "tombstoned"):
					bad(InvAckedPresent, "%s %s acknowledged %s/%s revision %d tombstoned=%v, the journal says %s", o.Kind, o.Key, w.Entity, w.Record, w.Revision, w.Tombstoned, r.Lifecycle)
				}
				f.Checked[InvAuditPresent]++
				found := false
				for _, a := range audit {
					found = found || (a.Entity == w.Entity && a.Revision == w.Revision)
				}
				if !found {
					bad(InvAuditPresent, "%s %s (trace %s) acknowledged %s/%s revision %d without an audit row", o.Kind, o.Key, o.TraceID, w.Entity, w.Record, w.Revision)
				}
			}
		case o.Refused():
			f.Checked[InvRefusedNothing]++
			if len(audit) > 0 {
				bad(InvRefusedNothing, "%s %s was refused (%d %s) but wrote %d audited revisions", o.Kind, o.Key, o.last().Status, o.last().Code, len(audit))
			}
		default:
			if len(audit) > 0 {
				f.LandedUnanswered++
			}
		}
		f.Checked[InvOnce]++
		if n := len(audit); n > max(o.Items, 1) {
			bad(InvOnce, "%s %s (trace %s) made %d audited writes, at most %d expected", o.Kind, o.Key, o.TraceID, n, max(o.Items, 1))
		}
	}

	// The journal is whole: every current row is the last of a contiguous
	// run of revisions with the same lifecycle, every revision's record has
	// a current row, and every revision has its audit row.
	revCount := map[auditKey]int{}
	for k, list := range byRecord {
		sort.Slice(list, func(i, j int) bool { return list[i].Revision < list[j].Revision })
		f.Checked[InvJournal]++
		for i, r := range list {
			revCount[auditKey{r.Entity, r.Revision}]++
			if r.Revision != int64(i+1) {
				bad(InvJournal, "%s/%s: revision %d where %d was expected (a gap in the journal)", k.Entity, k.Record, r.Revision, i+1)
				break
			}
		}
		last := list[len(list)-1]
		cur, ok := s.DB.Current[k]
		switch {
		case !ok:
			bad(InvJournal, "%s/%s: %d revisions in the journal, no current row (half-written)", k.Entity, k.Record, len(list))
		case cur.Revision != last.Revision || cur.Lifecycle != last.Lifecycle:
			bad(InvJournal, "%s/%s: current row at revision %d %s, journal at %d %s", k.Entity, k.Record, cur.Revision, cur.Lifecycle, last.Revision, last.Lifecycle)
		}
	}
	for k, cur := range s.DB.Current {
		f.Checked[InvJournal]++
		if _, ok := byRecord[k]; !ok {
			bad(InvJournal, "%s/%s: current row at revision %d with no revision in the journal (half-written)", k.Entity, k.Record, cur.Revision)
		}
	}
	keys := make([]auditKey, 0, len(revCount))
	for k := range revCount {
		keys = append(keys, k)
	}
	for k := range auditCount {
		if _, ok := revCount[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Entity != keys[j].Entity {
			return keys[i].Entity < keys[j].Entity
		}
		return keys[i].Revision < keys[j].Revision
	})
	for _, k := range keys {
		f.Checked[InvAuditPresent]++
		if r, a := revCount[k], auditCount[k]; r != a {
			bad(InvAuditPresent, "%s revision %d: %d journal rows, %d audit rows", k.Entity, k.Revision, r, a)
		}
	}
	// Creates carry a code unique to their operation: two first revisions
	// with one code are one create applied twice.
	codes := map[string]int{}
	for _, r := range s.DB.Revisions {
		if c, ok := r.Data["code"].(string); ok && r.Revision == 1 {
			codes[r.Entity+"/"+c]++
		}
	}
	for c, n := range codes {
		f.Checked[InvOnce]++
		if n > 1 {
			bad(InvOnce, "%d records created with the one code %s", n, c)
		}
	}

	// Answers: no 5xx and no silence outside the fault windows; inside them
	// only 503.
	excused := func(host int, t time.Time) bool {
		for _, w := range s.Windows {
			if w.covers(host, t, s.Grace) {
				return true
			}
		}
		return false
	}
	for _, o := range s.Ops {
		for _, a := range o.Attempts {
			f.Checked[InvNo5xx]++
			f.Checked[InvOnly503]++
			f.Checked[InvAnswered]++
			in := excused(a.Host, a.At) || excused(a.Host, a.At.Add(a.Latency))
			switch {
			case a.Status == 0 && !in:
				bad(InvAnswered, "%s on host %d at %s: no answer (%s)", o.Kind, a.Host, stamp(a.At), a.Err)
			case a.Status >= 500 && !in:
				bad(InvNo5xx, "%s on host %d at %s: %d %s", o.Kind, a.Host, stamp(a.At), a.Status, a.Code)
			case a.Status >= 500 && a.Status != 503:
				bad(InvOnly503, "%s on host %d at %s: %d %s inside a fault window", o.Kind, a.Host, stamp(a.At), a.Status, a.Code)
			}
		}
	}

	// Events: every captured delivery delivered, received and acknowledged
	// once per generation (again only inside a crash's window), every
	// acknowledged event captured, every write's events captured.
	type genKey struct {
		ID         string
		Generation int
	}
	acks := map[genKey][]Received{}
	ackedIDs := map[string]Received{}
	for _, r := range s.Received {
		if r.Status >= 200 && r.Status < 300 {
			acks[genKey{r.ID, r.Generation}] = append(acks[genKey{r.ID, r.Generation}], r)
			ackedIDs[r.ID] = r
		}
	}
	captured := map[string]bool{}
	for _, d := range s.DB.Deliveries {
		captured[d.EventID] = true
		if slices.Contains(s.GoneHooks, d.Hook) {
			f.Checked[InvGoneDead]++
			// Dead-lettered at the first answer: an earlier attempt may only
			// be one a fault cut off before its answer was recorded.
			if d.State != "dead_lettered" || d.AnsweredBefore != 0 {
				bad(InvGoneDead, "event %s (%s) to the 410 destination is %s after %d attempts (%d answered before the last), want dead_lettered at the first answer", d.EventID, d.Hook, d.State, d.Attempt, d.AnsweredBefore)
			}
			continue
		}
		f.Checked[InvEventSettled]++
		if d.State != "delivered" {
			bad(InvEventSettled, "event %s (%s, %s) is %s after %d attempts of generation %d", d.EventID, d.Hook, d.Handler, d.State, d.Attempt, d.Generation)
		}
		if d.Handler != "url" {
			continue
		}
		f.Checked[InvEventReceived]++
		if d.State == "delivered" && len(acks[genKey{d.EventID, d.Generation}]) == 0 {
			bad(InvEventReceived, "event %s (%s) is delivered in generation %d, the receiver never acknowledged it", d.EventID, d.Hook, d.Generation)
		}
	}
	gens := make([]genKey, 0, len(acks))
	for k := range acks {
		gens = append(gens, k)
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i].ID < gens[j].ID })
	// An acknowledgement received just before a crash may never be
	// recorded (the process or its database went away first): the delivery
	// is sent again, which at-least-once delivery allows.
	crash := func(t time.Time) bool {
		for _, w := range s.Windows {
			crashed := w.Fault == "kill-host" || w.Fault == "kill-worker" || w.Fault == "postgres-restart"
			if crashed && !t.Before(w.Start.Add(-s.Grace)) && !t.After(w.End.Add(s.Grace)) {
				return true
			}
		}
		return false
	}
	for _, k := range gens {
		list := acks[k]
		f.Checked[InvEventOnce]++
		f.Checked[InvEventPhantom]++
		if !captured[k.ID] {
			bad(InvEventPhantom, "the receiver acknowledged event %s, which the database never captured", k.ID)
		}
		for _, again := range list[1:] {
			if crash(list[0].At) || crash(again.At) {
				f.Redelivered++
				continue
			}
			bad(InvEventOnce, "event %s generation %d acknowledged at %s and again at %s, outside every crash window", k.ID, k.Generation, stamp(list[0].At), stamp(again.At))
		}
	}
	if s.ExpectedEvents != nil {
		type evKey struct {
			Type, Record string
			Revision     int64
		}
		got := map[evKey]int{}
		for _, r := range ackedIDs {
			got[evKey{r.Type, r.Record, r.Revision}]++
		}
		for _, list := range byRecord {
			var prev *Revision
			for _, r := range list {
				for _, typ := range s.ExpectedEvents(prev, r) {
					f.Checked[InvEventCaptured]++
					if got[evKey{typ, r.Record, r.Revision}] == 0 {
						bad(InvEventCaptured, "%s/%s revision %d: no %s event received", r.Entity, r.Record, r.Revision, typ)
					}
				}
				prev = r
			}
		}
	}

	// Jobs: finished, or in a state their kind keeps by design.
	periodic := map[string]bool{}
	for _, k := range s.PeriodicJobs {
		periodic[k] = true
	}
	for _, j := range s.DB.Jobs {
		f.Checked[InvJobsSettled]++
		switch {
		case j.State == "completed", j.State == "cancelled":
		case periodic[j.Kind] && (j.State == "scheduled" || j.State == "available" || j.State == "running"):
		default:
			bad(InvJobsSettled, "job %d (%s) is %s %s", j.ID, j.Kind, j.State, j.Error)
		}
	}
	// Reviews: every submitted request of an automatic entity reviewed and
	// applied, none waiting for an operator.
	for _, r := range s.DB.Requests {
		if !slices.Contains(s.AutomaticRequests, r.Entity) {
			continue
		}
		f.Checked[InvReviewSettled]++
		if r.State == "submitted" || r.Attention != "" || r.ApplicationAttention != "" {
			bad(InvReviewSettled, "%s/%s is %s (submission %q, result feed %q, attention %q; automatic application %q, attention %q)",
				r.Entity, r.Record, r.State, r.Submission, r.Delivery, r.Attention, r.Application, r.ApplicationAttention)
		}
	}
	checkVerifications(s, &f, bad)
	checkDrains(s, &f, bad)
	checkFootprints(s, &f, bad)
	checkIngestions(s, &f, bad)
	sort.SliceStable(f.Violations, func(i, j int) bool { return f.Violations[i].Invariant < f.Violations[j].Invariant })
	return f
}

// checkVerifications: every acknowledged upload's content has its verdict,
// the one the scanner gives that content, and no verdict is left pending.
func checkVerifications(s *State, f *Findings, bad func(inv, format string, args ...any)) {
	type key struct{ SHA256, ContentType string }
	verdicts := map[key]Verification{}
	for _, v := range s.DB.Verifications {
		verdicts[key{v.SHA256, v.ContentType}] = v
		f.Checked[InvVerification]++
		if v.Verdict != "approved" && v.Verdict != "rejected" {
			bad(InvVerification, "the verification of %s (%s) is %s after %d attempts", v.SHA256, v.ContentType, v.Verdict, v.Attempts)
		}
	}
	for _, o := range s.Ops {
		if o.Upload == nil || !o.Acked() {
			continue
		}
		f.Checked[InvVerification]++
		v, ok := verdicts[key{o.Upload.SHA256, o.Upload.ContentType}]
		switch {
		case !ok:
			bad(InvVerification, "%s %s (trace %s) uploaded %s, which has no verification", o.Kind, o.Key, o.TraceID, o.Upload.SHA256)
		case v.Verdict != o.Upload.Want && (v.Verdict == "approved" || v.Verdict == "rejected"):
			bad(InvVerification, "%s %s uploaded %s: verdict %s, the scanner gives %s", o.Kind, o.Key, o.Upload.SHA256, v.Verdict, o.Upload.Want)
		}
	}
}

// checkDrains: a host stopped with SIGTERM answers every request sent to it
// before the SIGTERM that was still in flight, and those it accepts during
// its drain delay, without a 5xx.
func checkDrains(s *State, f *Findings, bad func(inv, format string, args ...any)) {
	for _, w := range s.Windows {
		if w.Fault != "term-host" {
			continue
		}
		until := w.Start.Add(w.Drain / 2)
		for _, o := range s.Ops {
			for _, a := range o.Attempts {
				if a.Host != w.Host || !a.At.Before(until) {
					continue
				}
				if a.At.Add(a.Latency).Before(w.Start) {
					continue // over before the SIGTERM
				}
				f.Checked[InvDrain]++
				switch {
				case a.Status == 0:
					bad(InvDrain, "%s on host %d sent at %s, %v before its SIGTERM at %s: no answer (%s)", o.Kind, a.Host, stamp(a.At), w.Start.Sub(a.At).Round(time.Millisecond), stamp(w.Start), a.Err)
				case a.Status >= 500:
					bad(InvDrain, "%s on host %d sent at %s during its drain (SIGTERM at %s): %d %s", o.Kind, a.Host, stamp(a.At), stamp(w.Start), a.Status, a.Code)
				}
			}
		}
	}
}

// checkFootprints: goroutines and heap at the end within the bounds of the
// warm-up sample.
func checkFootprints(s *State, f *Findings, bad func(inv, format string, args ...any)) {
	for _, p := range s.Footprints {
		f.Checked[InvFlat]++
		if p.EndGoroutines > p.WarmGoroutines+FlatGoroutineSlack {
			bad(InvFlat, "%s: %d goroutines at the end, %d after warm-up (at most %d more allowed)", p.Process, p.EndGoroutines, p.WarmGoroutines, FlatGoroutineSlack)
		}
		if limit := FlatHeapFactor*p.WarmHeap + FlatHeapSlack; p.EndHeap > limit {
			bad(InvFlat, "%s: heap in use %d bytes at the end, %d after warm-up (at most %d allowed)", p.Process, p.EndHeap, p.WarmHeap, limit)
		}
	}
}

// stamp formats t for a finding.
func stamp(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// checkIngestions: every ingestion run the harness drove is complete, each
// of its chunks committed once, and every line of its input is one record
// of the entity (revision 1, current, audited), written by the commit of
// the chunk that holds the line; no record of the entity comes from
// anywhere else, and the entity's audit holds one chunk entry per chunk
// with as many creates under its trace id as the chunk has items.
func checkIngestions(s *State, f *Findings, bad func(inv, format string, args ...any)) {
	if len(s.Ingestions) == 0 {
		return
	}
	runs := map[string]IngestRun{}
	for _, r := range s.DB.IngestRuns {
		runs[r.RunID] = r
	}
	chunks := map[string][]IngestChunk{}
	for _, c := range s.DB.IngestChunks {
		chunks[c.RunID] = append(chunks[c.RunID], c)
	}
	type commitKey struct{ Entity, Commit string }
	byCommit := map[commitKey][]*Revision{}
	firsts := map[string]map[string][]*Revision{} // entity → code → first revisions
	for i := range s.DB.Revisions {
		r := &s.DB.Revisions[i]
		byCommit[commitKey{r.Entity, r.Commit}] = append(byCommit[commitKey{r.Entity, r.Commit}], r)
		if r.Revision != 1 {
			continue
		}
		if firsts[r.Entity] == nil {
			firsts[r.Entity] = map[string][]*Revision{}
		}
		code, _ := r.Data["code"].(string)
		firsts[r.Entity][code] = append(firsts[r.Entity][code], r)
	}
	wantCodes := map[string]map[string]bool{} // entity → every code of its inputs
	var wantChunkItems = map[string][]int64{} // entity → the item counts of its committed chunks
	for _, in := range s.Ingestions {
		if wantCodes[in.Entity] == nil {
			wantCodes[in.Entity] = map[string]bool{}
		}
		for _, c := range in.Codes {
			wantCodes[in.Entity][c] = true
		}
		f.Checked[InvIngestion]++
		run, ok := runs[in.RunID]
		switch {
		case in.RunID == "":
			bad(InvIngestion, "the ingestion of %d %s rows never opened a run", len(in.Codes), in.Entity)
		case !ok:
			bad(InvIngestion, "run %s is not in the database", in.RunID)
		case run.Status != "complete" || run.CommittedItems != run.ItemCount || run.NextChunk != run.ChunkCount || run.ItemCount != int64(len(in.Codes)):
			bad(InvIngestion, "run %s is %s with %d of %d items committed (chunk %d of %d); its input has %d lines",
				in.RunID, run.Status, run.CommittedItems, run.ItemCount, run.NextChunk, run.ChunkCount, len(in.Codes))
		}
		list := chunks[in.RunID]
		sort.Slice(list, func(i, j int) bool { return list[i].Index < list[j].Index })
		var end int64
		for i, c := range list {
			f.Checked[InvIngestion]++
			wantChunkItems[in.Entity] = append(wantChunkItems[in.Entity], c.Items)
			if c.Index != int64(i) || c.EndItem-c.Items != end || c.EndItem > int64(len(in.Codes)) {
				bad(InvIngestion, "run %s: chunk %d holds items %d-%d, where chunk %d from item %d was expected", in.RunID, c.Index, c.EndItem-c.Items+1, c.EndItem, i, end+1)
				break
			}
			end = c.EndItem
			want := slices.Clone(in.Codes[c.EndItem-c.Items : c.EndItem])
			var got []string
			for _, r := range byCommit[commitKey{in.Entity, c.Commit}] {
				code, _ := r.Data["code"].(string)
				got = append(got, code)
				if cur, ok := s.DB.Current[RecordKey{r.Entity, r.Record}]; r.Revision != 1 || !ok || cur.Revision != 1 || cur.Lifecycle != "active" {
					bad(InvIngestion, "run %s chunk %d: %s/%s (%s) is at revision %d, its current row at %d %s", in.RunID, c.Index, r.Entity, r.Record, code, r.Revision, cur.Revision, cur.Lifecycle)
				}
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				bad(InvIngestion, "run %s chunk %d (lines %d-%d): its commit wrote %d records, %d of them the chunk's lines", in.RunID, c.Index, c.EndItem-c.Items+1, c.EndItem, len(got), countCommon(got, want))
			}
		}
		if int64(len(list)) != run.ChunkCount && ok {
			bad(InvIngestion, "run %s: %d chunks committed of %d", in.RunID, len(list), run.ChunkCount)
		}
		for line, code := range in.Codes {
			f.Checked[InvIngestion]++
			if n := len(firsts[in.Entity][code]); n != 1 {
				bad(InvIngestion, "run %s: line %d (%s) is in %s %d times", in.RunID, line+1, code, in.Entity, n)
			}
		}
	}
	// No other record of the entities, and the audit: per entity, one
	// chunk entry per committed chunk, with the chunk's creates under its
	// trace id.
	for entity, codes := range wantCodes {
		for code, list := range firsts[entity] {
			if !codes[code] {
				bad(InvIngestion, "%s holds %d records with the code %q, which no input holds", entity, len(list), code)
			}
		}
		creates := map[string]int64{}
		var traces []string
		for _, a := range s.DB.Audit {
			switch {
			case a.Entity != entity || a.Outcome != "succeeded":
			case a.Operation == "create" && a.Revision == 1:
				creates[a.TraceID]++
			case a.Operation == AuditIngestionChunk:
				traces = append(traces, a.TraceID)
			}
		}
		var got []int64
		var audited int64
		for _, t := range traces {
			got = append(got, creates[t])
			audited += creates[t]
		}
		want := slices.Clone(wantChunkItems[entity])
		slices.Sort(got)
		slices.Sort(want)
		f.Checked[InvIngestion]++
		if !slices.Equal(got, want) {
			bad(InvIngestion, "%s: %d chunk audit entries with %v creates under their trace ids; the committed chunks hold %v items", entity, len(got), got, want)
		}
		var total int64
		for _, n := range creates {
			total += n
		}
		if total != audited {
			bad(InvIngestion, "%s: %d creates audited, %d of them under a chunk's trace id", entity, total, audited)
		}
	}
}

// countCommon counts the elements two sorted lists share.
func countCommon(a, b []string) int {
	n := 0
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			n, i, j = n+1, i+1, j+1
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return n
}
