package plugins

import (
	"errors"
	"fmt"
)

// FailureKind says how a call failed.
type FailureKind string

// Failure kinds.
const (
	// FailureTimeout: the call ran past its wall-time limit and was stopped.
	FailureTimeout FailureKind = "timeout"
	// FailureMemory: the module hit its memory, allocation or string-size limit.
	FailureMemory FailureKind = "memory"
	// FailureTrap: the module crashed (a WebAssembly trap, a Go panic in the
	// guest, a tengo runtime error).
	FailureTrap FailureKind = "trap"
	// FailureInvalidOutput: the output was too large, not JSON, or broke the
	// contract (for example an effect outside the declared writes).
	FailureInvalidOutput FailureKind = "invalid-output"
	// FailureRefused: the host refused to make the call (input over the byte
	// limit, not a valid input document, or a module of another kind).
	FailureRefused FailureKind = "refused"
)

// Failure is the error of a call that did not produce a valid output.
//
// Error returns only the module id and the kind, which are safe to show to
// any caller. Detail returns what went wrong in full for operators' logs; it
// may hold text the module controls (names from its output, a guest stack
// trace) and must never reach a client.
type Failure struct {
	Module string
	Kind   FailureKind
	detail error
}

// Error implements error with the module id and kind only.
func (f *Failure) Error() string {
	return fmt.Sprintf("plugins: module %q failed: %s", f.Module, f.Kind)
}

// Detail is the private cause of the failure, for operator logs.
func (f *Failure) Detail() error { return f.detail }

// Unwrap returns the private cause, so errors.Is works against it (for
// example context.DeadlineExceeded).
func (f *Failure) Unwrap() error { return f.detail }

// FailureKindOf returns the kind of the *Failure in err's chain, or "" when
// err is not a plugin failure.
func FailureKindOf(err error) FailureKind {
	var f *Failure
	if errors.As(err, &f) {
		return f.Kind
	}
	return ""
}

func fail(kind FailureKind, detail error) *Failure {
	return &Failure{Kind: kind, detail: detail}
}

// ErrUnknownModule is returned (wrapped) for a call to a module id the set
// did not load.
var ErrUnknownModule = errors.New("plugins: unknown module")
