package verifier_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/registrum/registrum/sdk/verifier"
)

// pdfOnly approves files that start like a PDF document and rejects others
// as malformed.
type pdfOnly struct{}

func (pdfOnly) Verify(_ context.Context, _ verifier.Attachment, content io.Reader) (verifier.Verdict, error) {
	head := make([]byte, 5)
	if _, err := io.ReadFull(content, head); err != nil && err != io.ErrUnexpectedEOF {
		return verifier.Verdict{}, err // answered as a retry; the text stays in the plugin
	}
	if !bytes.Equal(head, []byte("%PDF-")) {
		return verifier.Reject(verifier.ReasonMalformed), nil
	}
	return verifier.Approve(), nil
}

// A verifier is one Verify method; main hands it to Serve.
func ExampleServe() {
	// In the verifier's main package:
	//
	//	func main() { verifier.Serve(pdfOnly{}) }
	//
	// Serve runs only under the host, which starts the binary with its
	// handshake cookie, so this example just shows the call.
	if false {
		verifier.Serve(pdfOnly{})
	}
}

// Verify is plain Go: it can be tested without the host.
func Example() {
	att := verifier.Attachment{SlotID: "evidence", MediaType: "application/pdf"}
	for _, content := range []string{"%PDF-1.7 ...", "GIF89a..."} {
		v, err := pdfOnly{}.Verify(context.Background(), att, strings.NewReader(content))
		fmt.Println(v.Outcome, v.Reason, err)
	}
	// Output:
	// approved  <nil>
	// rejected malformed <nil>
}
