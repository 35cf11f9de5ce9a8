package model

// ChangeRequest makes an entity a request entity: its records are proposals
// that, once reviewed, apply effects to target records. Exactly one of
// Effects and Planner is set.
type ChangeRequest struct {
	// Effects are the declarative effects of the request.
	Effects []*Effect `json:"effects,omitempty"`
	// Planner computes the effects with a reviewed module.
	Planner     *Planner    `json:"planner,omitempty"`
	Review      Review      `json:"review"`
	Application Application `json:"application"`
	Retention   Retention   `json:"retention"`
}

// PlannerKind returns "declarative" or the planner's engine.
func (c *ChangeRequest) PlannerKind() string {
	if c.Planner != nil {
		return c.Planner.Engine
	}
	return "declarative"
}

// Effect operations.
const (
	EffectCreate = "create"
	EffectPatch  = "patch"
)

// Effect is one write a change request or an immediate action performs.
type Effect struct {
	ID        string       `json:"id"`
	Operation string       `json:"operation"`
	Target    EffectTarget `json:"target"`
	// Set lists the target fields written, ordered by field id.
	Set []*SetField `json:"set,omitempty"`
	// Clear lists the target fields set to null (authored ids).
	Clear []string `json:"clear,omitempty"`
}

// EffectTarget selects the target record of an effect: Entity is always the
// resolved target entity id; for a patch, exactly one of FromField (a
// reference field of the request record or an action input) and FromEffect
// (the record an earlier create effect produced) selects the record.
type EffectTarget struct {
	Entity     string `json:"entity"`
	FromField  string `json:"fromField,omitempty"`
	FromEffect string `json:"fromEffect,omitempty"`
}

// SetField is one target field an effect writes and where its value comes
// from: exactly one of FromField (a field of the request record, or an
// action input), FromEffect (the id of the record an earlier effect created)
// and Value (a literal, encoded as the field's wire value).
type SetField struct {
	Field      string `json:"field"`
	FromField  string `json:"fromField,omitempty"`
	FromEffect string `json:"fromEffect,omitempty"`
	Value      any    `json:"value,omitempty"`
}

// Planner is a reviewed module that turns a request into writes. Writes
// declares every write it may produce; the host refuses any other.
type Planner struct {
	// Engine is "tengo" or "wasm".
	Engine string `json:"engine"`
	// Module is the id of the planner's entry in Package.Modules.
	Module string          `json:"module"`
	Writes []*PlannedWrite `json:"writes"`
}

// PlannedWrite is one write a planner may produce.
type PlannedWrite struct {
	ID        string       `json:"id"`
	Operation string       `json:"operation"`
	Target    EffectTarget `json:"target"`
	// Fields are the target fields (authored ids) the write may set or clear.
	Fields []string `json:"fields"`
}

// Review modes.
const (
	ReviewAuthority = "authority"
	ReviewNone      = "none"
)

// Review says who reviews a submitted request: an external authority under a
// policy, or nobody (mode none).
type Review struct {
	Mode      string `json:"mode"`
	Authority string `json:"authority,omitempty"`
	PolicyID  string `json:"policyId,omitempty"`
	// Stages are the review stages the authority reports, as the project
	// declares them; lifecycle hooks may filter on them.
	Stages []string `json:"stages,omitempty"`
}

// Application modes.
const (
	ApplyManual    = "manual"
	ApplyAutomatic = "automatic"
)

// Application dispositions: what the application step may do with an
// approved request.
const (
	// DispositionApply applies the approved request's effects.
	DispositionApply = "apply"
	// DispositionQueue holds the approved request, with one of the declared
	// queue reasons, until it is applied.
	DispositionQueue = "queue"
)

// Application says how an approved request is applied: by an authorized
// caller (manual) or by a named logical executor (automatic), and which
// dispositions and queue reasons the application step may use.
type Application struct {
	Mode     string `json:"mode"`
	Executor string `json:"executor,omitempty"`
	// Dispositions are the allowed dispositions, in declared order; empty
	// (a package compiled before they were declared) means apply only.
	Dispositions []string `json:"dispositions,omitempty"`
	// QueueReasons are the reason codes a queue disposition may carry.
	QueueReasons []string `json:"queueReasons,omitempty"`
}

