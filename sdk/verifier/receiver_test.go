package verifier_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/plugins/verifier/proto"
	"github.com/registrum/registrum/sdk/verifier"
)

// recorder is an author's verifier that records what it was given.
type recorder struct {
	calls    int
	got      []byte
	att      verifier.Attachment
	deadline time.Time
	verdict  verifier.Verdict
	err      error
	panics   bool
}

func (r *recorder) Verify(ctx context.Context, att verifier.Attachment, content io.Reader) (verifier.Verdict, error) {
	r.calls++
	r.att = att
	r.deadline, _ = ctx.Deadline()
	b, err := io.ReadAll(content)
	if err != nil {
		return verifier.Verdict{}, err
	}
	r.got = b
	if r.panics {
		panic("author bug")
	}
	return r.verdict, r.err
}

func begin(t *testing.T, rcv *verifier.Receiver, content string, timeoutMillis int64) uint64 {
	t.Helper()
	sum := sha256.Sum256([]byte(content))
	var reply proto.BeginReply
	if err := rcv.Begin(proto.BeginArgs{SlotID: "evidence", MediaType: "image/png", DeclaredSize: int64(len(content)), SHA256: hex.EncodeToString(sum[:]), TimeoutMillis: timeoutMillis}, &reply); err != nil {
		t.Fatal(err)
	}
	return reply.Session
}

func write(t *testing.T, rcv *verifier.Receiver, s uint64, data string) {
	t.Helper()
	if err := rcv.Write(proto.WriteArgs{Session: s, Data: []byte(data)}, &proto.Empty{}); err != nil {
		t.Fatal(err)
	}
}

func finish(t *testing.T, rcv *verifier.Receiver, s uint64) proto.FinishReply {
	t.Helper()
	var reply proto.FinishReply
	if err := rcv.Finish(proto.SessionArgs{Session: s}, &reply); err != nil {
		t.Fatal(err)
	}
	return reply
}

func TestAuthorGetsExactlyTheCheckedBytes(t *testing.T) {
	author := &recorder{verdict: verifier.Reject(verifier.ReasonMalformed)}
	rcv := verifier.NewReceiver(author)
	s := begin(t, rcv, "hello world", 1500)
	write(t, rcv, s, "hello ")
	write(t, rcv, s, "world")
	before := time.Now()
	got := finish(t, rcv, s)
	if got != (proto.FinishReply{Outcome: "rejected", Reason: "malformed"}) {
		t.Fatalf("reply %+v", got)
	}
	if string(author.got) != "hello world" || author.att.SlotID != "evidence" || author.att.MediaType != "image/png" || author.att.DeclaredSize != 11 {
		t.Fatalf("author saw %q, %+v", author.got, author.att)
	}
	if d := author.deadline.Sub(before); d > 1500*time.Millisecond || d < time.Second {
		t.Fatalf("author's deadline is %v away, want about the host's 1.5 s", d)
	}
}

func TestContentNotMatchingItsMetadataNeverReachesTheAuthor(t *testing.T) {
	cases := map[string][]string{
		"longer":  {"hello world", "!"},
		"shorter": {"hello worl"},
		"altered": {"hello World"},
	}
	for name, chunks := range cases {
		author := &recorder{verdict: verifier.Approve()}
		rcv := verifier.NewReceiver(author)
		s := begin(t, rcv, "hello world", 0)
		for _, c := range chunks {
			write(t, rcv, s, c)
		}
		got := finish(t, rcv, s)
		if got != (proto.FinishReply{Outcome: "retry", Cause: string(proto.CausePluginContentMismatch)}) {
			t.Fatalf("%s: reply %+v", name, got)
		}
		if author.calls != 0 {
			t.Fatalf("%s: author called", name)
		}
	}
}

