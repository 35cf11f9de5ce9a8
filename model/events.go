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
