// Package verifier is the SDK for writing an attachment verifier that the
// Registrum host runs out of process.
//
// An author implements one interface, [Verifier], and serves it from main:
//
//	func main() { verifier.Serve(myVerifier{}) }
//
// The SDK speaks the host's protocol (hashicorp/go-plugin over net/rpc): it
// receives the attachment's metadata and its bytes in bounded chunks, refuses
// more bytes than declared, checks the size and sha256 of what it received,
// and only then calls Verify with a reader over exactly those bytes. Verify
// answers approved, rejected with a value-free reason category, or retry; an
// error or a panic in Verify is answered as retry and its text never leaves
// the process.
//
// Build the verifier as an ordinary Go binary (go build -o my-verifier .),
// pin its sha256 in the registry package, and the host starts it on demand.
// Run by hand, the binary explains that it is a plugin and exits.
package verifier

import (
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/registrum/registrum/plugins/verifier/proto"
)

// Verifier is the interface an author implements. Verify reads the bytes
// from content (exactly att.DeclaredSize bytes, already checked against
// att.SHA256) and returns a verdict before ctx's deadline.
type Verifier = proto.Verifier

// Attachment is the metadata of the bytes to verify.
type Attachment = proto.Attachment

// Verdict is a verifier's answer.
type Verdict = proto.Verdict

// Outcome is approved, rejected or retry.
type Outcome = proto.Outcome

// Reason is the value-free category of a rejection.
type Reason = proto.Reason

// The outcomes and reason categories, repeated here so authors import one package.
const (
	Approved          = proto.Approved
	Rejected          = proto.Rejected
	Retry             = proto.Retry
	ReasonMalware     = proto.ReasonMalware
	ReasonPolicy      = proto.ReasonPolicy
	ReasonMalformed   = proto.ReasonMalformed
	ReasonUnspecified = proto.ReasonUnspecified
)

// Approve returns the approved verdict.
func Approve() Verdict { return Verdict{Outcome: Approved} }

// Reject returns a rejected verdict with the given reason category.
func Reject(reason Reason) Verdict { return Verdict{Outcome: Rejected, Reason: reason} }

// Serve serves v to the Registrum host over the verifier protocol and
// returns when the host ends the process's session. Call it from main.
func Serve(v Verifier) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: proto.Handshake,
		Plugins:         plugin.PluginSet{proto.PluginName: &proto.Plugin{Receiver: NewReceiver(v)}},
		Logger:          hclog.New(&hclog.LoggerOptions{Name: "verifier", Level: hclog.Warn}),
	})
}
