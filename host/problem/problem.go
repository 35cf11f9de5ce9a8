// Package problem is the record host's one table of problem codes and the
// RFC 9457 problem document it answers refusals with.
//
// Core services return *Error values carrying a Code; the HTTP edge renders
// them with Write. Nothing else decides a refusal's status or title.
package problem

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Code is a short, stable problem code clients branch on.
type Code string

// The problem codes of the record host.
const (
	AuthenticationRefused  Code = "authentication.refused"
	ResourceNotFound       Code = "resource.not_found"
	QueryInvalid           Code = "query.invalid"
	QueryCursorInvalid     Code = "query.cursor_invalid"
	RequestInvalid         Code = "request.invalid"
	RequestPlanRefused     Code = "request.plan_refused"
	PreconditionRequired   Code = "precondition.required"
	PreconditionFailed     Code = "precondition.failed"
	IdempotencyConflict    Code = "idempotency.conflict"
	MutationConflict       Code = "mutation.conflict"
	IngestionReceiptErased Code = "ingestion.receipt_erased"
	// IdempotencyOutcomeErased: the write under this key happened; its
	// stored answer was erased with the history it held.
	IdempotencyOutcomeErased Code = "idempotency.outcome_erased"
	// ActionRefused is an immediate action's handler refusing with one of
	// its declared codes (named in the detail).
	ActionRefused Code = "action.refused"
	// RateLimitExceeded: the caller sent more requests than its rate
	// limit admits; Retry-After says when to try again. The specification
	// names no code for it; decided here.
	RateLimitExceeded  Code = "rate_limit.exceeded"
	SourceUnavailable  Code = "source.unavailable"
	ServiceUnavailable Code = "service.unavailable"
	// Internal is an unexpected failure; its detail never carries internals.
	Internal Code = "service.internal_error"
)

type entry struct {
	status int
	title  string
}

// table is the one table of problem codes.
var table = map[Code]entry{
	AuthenticationRefused:    {http.StatusUnauthorized, "Authentication refused"},
	ResourceNotFound:         {http.StatusNotFound, "Resource not found"},
	QueryInvalid:             {http.StatusBadRequest, "Query invalid"},
	QueryCursorInvalid:       {http.StatusBadRequest, "Cursor invalid"},
	RequestInvalid:           {http.StatusBadRequest, "Request invalid"},
	RequestPlanRefused:       {http.StatusBadRequest, "Plan refused"},
	PreconditionRequired:     {http.StatusPreconditionRequired, "Precondition required"},
	PreconditionFailed:       {http.StatusPreconditionFailed, "Precondition failed"},
	IdempotencyConflict:      {http.StatusConflict, "Idempotency key conflict"},
	MutationConflict:         {http.StatusConflict, "Mutation conflict"},
	IngestionReceiptErased:   {http.StatusGone, "Ingestion receipt erased"},
	IdempotencyOutcomeErased: {http.StatusConflict, "Stored answer erased"},
	ActionRefused:            {http.StatusUnprocessableEntity, "Action refused"},
	RateLimitExceeded:        {http.StatusTooManyRequests, "Rate limit exceeded"},
	SourceUnavailable:        {http.StatusServiceUnavailable, "Source unavailable"},
	ServiceUnavailable:       {http.StatusServiceUnavailable, "Service unavailable"},
	Internal:                 {http.StatusInternalServerError, "Internal error"},
}

// Codes returns every code of the table.
func Codes() []Code {
	out := make([]Code, 0, len(table))
	for c := range table {
		out = append(out, c)
	}
	return out
}

// Status returns the HTTP status of a code.
func (c Code) Status() int {
	if e, ok := table[c]; ok {
		return e.status
	}
	return http.StatusInternalServerError
}

// Title returns the short title of a code.
func (c Code) Title() string {
	if e, ok := table[c]; ok {
		return e.title
	}
	return table[Internal].title
}

// Error is a refusal: a code, a client-safe detail and, when one body member
// is at fault, its JSON Pointer.
type Error struct {
	Code   Code
	Detail string
	// FieldPath is the JSON Pointer of the offending body member; nil when
	// no member is at fault, "" for the body as a whole.
	FieldPath *string
	// Cause is kept for logs; it never reaches the client.
	Cause error
	// Reason says, for logs only, why a refusal whose answer says nothing
	// of why was made; "" when nobody said. It never reaches the client.
	Reason Reason
}

