package verifier

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"sync"
)

// contentError is returned by exactReader when the content does not match
// its metadata; cause says how.
type contentError struct{ cause Cause }

func (e *contentError) Error() string { return "attachment content: " + string(e.cause) }

// exactReader passes through exactly the declared number of bytes of an
// attachment and reports io.EOF only once it has checked that the source has
// no further byte and that the bytes hash to the declared digest. Any other
// ending is a *contentError. It is safe for one reader goroutine plus
// concurrent calls to state and Close (the http transport reads and closes
// the request body from its own goroutine).
type exactReader struct {
	src       io.Reader
	remaining int64
	want      [sha256.Size]byte
	h         hash.Hash

	mu       sync.Mutex // guards err only, never held across a read of src
	err      error      // sticky: io.EOF once verified, or a *contentError
	closed   chan struct{}
	closeOne sync.Once
}

func newExactReader(src io.Reader, att Attachment) *exactReader {
	r := &exactReader{src: src, remaining: att.DeclaredSize, h: sha256.New(), closed: make(chan struct{})}
	// att was validated, so the digest decodes.
	_, _ = hex.Decode(r.want[:], []byte(att.SHA256))
	return r
}

// Read implements io.Reader. Only one goroutine may call Read.
func (r *exactReader) Read(p []byte) (int, error) {
	if err := r.sticky(); err != nil {
		return 0, err
	}
	if r.remaining == 0 {
		var probe [1]byte
		n, err := io.ReadFull(r.src, probe[:])
		switch {
		case n > 0:
			return 0, r.fail(&contentError{CauseLongerThanDeclared})
		case err != io.EOF:
			return 0, r.fail(&contentError{CauseReadError})
		case subtle.ConstantTimeCompare(r.h.Sum(nil), r.want[:]) != 1:
			return 0, r.fail(&contentError{CauseDigestMismatch})
		}
		return 0, r.fail(io.EOF)
	}
	if int64(len(p)) > r.remaining {
		p = p[:r.remaining]
	}
	n, err := r.src.Read(p)
	r.h.Write(p[:n])
	r.remaining -= int64(n)
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		if r.remaining > 0 {
			return n, r.fail(&contentError{CauseShorterThanDeclared})
		}
	default:
		return n, r.fail(&contentError{CauseReadError})
	}
	return n, nil
}

func (r *exactReader) sticky() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *exactReader) fail(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
	return err
}

// Close records that the consumer is done with the reader.
func (r *exactReader) Close() error {
	r.closeOne.Do(func() { close(r.closed) })
	return nil
}

// verified reports whether every byte was read and checked.
func (r *exactReader) verified() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err == io.EOF
}

// cause returns the content failure seen so far, or "".
func (r *exactReader) cause() Cause {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ce *contentError
	if errors.As(r.err, &ce) {
		return ce.cause
	}
	return ""
}
