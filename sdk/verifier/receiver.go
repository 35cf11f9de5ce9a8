package verifier

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/registrum/registrum/plugins/verifier/proto"
)

// defaultTimeout bounds Verify when the host sent no deadline.
const defaultTimeout = time.Minute

// Receiver is the net/rpc receiver [Serve] registers. Its exported methods
// are the protocol's calls; authors do not call them. It is exported so that
// tests can serve a Verifier in process (for example with go-plugin's
// TestPluginRPCConn and a proto.Plugin).
type Receiver struct {
	v Verifier

	mu       sync.Mutex
	next     uint64
	sessions map[uint64]*session
}

type session struct {
	att      Attachment
	buf      []byte
	deadline time.Time
	overflow bool
}

// NewReceiver returns the protocol receiver serving v.
func NewReceiver(v Verifier) *Receiver {
	return &Receiver{v: v, sessions: map[uint64]*session{}}
}

// Begin opens a session. It refuses malformed metadata, content larger than
// the SDK's limit and more than proto.MaxSessions open sessions.
func (r *Receiver) Begin(args proto.BeginArgs, reply *proto.BeginReply) error {
	att := Attachment{SlotID: args.SlotID, MediaType: args.MediaType, DeclaredSize: args.DeclaredSize, SHA256: args.SHA256}
	if err := att.Validate(proto.MaxContentBytes); err != nil {
		return err
	}
	timeout := defaultTimeout
	if args.TimeoutMillis > 0 {
		timeout = min(time.Duration(args.TimeoutMillis)*time.Millisecond, defaultTimeout)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sessions) >= proto.MaxSessions {
		return errors.New("too many open sessions")
	}
	r.next++
	r.sessions[r.next] = &session{att: att, buf: make([]byte, 0, att.DeclaredSize), deadline: time.Now().Add(timeout)}
	reply.Session = r.next
	return nil
}

// Write appends a chunk to a session's bytes. Bytes beyond the declared size
// are not kept; the session then ends in a retry.
func (r *Receiver) Write(args proto.WriteArgs, _ *proto.Empty) error {
	if len(args.Data) > proto.MaxChunk {
		return fmt.Errorf("chunk of %d bytes exceeds %d", len(args.Data), proto.MaxChunk)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sessions[args.Session]
	if !ok {
		return errors.New("unknown session")
	}
	if s.overflow || int64(len(s.buf))+int64(len(args.Data)) > s.att.DeclaredSize {
		s.overflow = true
		return nil
	}
	s.buf = append(s.buf, args.Data...)
	return nil
}

// Abort drops a session without a verdict.
func (r *Receiver) Abort(args proto.SessionArgs, _ *proto.Empty) error {
	r.take(args.Session)
	return nil
}

// Finish checks the received bytes against the declared size and sha256,
// then calls the author's Verify and returns its verdict.
func (r *Receiver) Finish(args proto.SessionArgs, reply *proto.FinishReply) error {
	s := r.take(args.Session)
	if s == nil {
		return errors.New("unknown session")
	}
	sum := sha256.Sum256(s.buf)
	if s.overflow || int64(len(s.buf)) != s.att.DeclaredSize || hex.EncodeToString(sum[:]) != s.att.SHA256 {
		*reply = proto.FinishReply{Outcome: string(Retry), Cause: string(proto.CausePluginContentMismatch)}
		return nil
	}
	ctx, cancel := context.WithDeadline(context.Background(), s.deadline)
	defer cancel()
	v, cause := r.verify(ctx, s)
	if cause == "" && ctx.Err() != nil {
		cause = proto.CauseDeadline
	}
	if cause != "" {
		*reply = proto.FinishReply{Outcome: string(Retry), Cause: string(cause)}
		return nil
	}
	*reply = proto.FinishReply{Outcome: string(v.Outcome), Reason: string(v.Reason)}
	return nil
}

// Verify runs a whole verification of at most proto.MaxChunk bytes in one
// call: Begin, Write and Finish.
func (r *Receiver) Verify(args proto.VerifyArgs, reply *proto.FinishReply) error {
	var begun proto.BeginReply
	if err := r.Begin(args.BeginArgs, &begun); err != nil {
		return err
	}
	if err := r.Write(proto.WriteArgs{Session: begun.Session, Data: args.Data}, &proto.Empty{}); err != nil {
		r.take(begun.Session)
		return err
	}
	return r.Finish(proto.SessionArgs{Session: begun.Session}, reply)
}

// verify calls the author's code, turning an error, a panic, a retry or a
// malformed verdict into a cause.
func (r *Receiver) verify(ctx context.Context, s *session) (v Verdict, cause proto.Cause) {
	defer func() {
		if recover() != nil {
			v, cause = Verdict{}, proto.CauseVerifierError
		}
	}()
	v, err := r.v.Verify(ctx, s.att, bytes.NewReader(s.buf))
	switch {
	case err != nil:
		return Verdict{}, proto.CauseVerifierError
	case !v.Valid():
		return Verdict{}, proto.CauseInvalidVerdict
	case v.Outcome == Retry:
		return Verdict{}, proto.CauseVerifierRetry
	}
	return v, ""
}

func (r *Receiver) take(id uint64) *session {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sessions[id]
	delete(r.sessions, id)
	return s
}
