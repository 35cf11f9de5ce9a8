package model

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

// Delivery is a compiled delivery policy (retry profile registry_v1): how
// often and how long an event is tried, and how long its payload is kept
// for replay once its attempts are exhausted.
type Delivery struct {
	RetryProfile string `json:"retryProfile"`
	// MaximumAttempts counts every attempt of one generation (1 to 20).
	MaximumAttempts int `json:"maximumAttempts"`
	// RetryDelaysMs[i] is the pause after failed attempt i+1 (the last
	// entry repeats); each 100 ms to 1 h.
	RetryDelaysMs []int `json:"retryDelaysMs"`
	// AttemptTimeoutMs bounds one attempt (100 to 10000).
	AttemptTimeoutMs int `json:"attemptTimeoutMs"`
	// PayloadRetentionSeconds is how long a captured payload is kept (up to
	// 30 days): a dead letter is replayable until then.
	PayloadRetentionSeconds int64 `json:"payloadRetentionSeconds"`
	// MaximumPayloadBytes bounds the captured body.
	MaximumPayloadBytes int `json:"maximumPayloadBytes"`
}

// DefaultDelivery returns the registry_v1 retry profile: 5 attempts,
// delays 1, 2, 4, 8 s, 5 s per attempt, payloads kept 7 days, at most 1 MiB.
func DefaultDelivery() *Delivery {
	return &Delivery{RetryProfile: "registry_v1", MaximumAttempts: 5, RetryDelaysMs: []int{1000, 2000, 4000, 8000},
		AttemptTimeoutMs: 5000, PayloadRetentionSeconds: 7 * 24 * 3600, MaximumPayloadBytes: 1 << 20}
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
