package verifier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/rpc"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/internal/telemetry"
	"github.com/registrum/registrum/plugins/verifier/proto"
)

// ProcessConfig configures a verifier run out of process.
type ProcessConfig struct {
	// ID names the verifier in errors and logs.
	ID string
	// Path is the verifier binary.
	Path string
	// SHA256 is the digest the operator pinned for the binary,
	// "sha256:<64 lowercase hex>".
	SHA256 string
	// MaxBytes is the largest attachment sent to the verifier; 0 means
	// MaxContentBytes, which is also the upper bound.
	MaxBytes int64
	// Timeout bounds each call, start included; zero leaves only the
	// caller's deadline.
	Timeout time.Duration
	// StartTimeout bounds the start and handshake of the process
	// (default 10 s). A call's own deadline bounds it further.
	StartTimeout time.Duration
	// Logger receives go-plugin's own log lines; it is used at Warn level.
	// Nil means standard error.
	Logger hclog.Logger
}

// Process is a verifier binary run through go-plugin. It starts the process
// on first use, restarts it after a crash, and kills it when a call outlives
// its deadline. The binary's digest is checked against the pinned one when
// the Process is created, and go-plugin's SecureConfig checks it again before
// every start. Calls are served one
// at a time; a waiting call gives up at its own deadline.
type Process struct {
	cfg      ProcessConfig
	checksum []byte
	logger   hclog.Logger
	turn     chan struct{} // one token: the right to use the process

	mu     sync.Mutex // guards cur and closed
	cur    *instance
	closed bool

	starts atomic.Int64
}

// instance is one started plugin process.
type instance struct {
	client *plugin.Client
	cmd    *exec.Cmd
	rpc    *rpc.Client
	// dir is the process's private temporary folder: its go-plugin socket
	// and any temporary file it makes, removed once it is gone (a killed
	// plugin cannot remove its socket itself).
	dir string
}

var _ VerifyCloser = (*Process)(nil)

