package hooks

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Run(m)) }

// whenHook returns a bound hook whose condition is when.
func whenHook(when *model.When) *bound {
	return &bound{hook: &model.Hook{ID: "h", Trigger: model.TriggerPatched, When: when}}
}

// personRecord returns a stored person record holding values.
func personRecord(values map[string]any) *store.Record {
	return &store.Record{ID: "0190b5a4-6f1e-7c3a-9d2b-4e5f6a7b8c9d", Revision: 2, Values: values}
}

// A fields condition holds when every one of its tests holds: each changed
// field differs between the stored before and after values (compared in
// their wire form), each beforeEquals literal equals the value before the
// write (a create has none), each afterEquals literal the value after it
// (a nil literal tests for null).
func TestFieldConditionsSelectTheWritesTheyDescribe(t *testing.T) {
	person := eventsPackage().EntityByID("person")
	noon := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	helsinki := noon.In(time.FixedZone("EET", 2*3600))
	changed := func(fields ...string) *model.When { return &model.When{Kind: model.WhenFields, Changed: fields} }
	before := func(field string, v any) *model.When {
		return &model.When{Kind: model.WhenFields, BeforeEquals: []*model.FieldTest{{Field: field, Value: v}}}
	}
	after := func(field string, v any) *model.When {
		return &model.When{Kind: model.WhenFields, AfterEquals: []*model.FieldTest{{Field: field, Value: v}}}
	}
	for _, tc := range []struct {
		name          string
		when          *model.When
		before, after map[string]any // before nil: a create
		want          bool
	}{
		{"no condition on a create", nil, nil, map[string]any{}, true},
		{"no condition on a patch", nil, map[string]any{"status": "active"}, map[string]any{"status": "active"}, true},
		{"changed: the field changed", changed("status"), map[string]any{"status": "active"}, map[string]any{"status": "inactive"}, true},
		{"changed: the field kept its value", changed("status"), map[string]any{"status": "active", "note": "a"}, map[string]any{"status": "active", "note": "b"}, false},
		{"changed: the field was set", changed("status"), map[string]any{}, map[string]any{"status": "active"}, true},
		{"changed: the field was cleared", changed("status"), map[string]any{"status": "active"}, map[string]any{}, true},
		{"changed: null stayed null", changed("status"), map[string]any{}, map[string]any{"note": "x"}, false},
		{"changed: a create has no before", changed("status"), nil, map[string]any{"status": "active"}, false},
		{"changed: one of two fields changed", changed("status", "age"), map[string]any{"status": "active", "age": int64(3)}, map[string]any{"status": "inactive", "age": int64(3)}, false},
		{"changed: both fields changed", changed("status", "age"), map[string]any{"status": "active", "age": int64(3)}, map[string]any{"status": "inactive", "age": int64(4)}, true},
		{"changed: the same instant in another zone", changed("seen"), map[string]any{"seen": noon}, map[string]any{"seen": helsinki}, false},
		{"changed: another instant", changed("seen"), map[string]any{"seen": noon}, map[string]any{"seen": noon.Add(time.Microsecond)}, true},
		{"beforeEquals: equal", before("status", "active"), map[string]any{"status": "active"}, map[string]any{"status": "inactive"}, true},
		{"beforeEquals: different", before("status", "active"), map[string]any{"status": "inactive"}, map[string]any{"status": "active"}, false},
		{"beforeEquals: a create has no before", before("status", nil), nil, map[string]any{}, false},
		{"beforeEquals null: was null", before("status", nil), map[string]any{}, map[string]any{"status": "active"}, true},
		{"afterEquals: equal", after("status", "inactive"), map[string]any{"status": "active"}, map[string]any{"status": "inactive"}, true},
		{"afterEquals: on a create", after("status", "inactive"), nil, map[string]any{"status": "inactive"}, true},
		{"afterEquals: different", after("status", "inactive"), map[string]any{}, map[string]any{"status": "active"}, false},
		{"afterEquals null: is null", after("status", nil), map[string]any{"status": "active"}, map[string]any{}, true},
		{"afterEquals null: is set", after("status", nil), map[string]any{}, map[string]any{"status": "active"}, false},
		{"afterEquals: an integer literal", after("age", json.Number("18")), nil, map[string]any{"age": int64(18)}, true},
		{"afterEquals: another integer", after("age", json.Number("18")), nil, map[string]any{"age": int64(19)}, false},
		{"afterEquals: a number is no string", after("age", "18"), nil, map[string]any{"age": int64(18)}, false},
		{"afterEquals: a timestamp literal in UTC", after("seen", "2026-03-01T12:00:00Z"), nil, map[string]any{"seen": helsinki}, true},
		{"every test must hold: all do",
			&model.When{Kind: model.WhenFields, Changed: []string{"status"}, AfterEquals: []*model.FieldTest{{Field: "status", Value: "inactive"}}},
			map[string]any{"status": "active"}, map[string]any{"status": "inactive"}, true},
		{"every test must hold: one does not",
			&model.When{Kind: model.WhenFields, Changed: []string{"status"}, AfterEquals: []*model.FieldTest{{Field: "status", Value: "inactive"}}},
			map[string]any{"status": "inactive"}, map[string]any{"status": "active"}, false},
		{"a fields condition ignores lifecycle lists",
			&model.When{Kind: model.WhenFields, Transitions: []string{"approve"}}, map[string]any{}, map[string]any{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := store.Change{Entity: person, Trigger: model.TriggerPatched, After: personRecord(tc.after)}
			if tc.before != nil {
				c.Before = personRecord(tc.before)
			} else {
				c.Trigger = model.TriggerCreated
			}
			if got := whenHook(tc.when).matches(c); got != tc.want {
				t.Fatalf("matches = %v, want %v", got, tc.want)
			}
		})
	}
}

