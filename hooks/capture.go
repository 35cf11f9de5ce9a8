package hooks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/store"
)

// Causation is the position of an event in a chain of events: Hop 0 and
// Root its own id for an event caused by a client's write; a write made on
// behalf of an event (a local handler's output, carried in the context with
// WithCausation) captures events at that event's hop plus one, under the
// same root.
type Causation struct {
	Hop  int    `json:"hop"`
	Root string `json:"root"`
}

type causationKey struct{}

// WithCausation marks ctx as acting on behalf of the event of causation c:
// events captured by writes under it continue c's chain.
func WithCausation(ctx context.Context, c Causation) context.Context {
	return context.WithValue(ctx, causationKey{}, c)
}

// body is the event envelope: eight members, written in canonical order.
type body struct {
	Causation  Causation `json:"causation"`
	Data       data      `json:"data"`
	DataSchema string    `json:"dataschema"`
	ID         string    `json:"id"`
	Source     string    `json:"source"`
	Subject    subject   `json:"subject"`
	Time       string    `json:"time"`
	Type       string    `json:"type"`
}

type data struct {
	Entity          string         `json:"entity"`
	PackageRevision string         `json:"packageRevision"`
	RecordID        string         `json:"recordId"`
	Request         *request       `json:"request,omitempty"`
	Revision        int64          `json:"revision"`
	Trigger         string         `json:"trigger"`
	Values          map[string]any `json:"values"`
}

type request struct {
	DeduplicationKey string  `json:"deduplicationKey"`
	EffectDigest     *string `json:"effectDigest"`
	FromState        string  `json:"fromState"`
	ProposalVersion  int64   `json:"proposalVersion"`
	Stage            *string `json:"stage"`
	ToState          string  `json:"toState"`
	Transition       string  `json:"transition"`
	WorkflowRevision int64   `json:"workflowRevision"`
}

type subject struct {
	RecordReference string `json:"recordReference"`
	RecordRevision  int64  `json:"recordRevision"`
}

// Capture implements store.Capturer: for each bound hook of the change's
// entity and trigger whose conditions hold, it stores one delivery of the
// event's body (declared projection only) and its job, in the write's
// transaction.
func (ev *Events) Capture(ctx context.Context, w *store.Writer, c store.Change) error {
	for _, h := range c.Entity.Hooks {
		b := ev.hooks[h.ID]
		if b == nil || h.Trigger != c.Trigger || !b.matches(c) {
			continue
		}
		if err := ev.capture(ctx, w, b, c); err != nil {
			return err
		}
	}
	return nil
}