// NewProcess checks the configuration and the binary's pinned digest. It
// does not start the process. A missing binary or a digest mismatch is an
// error that names the file.
func NewProcess(cfg ProcessConfig) (*Process, error) {
	if cfg.ID == "" {
		return nil, errors.New("verifier: process verifier: id is empty")
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = MaxContentBytes
	}
	if cfg.MaxBytes < 1 || cfg.MaxBytes > MaxContentBytes {
		return nil, fmt.Errorf("verifier %q: maximum bytes %d outside 1..%d", cfg.ID, cfg.MaxBytes, MaxContentBytes)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("verifier %q: negative timeout", cfg.ID)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	checksum, err := parsePinnedDigest(cfg.SHA256)
	if err != nil {
		return nil, fmt.Errorf("verifier %q: sha256: %w", cfg.ID, err)
	}
	if err := CheckBinary(cfg.Path, cfg.SHA256); err != nil {
		return nil, fmt.Errorf("verifier %q: %w", cfg.ID, err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.New(&hclog.LoggerOptions{Name: "verifier." + cfg.ID, Level: hclog.Warn, Output: os.Stderr})
	}
	logger.SetLevel(hclog.Warn)
	p := &Process{cfg: cfg, checksum: checksum, logger: logger, turn: make(chan struct{}, 1)}
	p.turn <- struct{}{}
	return p, nil
}

// parsePinnedDigest decodes "sha256:<64 lowercase hex>".
func parsePinnedDigest(pinned string) ([]byte, error) {
	h, ok := strings.CutPrefix(pinned, "sha256:")
	b, err := hex.DecodeString(h)
	if !ok || err != nil || len(b) != 32 || h != strings.ToLower(h) {
		return nil, fmt.Errorf("pinned digest %q is not sha256:<64 lowercase hex>", pinned)
	}
	return b, nil
}

// CheckBinary reports whether the file at path hashes to pinned
// ("sha256:<64 lowercase hex>"), with an error naming the file and both
// digests when it does not.
func CheckBinary(path, pinned string) error {
	if _, err := parsePinnedDigest(pinned); err != nil {
		return fmt.Errorf("binary %s: %w", path, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("binary %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("binary %s: not a regular file", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("binary %s: %w", path, err)
	}
	if got := canonjson.DigestBytes(b); got != pinned {
		return fmt.Errorf("binary %s: digest mismatch: pinned %s, file has %s; refusing to run a binary that was not reviewed", path, pinned, got)
	}
	return nil
}

// Starts returns how many times a verifier process was started and
// completed the handshake, for metrics and tests.
func (p *Process) Starts() int64 { return p.starts.Load() }

// Verify sends the attachment's bytes to the verifier process and returns
// its verdict. See [Verifier].
func (p *Process) Verify(ctx context.Context, att Attachment, content io.Reader) (v Verdict, err error) {
	ctx, span := startVerifySpan(ctx, p.cfg.ID, "process")
	defer func() { endVerifySpan(span, v, err) }()
	if err := att.Validate(p.cfg.MaxBytes); err != nil {
		return retry(p.cfg.ID, CauseInvalidAttachment, nil)
	}
	if p.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.Timeout)
		defer cancel()
	}
	select {
	case <-p.turn:
	case <-ctx.Done():
		return retry(p.cfg.ID, CauseDeadline, ctx.Err())
	}
	defer func() { p.turn <- struct{}{} }()

	inst, cause, err := p.instance(ctx)
	if cause != "" {
		return retry(p.cfg.ID, cause, err)
	}
	verdict, cause, err := p.session(ctx, inst, att, content)
	if cause != "" {
		return retry(p.cfg.ID, cause, err)
	}
	return verdict, nil
}

// session runs one Begin/Write/Finish exchange. A failure that leaves the
// process in an unknown state discards it (and kills it).
func (p *Process) session(ctx context.Context, inst *instance, att Attachment, content io.Reader) (Verdict, Cause, error) {
	timeout := int64(0)
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl).Milliseconds(), 1)
	}
	begin := proto.BeginArgs{
		SlotID: att.SlotID, MediaType: att.MediaType, DeclaredSize: att.DeclaredSize,
		SHA256: att.SHA256, TimeoutMillis: timeout, Traceparent: telemetry.Traceparent(ctx),
	}
	src := newExactReader(content, att)
	var fin proto.FinishReply
	if att.DeclaredSize <= proto.MaxChunk {
		// Small content: read and check it whole, then one call.
		buf := make([]byte, att.DeclaredSize)
		if _, err := io.ReadFull(src, buf); err != nil {
			return Verdict{}, causeOr(src.cause(), CauseShorterThanDeclared), nil
		}
		if _, err := src.Read(nil); err != io.EOF {
			return Verdict{}, causeOr(src.cause(), CauseReadError), nil
		}
		if cause, err := p.call(ctx, inst, proto.MethodVerify, proto.VerifyArgs{BeginArgs: begin, Data: buf}, &fin); cause != "" {
			return Verdict{}, cause, err
		}
		return p.verdict(inst, fin)
	}
	var begun proto.BeginReply
	if cause, err := p.call(ctx, inst, proto.MethodBegin, begin, &begun); cause != "" {
		return Verdict{}, cause, err
	}
	buf := make([]byte, proto.MaxChunk)
	for {
		n, rerr := io.ReadFull(src, buf)
		if n > 0 && src.cause() == "" {
			if cause, err := p.call(ctx, inst, proto.MethodWrite, proto.WriteArgs{Session: begun.Session, Data: buf[:n]}, &proto.Empty{}); cause != "" {
				return Verdict{}, cause, err
			}
		}
		if rerr == nil {
			continue
		}
		if c := src.cause(); c != "" {
			// The host's content is wrong: the plugin must not judge it.
			if cause, err := p.call(ctx, inst, proto.MethodAbort, proto.SessionArgs{Session: begun.Session}, &proto.Empty{}); cause != "" {
				return Verdict{}, cause, err
			}
			return Verdict{}, c, nil
		}
		break // io.EOF or io.ErrUnexpectedEOF after a verified end
	}
	if cause, err := p.call(ctx, inst, proto.MethodFinish, proto.SessionArgs{Session: begun.Session}, &fin); cause != "" {
		return Verdict{}, cause, err
	}
	return p.verdict(inst, fin)
}