// A lifecycle condition holds when each of its nonempty lists names the
// transition, the state reached and the review stage; a transition with no
// known stage never matches a stages list, and a change that is no request
// transition never matches at all.
func TestLifecycleConditionsSelectTheTransitionsTheyName(t *testing.T) {
	application := eventsPackage().EntityByID("application")
	approve := &store.Lifecycle{Transition: "approve", FromState: "submitted", ToState: "approved", ProposalVersion: 1, Stage: "legal"}
	noStage := &store.Lifecycle{Transition: "approve", FromState: "submitted", ToState: "approved", ProposalVersion: 1}
	lifecycle := func(transitions, toStates, stages []string) *model.When {
		return &model.When{Kind: model.WhenRequestLifecycle, Transitions: transitions, ToStates: toStates, Stages: stages}
	}
	for _, tc := range []struct {
		name string
		when *model.When
		l    *store.Lifecycle
		want bool
	}{
		{"no list", lifecycle(nil, nil, nil), approve, true},
		{"no list, no stage", lifecycle(nil, nil, nil), noStage, true},
		{"the transition named", lifecycle([]string{"reject", "approve"}, nil, nil), approve, true},
		{"another transition", lifecycle([]string{"reject"}, nil, nil), approve, false},
		{"the state reached", lifecycle(nil, []string{"approved"}, nil), approve, true},
		{"the state left is not the state reached", lifecycle(nil, []string{"submitted"}, nil), approve, false},
		{"the stage named", lifecycle(nil, nil, []string{"intake", "legal"}), approve, true},
		{"another stage", lifecycle(nil, nil, []string{"intake"}), approve, false},
		{"a stages list and no known stage", lifecycle(nil, nil, []string{"legal"}), noStage, false},
		{"all lists match", lifecycle([]string{"approve"}, []string{"approved"}, []string{"legal"}), approve, true},
		{"all lists but one match", lifecycle([]string{"approve"}, []string{"rejected"}, []string{"legal"}), approve, false},
		{"no transition: a record write", lifecycle(nil, nil, nil), nil, false},
		{"the lists are not field tests", &model.When{Kind: model.WhenRequestLifecycle, Changed: []string{"name"}}, approve, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := store.Change{Entity: application, Trigger: model.TriggerRequestLifecycle, After: personRecord(map[string]any{}), Lifecycle: tc.l}
			if got := whenHook(tc.when).matches(c); got != tc.want {
				t.Fatalf("matches = %v, want %v", got, tc.want)
			}
		})
	}
}

// The deduplication key is "sha256:" and the hex SHA-256 of the domain
// engine-lifecycle-event-v1 followed by the hook, entity, record id,
// proposal version, transition and workflow revision, each preceded by its
// length as a big-endian uint64 (docs/decisions/events.md), computed here
// apart from the code.
func TestTheDeduplicationKeyIsTheDocumentedDigest(t *testing.T) {
	l := &store.Lifecycle{Transition: "approve", FromState: "submitted", ToState: "approved", ProposalVersion: 2, Stage: "legal", EffectDigest: "sha256:00"}
	input := []byte("engine-lifecycle-event-v1")
	for _, part := range []string{"approved", "application", "0190b5a4-6f1e-7c3a-9d2b-4e5f6a7b8c9d", "2", "approve", "7"} {
		input = binary.BigEndian.AppendUint64(input, uint64(len(part)))
		input = append(input, part...)
	}
	sum := sha256.Sum256(input)
	want := "sha256:" + hex.EncodeToString(sum[:])
	if got := deduplicationKey("approved", "application", "0190b5a4-6f1e-7c3a-9d2b-4e5f6a7b8c9d", l, 7); got != want {
		t.Fatalf("key %s, want %s", got, want)
	}
}

