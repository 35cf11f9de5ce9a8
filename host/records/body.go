package records

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