// causeOr returns c, or def when c is empty.
func causeOr(c, def Cause) Cause {
	if c != "" {
		return c
	}
	return def
}

// verdict checks the plugin's reply; a reply outside the protocol discards
// the process.
func (p *Process) verdict(inst *instance, fin proto.FinishReply) (Verdict, Cause, error) {
	v := Verdict{Outcome: Outcome(fin.Outcome), Reason: Reason(fin.Reason)}
	if !v.Valid() {
		p.discard(inst)
		return Verdict{}, CauseProtocol, nil
	}
	if v.Outcome == Retry {
		if c := Cause(fin.Cause); c.FromPlugin() {
			return Verdict{}, c, nil
		}
		p.discard(inst)
		return Verdict{}, CauseProtocol, nil
	}
	return v, "", nil
}

// call makes one RPC call bounded by ctx (send), as a client span of the
// caller's span named by the method ("Plugin.Write"), failed with the
// value-free cause when the call fails. net/rpc carries no metadata: the
// plugin does not receive the trace context (docs/plugins.md).
func (p *Process) call(ctx context.Context, inst *instance, method string, args, reply any) (Cause, error) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return p.send(ctx, inst, method, args, reply)
	}
	_, span := telemetry.StartSpan(ctx, method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("rpc.system", "net_rpc"), attribute.String("rpc.method", method),
		attribute.String("registrum.verifier", p.cfg.ID)))
	defer span.End()
	cause, err := p.send(ctx, inst, method, args, reply)
	if cause != "" {
		span.SetAttributes(attribute.String("registrum.verifier.cause", string(cause)))
		span.SetStatus(codes.Error, "the call failed")
	}
	return cause, err
}

// send makes one RPC call bounded by ctx. When ctx ends first, or the
// connection fails, the process is killed and discarded; an error the plugin
// returned is a protocol failure and discards it too.
func (p *Process) send(ctx context.Context, inst *instance, method string, args, reply any) (Cause, error) {
	c := inst.rpc.Go(method, args, reply, make(chan *rpc.Call, 1))
	select {
	case <-c.Done:
	case <-ctx.Done():
		p.discard(inst)
		return CauseDeadline, ctx.Err()
	}
	if c.Error == nil {
		return "", nil
	}
	p.discard(inst)
	var se rpc.ServerError
	if errors.As(c.Error, &se) {
		return CauseProtocol, nil
	}
	return CauseCrashed, nil
}

// instance returns the running process, starting one when there is none or
// the last one exited.
func (p *Process) instance(ctx context.Context) (*instance, Cause, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, CauseClosed, nil
	}
	inst := p.cur
	p.mu.Unlock()
	if inst != nil && !inst.client.Exited() {
		return inst, "", nil
	}
	if inst != nil {
		p.discard(inst)
	}
	return p.start(ctx)
}

type started struct {
	inst  *instance
	cause Cause
}