// The same transition always has the same key (a retry or a replay of its
// event); any part of its identity that differs gives another key, and
// what is not part of it (the states, stage and effect digest, which the
// transition and revision already fix) does not.
func TestTheDeduplicationKeyNamesOneTransition(t *testing.T) {
	type parts struct {
		hook, entity, record string
		l                    store.Lifecycle
		revision             int64
	}
	key := func(p parts) string { return deduplicationKey(p.hook, p.entity, p.record, &p.l, p.revision) }
	base := parts{"approved", "application", "0190b5a4-6f1e-7c3a-9d2b-4e5f6a7b8c9d",
		store.Lifecycle{Transition: "approve", FromState: "submitted", ToState: "approved", ProposalVersion: 2, Stage: "legal", EffectDigest: "sha256:00"}, 7}
	k := key(base)
	if k != key(base) {
		t.Fatal("the same transition has two keys")
	}
	for name, edit := range map[string]func(p *parts){
		"hook":                 func(p *parts) { p.hook = "approved2" },
		"entity":               func(p *parts) { p.entity = "application2" },
		"record":               func(p *parts) { p.record = "0190b5a4-6f1e-7c3a-9d2b-4e5f6a7b8c9e" },
		"proposal version":     func(p *parts) { p.l.ProposalVersion = 3 },
		"transition":           func(p *parts) { p.l.Transition = "reject" },
		"workflow revision":    func(p *parts) { p.revision = 8 },
		"a hook/entity border": func(p *parts) { p.hook, p.entity = "approveda", "pplication" },
		"an entity/id border":  func(p *parts) { p.entity, p.record = "application0", "190b5a4-6f1e-7c3a-9d2b-4e5f6a7b8c9d" },
	} {
		p := base
		edit(&p)
		if key(p) == k {
			t.Errorf("a different %s gives the same key", name)
		}
	}
	for name, edit := range map[string]func(p *parts){
		"from state":    func(p *parts) { p.l.FromState = "draft" },
		"to state":      func(p *parts) { p.l.ToState = "applied" },
		"stage":         func(p *parts) { p.l.Stage = "" },
		"effect digest": func(p *parts) { p.l.EffectDigest = "sha256:11" },
	} {
		p := base
		edit(&p)
		if key(p) != k {
			t.Errorf("the %s changed the key", name)
		}
	}
}

