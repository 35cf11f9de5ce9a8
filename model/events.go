package model

import (
	"slices"
	"time"
)

// Hook triggers.
const (
	TriggerCreated          = "created"
	TriggerPatched          = "patched"
	TriggerTombstoned       = "tombstoned"
	TriggerRequestLifecycle = "request_lifecycle"
)

// Condition kinds of a hook's when.
const (
	WhenFields           = "fields"
	WhenRequestLifecycle = "request_lifecycle"
)

// Handler kinds.
const (
	HandlerURL   = "url"
	HandlerTengo = "tengo"
	HandlerWASM  = "wasm"
)

// Hook declares an event on an entity: when it fires, what it carries, and
// who handles it. The hook id is the event id.
type Hook struct {
	ID string `json:"id"`
	// EventType is the versioned event type string, "<id>-v1".
	EventType string `json:"eventType"`
	// Phase is always "after": hooks run after the commit.
	Phase   string `json:"phase"`
	Trigger string `json:"trigger"`
	// When is nil when every matching trigger selects the event.
	When *When `json:"when,omitempty"`
	// Projection lists the captured fields (authored ids): target fields, or
	// request fields for a lifecycle event.
	Projection []string `json:"projection"`
	// Classification is the highest classification of every projected or
	// condition field, and for lifecycle events at least the request entity's.
	Classification string `json:"classification"`
	// Handler is nil for a hook without a handler (refused in production).
	Handler *Handler `json:"handler,omitempty"`
	// Delivery is the compiled delivery policy of a hook with a handler:
	// runtime configuration may tighten it, never widen it. Nil in packages
	// compiled before it was recorded: DefaultDelivery applies.
	Delivery *Delivery `json:"delivery,omitempty"`
}

// Delivery is a compiled delivery policy: how often and how long an event
// is tried, and how long its payload is kept for replay once its attempts
// are exhausted. The runtime configuration may tighten it, never widen it.
type Delivery struct {
	// RetryProfile names where the schedule comes from: RetryProfileDefault,
	// RetryProfileAuthored (the hook's retry member), or registry_v1 in
	// packages compiled before the day-long schedule.
	RetryProfile string `json:"retryProfile"`
	// MaximumAttempts counts every attempt of one generation (1 to
	// MaxDeliveryAttempts).
	MaximumAttempts int `json:"maximumAttempts"`
	// RetryDelaysMs[i] is the scheduled pause after failed attempt i+1 (the
	// last entry repeats); each MinRetryDelay to MaxRetryDelay, never
	// shorter than the one before. The pause taken is the step plus jitter,
	// or longer when the receiver asks for it (Retry-After).
	RetryDelaysMs []int `json:"retryDelaysMs"`
	// AttemptTimeoutMs bounds one attempt (100 to 10000).
	AttemptTimeoutMs int `json:"attemptTimeoutMs"`
	// PayloadRetentionSeconds is how long a captured payload is kept (up to
	// 30 days): a dead letter is replayable until then. It outlasts the
	// whole retry schedule, so no event expires while it is still retried.
	PayloadRetentionSeconds int64 `json:"payloadRetentionSeconds"`
	// MaximumPayloadBytes bounds the captured body.
	MaximumPayloadBytes int `json:"maximumPayloadBytes"`
}

// Retry profiles.
const (
	// RetryProfileDefault is the compiled default schedule (DefaultDelivery).
	RetryProfileDefault = "registry_v2"
	// RetryProfileAuthored is a schedule authored in the hook's retry member.
	RetryProfileAuthored = "authored"
)

// Bounds of a retry schedule.
const (
	// MaxDeliveryAttempts is the most attempts one generation may make.
	MaxDeliveryAttempts = 20
	// MinRetryDelay and MaxRetryDelay bound each step of a schedule.
	MinRetryDelay = 100 * time.Millisecond
	MaxRetryDelay = 24 * time.Hour
	// RetryJitter is the largest share of a step added to it as jitter: a
	// pause lasts from the step to the step plus this share of it.
	RetryJitter = 0.2
)

// DefaultRetryDelaysMs is the default schedule (profile registry_v2): ten
// attempts over about a day: 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 3 h,
// 6 h, 12 h (22 h 42 min 35 s before jitter, up to 27 h 15 min with it).
var DefaultRetryDelaysMs = []int{5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 10_800_000, 21_600_000, 43_200_000}

