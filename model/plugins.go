package model

// Engine is the sandbox a reviewed module runs in.
type Engine string

// The module engines.
const (
	// EngineWASM is a WebAssembly module (a wasip1 reactor) run by wazero.
	EngineWASM Engine = "wasm"
	// EngineTengo is a tengo script.
	EngineTengo Engine = "tengo"
)

// Valid reports whether e is a known engine.
func (e Engine) Valid() bool { return e == EngineWASM || e == EngineTengo }

// ModuleKind is what a reviewed module does for the host.
type ModuleKind string

// The module kinds.
const (
	// KindPlanner turns a draft change request into a plan of effects.
	KindPlanner ModuleKind = "planner"
	// KindHookHandler handles one captured event after commit.
	KindHookHandler ModuleKind = "hook-handler"
	// KindActionHandler computes the writes of an immediate action.
	KindActionHandler ModuleKind = "action-handler"
)

// Valid reports whether k is a known module kind.
func (k ModuleKind) Valid() bool {
	return k == KindPlanner || k == KindHookHandler || k == KindActionHandler
}

// Capability is a real source a hook or action handler may be granted; the
// sandbox keeps everything else a module can observe deterministic.
type Capability string

// The capabilities.
const (
	// CapabilityClock gives the real wall and monotonic clocks.
	CapabilityClock Capability = "clock"
	// CapabilityRandom gives cryptographically random bytes.
	CapabilityRandom Capability = "random"
)

// Valid reports whether c is a known capability.
func (c Capability) Valid() bool { return c == CapabilityClock || c == CapabilityRandom }

// VerifierKind is how an attachment verifier is reached.
type VerifierKind string

// The verifier kinds.
const (
	// VerifierGoPlugin is a reviewed binary run out of process through go-plugin.
	VerifierGoPlugin VerifierKind = "go-plugin"
	// VerifierHTTP is a scanner service reached over HTTP.
	VerifierHTTP VerifierKind = "http"
)

// Valid reports whether k is a known verifier kind.
func (k VerifierKind) Valid() bool { return k == VerifierGoPlugin || k == VerifierHTTP }

// Module is a reviewed plugin module pinned by the digest of its bytes: one
// entry of a package's "modules" member.
type Module struct {
	// ID names the module; calls select it by this id.
	ID string `json:"id"`
	// Engine is wasm or tengo.
	Engine Engine `json:"engine"`
	// Kind is planner, hook-handler or action-handler.
	Kind ModuleKind `json:"kind"`
	// Path locates the module's bytes, relative to the package folder, with
	// forward slashes. It may not leave that folder.
	Path string `json:"path"`
	// SHA256 is the pinned digest of the module's bytes: "sha256:<64 hex>".
	SHA256 string `json:"sha256"`
	// Capabilities are the real sources a handler may use; the sandbox keeps
	// everything else deterministic. Planners have none.
	Capabilities []Capability `json:"capabilities,omitempty"`
}

// Verifier is an attachment verifier the package uses, one entry of its
// "verifiers" member: a go-plugin binary shipped in the package (Path,
// SHA256) or an HTTPS service (Endpoint, with the credential named by
// AuthorizationRef). Members that do not belong to the entry's kind are left
// empty; plugins/verifier checks the entry's shape.
type Verifier struct {
	// ID names the verifier; unique within the package.
	ID string `json:"id"`
	// Kind is go-plugin or http.
	Kind VerifierKind `json:"kind"`
	// Path (go-plugin) is the binary, relative to the package folder.
	Path string `json:"path,omitempty"`
	// SHA256 (go-plugin) is the binary's reviewed digest, "sha256:<64 hex>".
	SHA256 string `json:"sha256,omitempty"`
	// Endpoint (http) is the scanner's URL.
	Endpoint string `json:"endpoint,omitempty"`
	// AuthorizationRef (http) is a secret:file/<name> reference to the
	// scanner's bearer credential.
	AuthorizationRef string `json:"authorizationRef,omitempty"`
	// TimeoutMilliseconds bounds one call (0: the host's default).
	TimeoutMilliseconds int `json:"timeoutMilliseconds,omitempty"`
	// MaximumBytes bounds the content sent to the verifier (0: the host's default).
	MaximumBytes int64 `json:"maximumBytes,omitempty"`
}
