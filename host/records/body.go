package records

import (
	"errors"

	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/internal/strictjson"
)

// Body is a write's body as the edge received it, not yet judged.
//
// The edge reads at most the route's bound (plus one byte, to tell an
// oversized body), and reads nothing when the Content-Type is not the
// route's or the declared Content-Length is over the bound; what it found
// wrong is kept as the body's fault. Access comes first: a service calls
// Bytes only once it has decided the caller's grant and, where the route
// names a record or a run, its row boundary, visibility and ownership. A
// caller who may not use a route thus gets the concealed not-found of an
// unknown path whatever it sent, never a 400 that confirms the route or
// the record exists.
type Body struct {
	bytes []byte
	fault error
}

// BodyOf returns a body of b, read within its bound.
func BodyOf(b []byte) Body { return Body{bytes: b} }

// FaultyBody returns a body refused with fault (a 400 request.invalid)
// once access is decided.
func FaultyBody(fault error) Body { return Body{fault: fault} }

// Bytes returns the body's bytes, or its fault. Call it only after access
// is decided.
func (b Body) Bytes() ([]byte, error) {
	if b.fault != nil {
		return nil, b.fault
	}
	return b.bytes, nil
}

// Received returns the bytes received without judging them (nil for a
// faulty body): what an idempotency binding computed before the body is
// judged covers. A faulty body is refused before anything is written, so
// a binding of one is never stored.
func (b Body) Received() []byte { return b.bytes }

// createData parses a create body and returns its data member.
func createData(body []byte) (map[string]any, error) {
	doc, err := strictjson.Decode(body)
	if err != nil {
		return nil, BodyFault(err)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, problem.At(problem.RequestInvalid, "", "the body must be a JSON object with a data member")
	}
	for _, k := range sortedKeys(top) {
		if k != "data" {
			return nil, problem.At(problem.RequestInvalid, strictjson.Pointer(k), "unknown member %q: a create body has only the member data", k)
		}
	}
	raw, ok := top["data"]
	if !ok {
		return nil, problem.At(problem.RequestInvalid, "/data", "the member data is required")
	}
	data, ok := raw.(map[string]any)
	if !ok {
		return nil, problem.At(problem.RequestInvalid, "/data", "data must be an object of field values")
	}
	return data, nil
}

// ActionBodyObject reads the body of an action (a change request's or an
// immediate action's): at most MaxActionBodyBytes of strict JSON holding
// one object, its members returned. notObject is the detail of the refusal
// of a body that is not an object.
func ActionBodyObject(body []byte, notObject string) (map[string]any, error) {
	if len(body) > MaxActionBodyBytes {
		return nil, problem.At(problem.RequestInvalid, "", "the body is larger than %d bytes", MaxActionBodyBytes)
	}
	doc, err := strictjson.Decode(body)
	if err != nil {
		return nil, BodyFault(err)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, problem.At(problem.RequestInvalid, "", "%s", notObject)
	}
	return top, nil
}

// BodyFault turns a strict-decoding error into a refusal naming the member.
func BodyFault(err error) error {
	var se *strictjson.SyntaxError
	if errors.As(err, &se) {
		return problem.At(problem.RequestInvalid, se.Pointer, "the body is not acceptable JSON: %s", se.Msg)
	}
	return problem.At(problem.RequestInvalid, "", "the body is not acceptable JSON")
}
