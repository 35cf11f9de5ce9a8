package query

import "fmt"

// Kind classifies a refusal of the query layer.
type Kind uint8

// Kinds of refusal. The record host answers Invalid with the problem code
// query.invalid and CursorInvalid with query.cursor_invalid.
const (
	// Invalid refuses query options: unknown, repeated, malformed, out of
	// bounds or outside the caller's grant.
	Invalid Kind = iota + 1
	// CursorInvalid refuses a $skiptoken: empty, forged, expired, bound
	// to another call, or carrying a query the grant no longer allows.
	CursorInvalid
)

// String returns the problem code name of the kind (query.invalid or
// query.cursor_invalid).
func (k Kind) String() string {
	switch k {
	case Invalid:
		return "query.invalid"
	case CursorInvalid:
		return "query.cursor_invalid"
	}
	return fmt.Sprintf("query.Kind(%d)", uint8(k))
}

// Error is a refusal of the query layer: its kind, a client-safe detail
// and, for logs only, a cause. Match it with errors.As.
type Error struct {
	Kind   Kind
	Detail string
	// Cause is kept for logs; it never reaches the client.
	Cause error
}

// Error renders the kind, the detail and the cause.
func (e *Error) Error() string {
	s := e.Kind.String() + ": " + e.Detail
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// Errorf returns a refusal of kind k with a formatted detail.
func Errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Detail: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) *Error {
	return Errorf(Invalid, format, args...)
}