func TestAuthorFailuresBecomeValueFreeRetries(t *testing.T) {
	cases := map[string]struct {
		author *recorder
		cause  proto.Cause
	}{
		"error":                {&recorder{err: errors.New("secret detail")}, proto.CauseVerifierError},
		"panic":                {&recorder{panics: true}, proto.CauseVerifierError},
		"retry":                {&recorder{verdict: verifier.Verdict{Outcome: verifier.Retry}}, proto.CauseVerifierRetry},
		"no reason":            {&recorder{verdict: verifier.Verdict{Outcome: verifier.Rejected}}, proto.CauseInvalidVerdict},
		"unknown reason":       {&recorder{verdict: verifier.Verdict{Outcome: verifier.Rejected, Reason: "secret words"}}, proto.CauseInvalidVerdict},
		"approved with reason": {&recorder{verdict: verifier.Verdict{Outcome: verifier.Approved, Reason: verifier.ReasonPolicy}}, proto.CauseInvalidVerdict},
		"zero verdict":         {&recorder{}, proto.CauseInvalidVerdict},
	}
	for name, tc := range cases {
		rcv := verifier.NewReceiver(tc.author)
		s := begin(t, rcv, "x", 0)
		write(t, rcv, s, "x")
		got := finish(t, rcv, s)
		if got != (proto.FinishReply{Outcome: "retry", Cause: string(tc.cause)}) {
			t.Fatalf("%s: reply %+v", name, got)
		}
	}
}

func TestReceiverLimits(t *testing.T) {
	rcv := verifier.NewReceiver(&recorder{verdict: verifier.Approve()})
	var reply proto.BeginReply
	big := proto.BeginArgs{SlotID: "s", MediaType: "image/png", DeclaredSize: proto.MaxContentBytes + 1, SHA256: strings.Repeat("0", 64)}
	if err := rcv.Begin(big, &reply); err == nil {
		t.Fatal("content over 16 MiB accepted")
	}
	big.DeclaredSize = proto.MaxContentBytes
	if err := rcv.Begin(big, &reply); err != nil {
		t.Fatalf("content of exactly 16 MiB refused: %v", err)
	}
	if err := rcv.Begin(proto.BeginArgs{SlotID: "s", MediaType: "image/png", DeclaredSize: 1, SHA256: "nothex"}, &reply); err == nil {
		t.Fatal("malformed digest accepted")
	}
	if err := rcv.Write(proto.WriteArgs{Session: reply.Session, Data: make([]byte, proto.MaxChunk+1)}, &proto.Empty{}); err == nil {
		t.Fatal("oversized chunk accepted")
	}
	if err := rcv.Write(proto.WriteArgs{Session: reply.Session, Data: make([]byte, proto.MaxChunk)}, &proto.Empty{}); err != nil {
		t.Fatalf("chunk of exactly MaxChunk refused: %v", err)
	}
	for range proto.MaxSessions - 1 {
		begin(t, rcv, "x", 0)
	}
	if err := rcv.Begin(proto.BeginArgs{SlotID: "s", MediaType: "image/png", DeclaredSize: 1, SHA256: strings.Repeat("0", 64)}, &reply); err == nil {
		t.Fatalf("session %d accepted", proto.MaxSessions+1)
	}
	if err := rcv.Abort(proto.SessionArgs{Session: 1}, &proto.Empty{}); err != nil {
		t.Fatal(err)
	}
	begin(t, rcv, "x", 0) // room again after the abort
	if err := rcv.Write(proto.WriteArgs{Session: 999, Data: []byte("x")}, &proto.Empty{}); err == nil {
		t.Fatal("write to an unknown session accepted")
	}
	if err := rcv.Finish(proto.SessionArgs{Session: 1}, &proto.FinishReply{}); err == nil {
		t.Fatal("finish of an aborted session accepted")
	}
}

func TestOneCallVerify(t *testing.T) {
	author := &recorder{verdict: verifier.Approve()}
	rcv := verifier.NewReceiver(author)
	sum := sha256.Sum256([]byte("hello"))
	args := proto.VerifyArgs{BeginArgs: proto.BeginArgs{SlotID: "s", MediaType: "text/plain", DeclaredSize: 5, SHA256: hex.EncodeToString(sum[:])}, Data: []byte("hello")}
	var reply proto.FinishReply
	if err := rcv.Verify(args, &reply); err != nil || reply.Outcome != "approved" || string(author.got) != "hello" {
		t.Fatalf("%+v, %v, author saw %q", reply, err, author.got)
	}
	args.Data = []byte("hellO")
	if err := rcv.Verify(args, &reply); err != nil || reply.Cause != string(proto.CausePluginContentMismatch) || author.calls != 1 {
		t.Fatalf("altered: %+v, %v, %d calls", reply, err, author.calls)
	}
	args.Data = make([]byte, proto.MaxChunk+1)
	if err := rcv.Verify(args, &reply); err == nil {
		t.Fatal("oversized one-call data accepted")
	}
	// A refused call leaves no session behind.
	for range proto.MaxSessions {
		begin(t, rcv, "x", 0)
	}
}
