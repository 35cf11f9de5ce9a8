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
	att         Attachment
	buf         []byte
	deadline    time.Time
	overflow    bool
	traceparent string
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
	r.sessions[r.next] = &session{att: att, buf: make([]byte, 0, att.DeclaredSize), deadline: time.Now().Add(timeout),
		traceparent: wellFormedTraceparent(args.Traceparent)}
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
	if s.traceparent != "" {
		ctx = context.WithValue(ctx, traceparentKey{}, s.traceparent)
	}
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

// traceparentKey keys the host's traceparent in the author's context.
type traceparentKey struct{}

// Traceparent returns the W3C traceparent of the host's verification span
// that ctx, the context Verify is called with, carries: "" when the host
// does not trace it (or predates it). A verifier that traces its own work
// continues the host's trace from it, for example with OpenTelemetry's
// propagation.TraceContext and a MapCarrier holding "traceparent". It names
// the host's span only: it carries no value of the content.
func Traceparent(ctx context.Context) string {
	tp, _ := ctx.Value(traceparentKey{}).(string)
	return tp
}

// wellFormedTraceparent returns tp when it has the form of a version 00
// W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>), "" otherwise: the author
// gets a usable value or none.
func wellFormedTraceparent(tp string) string {
	if len(tp) != 55 || tp[:3] != "00-" || tp[35] != '-' || tp[52] != '-' {
		return ""
	}
	for i := 3; i < 55; i++ {
		if i == 35 || i == 52 {
			continue
		}
		if c := tp[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return ""
		}
	}
	return tp
}