// Reason is why a refusal whose answer says nothing of why was made (a
// concealed not found, a refused token): a fixed category that names no
// value of the request (no token, claim, profile or record), written to
// the server's log and never to the answer.
type Reason string

// The reasons behind a concealed not-found or a refused token.
const (
	// ReasonUnusableCredential: an Authorization header that carries no
	// bearer token (401).
	ReasonUnusableCredential Reason = "unusable_credential"
	// ReasonTokenRefused: a presented bearer token failed verification
	// (401).
	ReasonTokenRefused Reason = "token_refused"
	// ReasonUnknownPath: no route, method, entity, slot or identifier of
	// that shape exists.
	ReasonUnknownPath Reason = "unknown_path"
	// ReasonMissingToken: the selected profile needs a token and none was
	// presented.
	ReasonMissingToken Reason = "missing_token"
	// ReasonUnknownProfile: no profile was selected, or the one named does
	// not exist or grants nothing on the entity.
	ReasonUnknownProfile Reason = "unknown_profile"
	// ReasonProfileNotSatisfied: the token does not satisfy the selected
	// profile (principal claim, scopes, purpose, row-boundary claims), or
	// the profile does not grant the operation.
	ReasonProfileNotSatisfied Reason = "profile_not_satisfied"
	// ReasonNoRecord: no live record has that identifier.
	ReasonNoRecord Reason = "no_record"
	// ReasonOutsideBoundary: the record, as it is or would be written,
	// lies outside the grant's row boundaries.
	ReasonOutsideBoundary Reason = "outside_boundary"
	// ReasonRequestHidden: the request is another principal's and the
	// profile's requestVisibility is owner.
	ReasonRequestHidden Reason = "hidden_by_request_visibility"
)

func (e *Error) Error() string {
	s := string(e.Code) + ": " + e.Detail
	if e.FieldPath != nil {
		s += " (at " + *e.FieldPath + ")"
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Cause }

// New returns a refusal with no member at fault.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// At returns a refusal that names the offending member by JSON Pointer.
func At(code Code, fieldPath string, format string, args ...any) *Error {
	p := fieldPath
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...), FieldPath: &p}
}

// NotFound is the concealed refusal shared by unknown routes, unknown
// records and everything a caller may not see. Where the reason is known,
// Concealed says it to the log.
func NotFound() *Error {
	return &Error{Code: ResourceNotFound, Detail: "The resource does not exist or is not visible to this caller."}
}

// Concealed is NotFound with the reason behind it, for the server's log:
// the answer is byte for byte that of NotFound.
func Concealed(reason Reason) *Error {
	e := NotFound()
	e.Reason = reason
	return e
}

// Wrap turns any error into a refusal: an *Error is kept, anything else
// becomes Internal with its cause hidden from the client.
func Wrap(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return &Error{Code: Internal, Detail: "The service failed to process the request.", Cause: err}
}

// Document is the RFC 9457 problem document.
type Document struct {
	Type      string  `json:"type"`
	Title     string  `json:"title"`
	Status    int     `json:"status"`
	Detail    string  `json:"detail"`
	Code      Code    `json:"code"`
	TraceID   string  `json:"traceId"`
	FieldPath *string `json:"fieldPath"`
}

// TypeURI returns the problem type of a code: the base, then the code with
// dots read as path segments.
func TypeURI(base string, code Code) string {
	return strings.TrimRight(base, "/") + "/" + strings.ReplaceAll(string(code), ".", "/")
}

// Doc builds the problem document of e.
func (e *Error) Doc(typeBase, traceID string) Document {
	return Document{
		Type:      TypeURI(typeBase, e.Code),
		Title:     e.Code.Title(),
		Status:    e.Code.Status(),
		Detail:    e.Detail,
		Code:      e.Code,
		TraceID:   traceID,
		FieldPath: e.FieldPath,
	}
}

// ContentType is the media type of problem documents.
const ContentType = "application/problem+json"

// Write renders e as a problem document.
func Write(w http.ResponseWriter, e *Error, typeBase, traceID string) {
	body, _ := json.Marshal(e.Doc(typeBase, traceID))
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.Code.Status())
	w.Write(body)
}