// Capture, in the write's own transaction, stores one delivery for each
// hook of the change's entity whose trigger is the change's and whose
// condition holds, and none for other entities' hooks, other triggers or
// hooks without a handler. Each delivery carries its hook's policy as the
// destination tightened it, and a lifecycle event the key of its
// transition.
func TestCaptureStoresADeliveryForEachSelectedHook(t *testing.T) {
	ctx := context.Background()
	created := urlHook("person-created", "crm")
	activated := urlHook("person-activated", "crm")
	activated.When = &model.When{Kind: model.WhenFields, AfterEquals: []*model.FieldTest{{Field: "status", Value: "active"}}}
	statusChanged := urlHook("person-status-changed", "crm")
	statusChanged.Trigger = model.TriggerPatched
	statusChanged.When = &model.When{Kind: model.WhenFields, Changed: []string{"status"}}
	noHandler := urlHook("person-noted", "")
	noHandler.Handler = nil
	approved := urlHook("application-approved", "crm")
	approved.Trigger = model.TriggerRequestLifecycle
	approved.When = &model.When{Kind: model.WhenRequestLifecycle, ToStates: []string{"approved"}}
	pkg := eventsPackage(created, activated, statusChanged, noHandler, approved)
	pkg.Entities = append(pkg.Entities, &model.Entity{ID: "household", Route: "households", MutationMode: model.Mutable,
		Fields: []*model.Field{{ID: "name", APIName: "name", Type: model.TypeString}}, Hooks: []*model.Hook{urlHook("household-created", "crm")}})
	var err error
	if pkg.Revision, err = model.ComputeRevision(pkg); err != nil {
		t.Fatal(err)
	}
	d := newDestination("crm")
	d.MaximumAttempts, d.AttemptTimeoutMs, d.PayloadRetentionSeconds = 3, 2000, 3600
	ev, err := New(configFor(pkg, d))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, storetest.NewPool(t), pkg, store.Options{Capture: ev})
	if err != nil {
		t.Fatal(err)
	}

	person, application := pkg.EntityByID("person"), pkg.EntityByID("application")
	personID, requestID := uuid.NewString(), uuid.NewString()
	inactive := &store.Record{ID: personID, Revision: 1, Values: map[string]any{"name": "Ada", "status": "inactive"}}
	noted := &store.Record{ID: personID, Revision: 2, Values: map[string]any{"name": "Ada", "status": "inactive", "note": "n"}}
	active := &store.Record{ID: personID, Revision: 3, Values: map[string]any{"name": "Ada", "status": "active", "note": "n"}}
	request := &store.Record{ID: requestID, Revision: 4, Values: map[string]any{"name": "Lind"}}
	approve := &store.Lifecycle{Transition: "approve", FromState: "submitted", ToState: "approved", ProposalVersion: 2, EffectDigest: "sha256:01"}
	reject := &store.Lifecycle{Transition: "reject", FromState: "submitted", ToState: "rejected", ProposalVersion: 2}
	_, _, err = st.Write(ctx, nil, func(w *store.Writer) (*store.Outcome, error) {
		for _, c := range []store.Change{
			{Entity: person, Trigger: model.TriggerCreated, After: inactive},                // person-created only
			{Entity: person, Trigger: model.TriggerPatched, Before: inactive, After: noted}, // none: status kept
			{Entity: person, Trigger: model.TriggerPatched, Before: noted, After: active},   // person-status-changed
			{Entity: application, Trigger: model.TriggerRequestLifecycle, After: request, Lifecycle: approve},
			{Entity: application, Trigger: model.TriggerRequestLifecycle, After: request, Lifecycle: reject}, // none
		} {
			if err := w.Capture(ctx, c); err != nil {
				return nil, err
			}
		}
		return &store.Outcome{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}

	list, err := st.ListDeliveries(ctx, "", store.MaxDeliveryList)
	if err != nil {
		t.Fatal(err)
	}
	byHook := map[string]store.DeliverySummary{}
	var hooks []string
	for _, s := range list {
		byHook[s.Hook] = s
		hooks = append(hooks, s.Entity+"/"+s.Hook)
	}
	slices.Sort(hooks)
	if want := []string{"application/application-approved", "person/person-created", "person/person-status-changed"}; !reflect.DeepEqual(hooks, want) {
		t.Fatalf("captured %v, want %v", hooks, want)
	}

	for _, id := range []string{"person-created", "application-approved"} {
		got, err := st.Delivery(ctx, byHook[id].DeliveryID)
		if err != nil {
			t.Fatal(err)
		}
		if got.MaximumAttempts != 3 || got.AttemptTimeoutMs != 2000 || got.PayloadExpiresAt.Sub(got.CapturedAt) != time.Hour ||
			!reflect.DeepEqual(got.RetryDelaysMs, []int32{5000, 30000, 120000, 600000, 1800000, 3600000, 10800000, 21600000, 43200000}) {
			t.Errorf("%s: policy %d attempts, %d ms, retained %s, delays %v", id, got.MaximumAttempts, got.AttemptTimeoutMs,
				got.PayloadExpiresAt.Sub(got.CapturedAt), got.RetryDelaysMs)
		}
		if got.DestinationID != "crm" || got.BindingDigest != d.BindingDigest() || got.State != store.DeliveryPending {
			t.Errorf("%s: destination %s binding %s state %s", id, got.DestinationID, got.BindingDigest, got.State)
		}
	}

	got, err := st.Delivery(ctx, byHook["application-approved"].DeliveryID)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Type string `json:"type"`
		Data struct {
			Values  map[string]any `json:"values"`
			Request struct {
				DeduplicationKey string  `json:"deduplicationKey"`
				WorkflowRevision int64   `json:"workflowRevision"`
				Stage            *string `json:"stage"`
			} `json:"request"`
		} `json:"data"`
	}
	if err := json.Unmarshal(got.Payload, &body); err != nil {
		t.Fatal(err)
	}
	if body.Type != "application-approved-v1" || !reflect.DeepEqual(body.Data.Values, map[string]any{"applicantName": "Lind"}) {
		t.Errorf("body %s", got.Payload)
	}
	if want := deduplicationKey("application-approved", "application", requestID, approve, 4); body.Data.Request.DeduplicationKey != want ||
		body.Data.Request.WorkflowRevision != 4 || body.Data.Request.Stage != nil {
		t.Errorf("request member of %s: want key %s", got.Payload, want)
	}
}