func (ev *Events) capture(ctx context.Context, w *store.Writer, b *bound, c store.Change) error {
	id := uuid.NewString()
	cause := Causation{Hop: 0, Root: id}
	if parent, ok := ctx.Value(causationKey{}).(Causation); ok {
		cause = Causation{Hop: parent.Hop + 1, Root: parent.Root}
		if cause.Hop > MaxHop {
			return ErrLoop
		}
	}
	rec := c.After
	vals := make(map[string]any, len(b.hook.Projection))
	for _, fid := range b.hook.Projection {
		f := c.Entity.Field(fid)
		vals[f.APIName] = values.Encode(f, rec.Values[fid])
	}
	now := w.Now()
	doc := body{
		Causation:  cause,
		Data:       data{Entity: c.Entity.ID, PackageRevision: ev.cfg.Package.Revision, RecordID: rec.ID, Revision: rec.Revision, Trigger: c.Trigger, Values: vals},
		DataSchema: b.dataschema,
		ID:         id,
		Source:     ev.source,
		Subject:    subject{RecordReference: ev.cfg.RecordReference(c.Entity.ID, rec.ID), RecordRevision: rec.Revision},
		Time:       store.FormatTime(now),
		Type:       b.hook.EventType,
	}
	if l := c.Lifecycle; l != nil {
		doc.Data.Request = &request{
			DeduplicationKey: deduplicationKey(b.hook.ID, c.Entity.ID, rec.ID, l, rec.Revision),
			EffectDigest:     nullable(l.EffectDigest),
			FromState:        l.FromState,
			ProposalVersion:  l.ProposalVersion,
			Stage:            nullable(l.Stage),
			ToState:          l.ToState,
			Transition:       l.Transition,
			WorkflowRevision: rec.Revision,
		}
	}
	payload, err := canonjson.Marshal(doc)
	if err != nil {
		return fmt.Errorf("hooks: event %s: %w", b.hook.ID, err)
	}
	if len(payload) > b.policy.MaximumPayloadBytes {
		return fmt.Errorf("hooks: event %s: the captured body is %d bytes, more than the compiled %d", b.hook.ID, len(payload), b.policy.MaximumPayloadBytes)
	}
	d := &store.Delivery{
		DeliveryID: uuid.NewString(), EventID: id, EntityID: c.Entity.ID, HookID: b.hook.ID, HandlerKind: b.hook.Handler.Kind,
		PackageRevision: ev.cfg.Package.Revision, MaximumAttempts: b.policy.MaximumAttempts, AttemptTimeoutMs: b.policy.AttemptTimeoutMs,
		Payload: payload, PayloadDigest: canonjson.DigestBytes(payload), CausationHop: cause.Hop,
		PayloadExpiresAt: now.Add(time.Duration(b.policy.PayloadRetentionSeconds) * time.Second),
	}
	for _, ms := range b.policy.RetryDelaysMs {
		d.RetryDelaysMs = append(d.RetryDelaysMs, int32(ms))
	}
	if b.dest != nil {
		d.DestinationID, d.BindingDigest = b.dest.ID, b.binding
	} else {
		d.ModuleDigest = b.module.SHA256
	}
	return w.InsertDelivery(ctx, d)
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// deduplicationKey names one lifecycle transition of one request for its
// receivers: stable across retries and replay, distinct per transition.
func deduplicationKey(hook, entity, recordID string, l *store.Lifecycle, workflowRevision int64) string {
	var buf []byte
	buf = append(buf, "engine-lifecycle-event-v1"...)
	for _, v := range []string{hook, entity, recordID, strconv.FormatInt(l.ProposalVersion, 10), l.Transition, strconv.FormatInt(workflowRevision, 10)} {
		buf = appendLP(buf, []byte(v))
	}
	sum := sha256.Sum256(buf)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// matches evaluates the hook's compiled condition on the change: every
// nonempty test must hold.
func (b *bound) matches(c store.Change) bool {
	w := b.hook.When
	if w == nil {
		return true
	}
	if w.Kind == model.WhenRequestLifecycle {
		l := c.Lifecycle
		if l == nil {
			return false
		}
		return (len(w.Transitions) == 0 || slices.Contains(w.Transitions, l.Transition)) &&
			(len(w.ToStates) == 0 || slices.Contains(w.ToStates, l.ToState)) &&
			(len(w.Stages) == 0 || (l.Stage != "" && slices.Contains(w.Stages, l.Stage)))
	}
	e := c.Entity
	for _, fid := range w.Changed {
		f := e.Field(fid)
		if c.Before == nil || bytes.Equal(wire(f, c.Before.Values[fid]), wire(f, c.After.Values[fid])) {
			return false
		}
	}
	for _, t := range w.BeforeEquals {
		if c.Before == nil || !equalsLiteral(e.Field(t.Field), c.Before.Values[t.Field], t.Value) {
			return false
		}
	}
	for _, t := range w.AfterEquals {
		if !equalsLiteral(e.Field(t.Field), c.After.Values[t.Field], t.Value) {
			return false
		}
	}
	return true
}

// wire returns the canonical JSON of a stored value's wire form.
func wire(f *model.Field, v any) []byte {
	b, err := canonjson.Marshal(values.Encode(f, v))
	if err != nil {
		return []byte("!") // never equal to a literal
	}
	return b
}

// equalsLiteral compares a stored value with a compiled literal (a wire
// value; nil tests for null) by their canonical JSON.
func equalsLiteral(f *model.Field, stored, literal any) bool {
	want, err := canonjson.Marshal(literal)
	if err != nil {
		return false
	}
	return bytes.Equal(wire(f, stored), want)
}