// DefaultDelivery returns the compiled default policy (profile
// registry_v2): 10 attempts on DefaultRetryDelaysMs, 5 s per attempt,
// payloads kept 7 days, at most 1 MiB.
func DefaultDelivery() *Delivery {
	return &Delivery{RetryProfile: RetryProfileDefault, MaximumAttempts: len(DefaultRetryDelaysMs) + 1,
		RetryDelaysMs: slices.Clone(DefaultRetryDelaysMs), AttemptTimeoutMs: 5000, PayloadRetentionSeconds: 7 * 24 * 3600,
		MaximumPayloadBytes: 1 << 20}
}

// RetryStep returns the scheduled pause after failed attempt n (from 1) of
// a schedule: its n-th step, the last one repeating; 0 for an empty one.
func RetryStep[T int | int32](delaysMs []T, n int) time.Duration {
	if len(delaysMs) == 0 || n < 1 {
		return 0
	}
	return time.Duration(delaysMs[min(n, len(delaysMs))-1]) * time.Millisecond
}

// RetrySpan returns the longest time the attempts of one generation can
// take to be scheduled under a schedule: every pause between attempts at
// its largest (step plus the full jitter).
func RetrySpan[T int | int32](delaysMs []T, maximumAttempts int) time.Duration {
	var span time.Duration
	for n := 1; n < maximumAttempts; n++ {
		step := RetryStep(delaysMs, n)
		span += step + time.Duration(float64(step)*RetryJitter)
	}
	return span
}

// When narrows the trigger. Kind fields: tests on field values that combine
// with AND. Kind request_lifecycle: every nonempty list must match.
type When struct {
	Kind string `json:"kind"`
	// Changed lists fields whose before and after values must differ.
	Changed []string `json:"changed,omitempty"`
	// BeforeEquals and AfterEquals test values before and after the write.
	BeforeEquals []*FieldTest `json:"beforeEquals,omitempty"`
	AfterEquals  []*FieldTest `json:"afterEquals,omitempty"`
	Transitions  []string     `json:"transitions,omitempty"`
	ToStates     []string     `json:"toStates,omitempty"`
	Stages       []string     `json:"stages,omitempty"`
}

// FieldTest compares a field (authored id) with a literal wire value; a nil
// Value tests for null.
type FieldTest struct {
	Field string `json:"field"`
	Value any    `json:"value"`
}

// Handler is how an event is handled: delivered to a webhook destination
// bound at runtime (url) or run by a reviewed local module (tengo, wasm).
type Handler struct {
	Kind          string `json:"kind"`
	DestinationID string `json:"destinationId,omitempty"`
	// Module is the id of the handler's entry in Package.Modules.
	Module string `json:"module,omitempty"`
}

// Hook returns the entity's hook with the given id, or nil.
func (e *Entity) Hook(id string) *Hook {
	for _, h := range e.Hooks {
		if h.ID == id {
			return h
		}
	}
	return nil
}

// Classifications, from least to most sensitive.
var Classifications = []string{"public", "internal", "restricted"}

// ClassificationRank returns the order of a classification (0 for public),
// or -1 for an unknown value.
func ClassificationRank(c string) int {
	for i, v := range Classifications {
		if v == c {
			return i
		}
	}
	return -1
}

// RetryDelay returns the pause before the attempt that follows failed
// attempt n under a schedule. It is the step plus spread (in [0, 1)) times
// RetryJitter of it; when the receiver asked for a longer pause
// (retryAfter, from Retry-After), that pause instead, but never longer than
// the schedule's largest step: a receiver can slow its retries down, not
// make them sooner than scheduled nor put them off past the schedule.
func RetryDelay[T int | int32](delaysMs []T, n int, retryAfter time.Duration, spread float64) time.Duration {
	step := RetryStep(delaysMs, n)
	delay := step + time.Duration(float64(step)*RetryJitter*min(max(spread, 0), 1))
	if retryAfter > delay && len(delaysMs) > 0 {
		largest := time.Duration(slices.Max(delaysMs)) * time.Millisecond
		delay = max(delay, min(retryAfter, largest))
	}
	return delay
}