// start launches the binary and completes the go-plugin handshake, giving up
// at ctx's deadline (the abandoned start is cleaned up in the background).
func (p *Process) start(ctx context.Context) (*instance, Cause, error) {
	// go-plugin's SecureConfig hashes the file before it runs it, so a
	// binary changed since it was reviewed is never started; a missing file
	// is reported the same way.
	if info, err := os.Stat(p.cfg.Path); err != nil || !info.Mode().IsRegular() {
		p.logger.Warn("verifier binary missing", "verifier", p.cfg.ID)
		return nil, CauseBinaryChanged, nil
	}
	dir, err := os.MkdirTemp("", "registrum-verifier-")
	if err != nil {
		p.logger.Warn("verifier process not started: no temporary folder for it", "verifier", p.cfg.ID, "error", err)
		return nil, CauseStartFailed, nil
	}
	cmd := exec.Command(p.cfg.Path)
	// Nothing of the host's environment reaches the plugin; its socket
	// (go-plugin's server reads PLUGIN_UNIX_SOCKET_DIR) and temporary
	// files go to a folder of its own, removed with it.
	cmd.Env = []string{plugin.EnvUnixSocketDir + "=" + dir, "TMPDIR=" + dir}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  proto.Handshake,
		Plugins:          plugin.PluginSet{proto.PluginName: &proto.Plugin{}},
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolNetRPC},
		SecureConfig:     &plugin.SecureConfig{Checksum: p.checksum, Hash: sha256.New()},
		StartTimeout:     p.cfg.StartTimeout,
		Logger:           p.logger,
	})
	done := make(chan started, 1)
	go func() {
		res := p.handshake(client, cmd)
		if res.inst != nil {
			res.inst.dir = dir
		} else {
			os.RemoveAll(dir) // the failed start's process is killed
		}
		done <- res
	}()
	select {
	case res := <-done:
		if res.cause != "" {
			return nil, res.cause, nil
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			go kill(res.inst)
			return nil, CauseClosed, nil
		}
		p.cur = res.inst
		return res.inst, "", nil
	case <-ctx.Done():
		go func() {
			if res := <-done; res.inst != nil {
				kill(res.inst)
			}
		}()
		return nil, CauseDeadline, ctx.Err()
	}
}

// handshake waits for the plugin to start and dispenses the verifier.
func (p *Process) handshake(client *plugin.Client, cmd *exec.Cmd) started {
	rpcClient, err := client.Client()
	if errors.Is(err, plugin.ErrChecksumsDoNotMatch) {
		p.logger.Warn("verifier binary no longer matches its pinned digest; not started", "verifier", p.cfg.ID)
		client.Kill()
		return started{cause: CauseBinaryChanged}
	}
	if err != nil {
		// go-plugin's error may quote the plugin's stdout: log only that it failed.
		p.logger.Warn("verifier process failed to start or complete the handshake", "verifier", p.cfg.ID)
		client.Kill()
		return started{cause: CauseStartFailed}
	}
	raw, err := rpcClient.Dispense(proto.PluginName)
	if err != nil {
		client.Kill()
		return started{cause: CauseStartFailed}
	}
	rc, ok := raw.(*rpc.Client)
	if !ok {
		client.Kill()
		return started{cause: CauseStartFailed}
	}
	p.starts.Add(1)
	return started{inst: &instance{client: client, cmd: cmd, rpc: rc}}
}

// discard forgets inst (if it is still current) and kills its process.
func (p *Process) discard(inst *instance) {
	p.mu.Lock()
	if p.cur == inst {
		p.cur = nil
	}
	p.mu.Unlock()
	kill(inst)
}

// kill stops the process at once and lets go-plugin clean up in the
// background, so the caller never waits for a misbehaving plugin; the
// process's folder is removed once go-plugin is done with it.
func kill(inst *instance) {
	if inst.cmd.Process != nil {
		_ = inst.cmd.Process.Kill()
	}
	go stop(inst)
}

// stop ends the process through go-plugin and removes its folder.
func stop(inst *instance) {
	inst.client.Kill()
	os.RemoveAll(inst.dir)
}

// Close stops the verifier process. Calls after Close return a Retry with
// CauseClosed.
func (p *Process) Close() error {
	p.mu.Lock()
	p.closed = true
	inst := p.cur
	p.cur = nil
	p.mu.Unlock()
	if inst != nil {
		stop(inst)
	}
	return nil
}
