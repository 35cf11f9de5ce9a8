// Package proto is the protocol between the Registrum host and an
// out-of-process attachment verifier: the go-plugin handshake, the name the
// plugin is served under, and the net/rpc messages of one verification.
//
// A verification is one session of calls on the "Plugin" service:
//
//	Begin(BeginArgs) → BeginReply{Session}
//	Write(WriteArgs{Session, ≤ MaxChunk bytes}) … until DeclaredSize bytes were sent
//	Finish(SessionArgs) → FinishReply (the verdict), or Abort(SessionArgs)
//
// An attachment of at most MaxChunk bytes is sent in one call instead:
//
//	Verify(VerifyArgs{BeginArgs, Data}) → FinishReply
//
// It also holds what both sides share: the attachment description and its
// validation, the verdict (outcomes, reason categories), the causes a plugin
// may send and the size limits. Authors use these through sdk/verifier, which
// speaks the protocol for them. It has no dependency on either side so that
// both can import it.
package proto

import (
	"net/rpc"

	"github.com/hashicorp/go-plugin"
)

// Handshake is the go-plugin handshake both sides must agree on. A binary
// started without the cookie refuses to run; a plugin built for another
// protocol version is refused by the host.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "REGISTRUM_ATTACHMENT_VERIFIER",
	MagicCookieValue: "3f6c1e0a9b7d4c52-attachment-verifier-v1",
}

// PluginName is the name the verifier is dispensed under.
const PluginName = "attachment-verifier"

// MaxChunk is the largest Data of one Write call.
const MaxChunk = 128 << 10

// MaxSessions is the most verifications one plugin process holds open at once.
const MaxSessions = 4

// The RPC method names.
const (
	MethodBegin  = "Plugin.Begin"
	MethodWrite  = "Plugin.Write"
	MethodFinish = "Plugin.Finish"
	MethodAbort  = "Plugin.Abort"
	MethodVerify = "Plugin.Verify"
)

// BeginArgs opens a verification session.
type BeginArgs struct {
	SlotID       string
	MediaType    string
	DeclaredSize int64
	SHA256       string // 64 lowercase hex digits
	// TimeoutMillis is the time left until the host gives up; the plugin
	// bounds the author's context by it.
	TimeoutMillis int64
	// Traceparent is the W3C traceparent of the host's verification span
	// ("" when the host does not trace it), so that the plugin's own
	// spans can join the trace; the SDK hands it to the author's context
	// (verifier.Traceparent). A field gob leaves out for a peer that
	// predates it.
	Traceparent string
}

// BeginReply names the new session.
type BeginReply struct {
	Session uint64
}

// WriteArgs carries the next chunk of the attachment's bytes.
type WriteArgs struct {
	Session uint64
	Data    []byte
}

// VerifyArgs carries a whole attachment of at most MaxChunk bytes.
type VerifyArgs struct {
	BeginArgs
	Data []byte
}

// SessionArgs names a session to finish or abort.
type SessionArgs struct {
	Session uint64
}

// Empty is the reply of calls that return nothing.
type Empty struct{}

// FinishReply is the verdict. Outcome is "approved", "rejected" or "retry";
// Reason is a reason category when rejected; Cause is a value-free cause
// word when the outcome is retry.
type FinishReply struct {
	Outcome string
	Reason  string
	Cause   string
}

// Plugin is the go-plugin net/rpc plugin of a verifier. On the plugin side,
// Receiver is the RPC receiver serving the methods above; on the host side
// it is nil and Client returns the raw *rpc.Client.
type Plugin struct {
	Receiver any
}

// Server implements plugin.Plugin.
func (p *Plugin) Server(*plugin.MuxBroker) (any, error) { return p.Receiver, nil }

// Client implements plugin.Plugin.
func (p *Plugin) Client(_ *plugin.MuxBroker, c *rpc.Client) (any, error) { return c, nil }