// AllowedDispositions returns the allowed dispositions: the declared ones,
// or apply alone when none are declared.
func (a Application) AllowedDispositions() []string {
	if len(a.Dispositions) == 0 {
		return []string{DispositionApply}
	}
	return a.Dispositions
}

// Retention modes.
const (
	RetainAll     = "retain"
	OperatorErase = "operator-erase"
)

// Retention says whether proposal payloads are retained or may be erased by an operator.
type Retention struct {
	Mode string `json:"mode"`
}

// Limits on attachment slots.
const (
	MaxAttachmentSlots     = 8
	MaxAttachmentSlotBytes = 16777216
)

// AttachmentSlot is a file slot on a request entity. The slot appears in
// domainData under its id; it is engine-owned.
type AttachmentSlot struct {
	ID string `json:"id"`
	// Required is requiredForSubmit: submission needs the slot filled and verified.
	Required       bool     `json:"required,omitempty"`
	MaximumBytes   int64    `json:"maximumBytes"`
	ContentTypes   []string `json:"contentTypes"`
	Classification string   `json:"classification"`
	// Verification, when set, quarantines uploads until the verifier approves them.
	Verification *Verification `json:"verification,omitempty"`
}

// Verification binds an attachment slot to a verifier and a policy.
type Verification struct {
	Verifier string `json:"verifier"`
	PolicyID string `json:"policyId"`
}

// Action is an immediate action: effects applied in one call, from inputs.
type Action struct {
	ID string `json:"id"`
	// Inputs are typed like entity fields; their ids are used by effects.
	Inputs  []*Field  `json:"inputs"`
	Effects []*Effect `json:"effects"`
	// Preconditions must hold on the target records before any effect is written.
	Preconditions []*Precondition `json:"preconditions,omitempty"`
	// Handler, when set, is a reviewed module that computes values for the
	// effects' declared fields or refuses with a declared code.
	Handler *ActionHandler `json:"handler,omitempty"`
}

// ActionHandler is an action's reviewed module.
type ActionHandler struct {
	// Engine is "tengo" or "wasm".
	Engine string `json:"engine"`
	// Module is the id of the handler's entry in Package.Modules.
	Module string `json:"module"`
	// Writes are the effects the handler feeds and the fields it may give values for.
	Writes []*HandlerWrite `json:"writes"`
	// Refusals are the codes the handler may refuse with.
	Refusals []string `json:"refusals,omitempty"`
}

// HandlerWrite names an effect and the target fields (authored ids) a
// handler may give values for.
type HandlerWrite struct {
	Effect string   `json:"effect"`
	Fields []string `json:"fields"`
}

// Precondition is a test on the record an effect targets: the target field
// equals a literal (Equals) or an input (EqualsInput).
type Precondition struct {
	Effect      string `json:"effect"`
	Field       string `json:"field"`
	Equals      any    `json:"equals,omitempty"`
	EqualsInput string `json:"equalsInput,omitempty"`
}

// Input returns the action input with the given id, or nil.
func (a *Action) Input(id string) *Field {
	for _, f := range a.Inputs {
		if f.ID == id {
			return f
		}
	}
	return nil
}

// ActionByID returns the action with the given id, or nil.
func (p *Package) ActionByID(id string) *Action {
	for _, a := range p.Actions {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// Slot returns the attachment slot with the given id, or nil.
func (e *Entity) Slot(id string) *AttachmentSlot {
	for _, s := range e.Attachments {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// ModuleByID returns the module with the given id, or nil.
func (p *Package) ModuleByID(id string) *Module {
	for i := range p.Modules {
		if p.Modules[i].ID == id {
			return &p.Modules[i]
		}
	}
	return nil
}
