// Command hostile is a test verifier that misbehaves on request: the slot id
// of the attachment picks the misbehaviour. Any other slot is approved.
package main

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/registrum/registrum/plugins/verifier/proto"
	"github.com/registrum/registrum/sdk/verifier"
)

type author struct{}

func (author) Verify(ctx context.Context, att verifier.Attachment, r io.Reader) (verifier.Verdict, error) {
	switch att.SlotID {
	case "hang":
		exe, _ := os.Executable()
		_ = os.WriteFile(exe+".pid", []byte(strconv.Itoa(os.Getpid())), 0o600)
		time.Sleep(time.Hour) // ignores ctx on purpose
	case "panics":
		panic("secret-panic-text")
	case "fails":
		return verifier.Verdict{}, errors.New("secret-error-text")
	case "invalidVerdict":
		return verifier.Verdict{Outcome: verifier.Rejected}, nil
	case "asksRetry":
		return verifier.Verdict{Outcome: verifier.Retry}, nil
	case "exits":
		os.Exit(0)
	case "rejects":
		return verifier.Reject(verifier.ReasonPolicy), nil
	case "tellsTraceparent":
		// Leaves the traceparent its context carries beside the binary.
		exe, _ := os.Executable()
		_ = os.WriteFile(exe+".traceparent", []byte(verifier.Traceparent(ctx)), 0o600)
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return verifier.Verdict{}, err
	}
	return verifier.Approve(), nil
}

// receiver wraps the SDK's receiver to misbehave below the author's code.
type receiver struct {
	*verifier.Receiver
	mu     sync.Mutex
	slot   map[uint64]string
	chunks map[uint64]int
}

func (r *receiver) Begin(args proto.BeginArgs, reply *proto.BeginReply) error {
	if err := r.Receiver.Begin(args, reply); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slot[reply.Session] = args.SlotID
	return nil
}

func (r *receiver) Write(args proto.WriteArgs, reply *proto.Empty) error {
	r.mu.Lock()
	r.chunks[args.Session]++
	crash := r.slot[args.Session] == "crashMidStream" && r.chunks[args.Session] == 2
	r.mu.Unlock()
	if crash {
		os.Exit(3)
	}
	return r.Receiver.Write(args, reply)
}

func (r *receiver) Finish(args proto.SessionArgs, reply *proto.FinishReply) error {
	r.mu.Lock()
	slot := r.slot[args.Session]
	r.mu.Unlock()
	switch slot {
	case "nonsense":
		*reply = proto.FinishReply{Outcome: "maybe"}
		return nil
	case "unknownCause":
		*reply = proto.FinishReply{Outcome: "retry", Cause: "secret-cause-text"}
		return nil
	case "rpcError":
		return errors.New("secret-rpc-error-text")
	}
	return r.Receiver.Finish(args, reply)
}

// Verify routes the one-call form through the misbehaving methods above.
func (r *receiver) Verify(args proto.VerifyArgs, reply *proto.FinishReply) error {
	var begun proto.BeginReply
	if err := r.Begin(args.BeginArgs, &begun); err != nil {
		return err
	}
	if err := r.Write(proto.WriteArgs{Session: begun.Session, Data: args.Data}, &proto.Empty{}); err != nil {
		return err
	}
	return r.Finish(proto.SessionArgs{Session: begun.Session}, reply)
}

func main() {
	rcv := &receiver{Receiver: verifier.NewReceiver(author{}), slot: map[uint64]string{}, chunks: map[uint64]int{}}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: proto.Handshake,
		Plugins:         plugin.PluginSet{proto.PluginName: &proto.Plugin{Receiver: rcv}},
	})
}
