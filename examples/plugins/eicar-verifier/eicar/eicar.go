// Package eicar is the scan of the example verifier: it rejects content that
// contains the EICAR anti-virus test signature and approves everything else.
// The go-plugin binary (examples/plugins/eicar-verifier) and the http
// scanner `registrum dev` runs both serve this one Scanner.
package eicar

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/registrum/registrum/sdk/verifier"
)

// Signature returns the EICAR test string. It is assembled at run time from
// pieces so that neither the source nor a compiled binary contains it whole
// and trips a scanner.
func Signature() []byte {
	pieces := []string{`X5O!P%@AP[4\PZX54(P^)7CC)7}$`, "EICAR-STANDARD-", "ANTIVIRUS-TEST-", "FILE!$H+H*"}
	return []byte(strings.Join(pieces, ""))
}

// Scanner is the verifier: a streaming search for the signature.
type Scanner struct {
	sig []byte
}

// New returns a Scanner looking for the EICAR signature.
func New() Scanner { return Scanner{sig: Signature()} }

// Verify implements verifier.Verifier.
func (s Scanner) Verify(ctx context.Context, _ verifier.Attachment, content io.Reader) (verifier.Verdict, error) {
	found, err := contains(ctx, content, s.sig)
	if err != nil {
		return verifier.Verdict{}, fmt.Errorf("eicar: read content: %w", err)
	}
	if found {
		return verifier.Reject(verifier.ReasonMalware), nil
	}
	return verifier.Approve(), nil
}

// contains reports whether r's bytes contain sig, reading in blocks and
// keeping len(sig)-1 bytes of overlap so a match across blocks is found.
func contains(ctx context.Context, r io.Reader, sig []byte) (bool, error) {
	const block = 64 << 10
	buf := make([]byte, 0, block+len(sig))
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if bytes.Contains(buf, sig) {
			return true, nil
		}
		if keep := len(sig) - 1; len(buf) > keep {
			buf = append(buf[:0], buf[len(buf)-keep:]...)
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}
