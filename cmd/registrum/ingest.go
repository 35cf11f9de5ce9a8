package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/registrum/registrum/cmd/registrum/internal/invocation"
	"github.com/registrum/registrum/internal/chunking"
	"github.com/registrum/registrum/sdk/ingest"
	"github.com/registrum/registrum/sdk/tokensource"
)

func init() { register(newIngestCmd) }

// ingestFlags are the options of registrum ingest.
type ingestFlags struct {
	url, route, profile, operation, runID  string
	tokenFile, clientID, keyFile, tokenURL string
	issuerURL                              string
	retryFor                               time.Duration
	// invoked is how the user invoked registrum (invocation.Command), for
	// the printed resume and successor commands; empty prints "registrum".
	invoked string
}

func newIngestCmd() *cobra.Command {
	var f ingestFlags
	cmd := &cobra.Command{
		Use:   "ingest --url URL --route ROUTE --profile PROFILE [--run RUN_ID] FILE.jsonl",
		Short: "Import a JSONL file of batch items through an ingestion run, resumably",
		Long: `Import a JSONL file through an ingestion run of the record host.

Each line of FILE.jsonl is one batch item of the run's operation, e.g.
  {"operation":"create","data":{"caseNumber":"CS-1001", …}}
The file is cut into chunks by greedy-canonical-http-batch-v1 under the
route's batch bounds, a run announcing it is opened, and the chunks are
submitted in order. Each chunk commits atomically; a chunk whose answer is
lost, or that meets a host that is down, is resubmitted as it is (a
committed chunk answers its stored receipt and writes nothing).

After Ctrl-C or a crash, run the same command with --run RUN_ID (printed
when the run opens): it goes on from the run's next chunk. When the host
refuses an item, the run stops there: rows are never skipped; the message
names the line, and the remedy is a successor run over the rest of the file.

The bearer token comes from --token-file, else the REGISTRUM_TOKEN
environment variable, else it is obtained with the client's private key
(--client-id, --key and --token-url or --issuer). A token is never taken
on the command line.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.invoked = invocation.Command()
			return runIngest(cmd.Context(), cmd.OutOrStdout(), f, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "", "the record host's URL (required)")
	fl.StringVar(&f.route, "route", "", "the entity's route, e.g. cases (required)")
	fl.StringVar(&f.profile, "profile", "", "the access profile the run is bound to (required)")
	fl.StringVar(&f.operation, "operation", ingest.Create, "the run's operation: create or patch")
	fl.StringVar(&f.runID, "run", "", "resume this run instead of opening a new one")
	fl.StringVar(&f.tokenFile, "token-file", "", "a file holding the bearer token")
	fl.StringVar(&f.clientID, "client-id", "", "obtain the token as this client (with --key)")
	fl.StringVar(&f.keyFile, "key", "", "the client's private JWK file, owner-only")
	fl.StringVar(&f.tokenURL, "token-url", "", "the issuer's token endpoint")
	fl.StringVar(&f.issuerURL, "issuer", "", "the issuer's URL (its discovery document names the token endpoint)")
	fl.DurationVar(&f.retryFor, "retry-for", 10*time.Minute, "how long a chunk is retried while the host is unreachable or unavailable")
	for _, name := range []string{"url", "route", "profile"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// bearer returns the token function the flags and environment choose.
func (f ingestFlags) bearer() (func(context.Context) (string, error), error) {
	minted := f.clientID != "" || f.keyFile != ""
	switch {
	case f.tokenFile != "" && minted:
		return nil, withExitCode(2, errors.New("ingest: --token-file and --client-id/--key exclude each other"))
	case f.tokenFile != "":
		b, err := readTokenFile(f.tokenFile)
		if err != nil {
			return nil, withExitCode(2, err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return nil, withExitCode(2, fmt.Errorf("ingest: the token file %s is empty", f.tokenFile))
		}
		return func(context.Context) (string, error) { return tok, nil }, nil
	case minted:
		if f.clientID == "" || f.keyFile == "" || (f.tokenURL == "" && f.issuerURL == "") {
			return nil, withExitCode(2, errors.New("ingest: a token obtained with a key needs --client-id, --key and --token-url (or --issuer)"))
		}
		key, err := tokensource.LoadKeyFile(f.keyFile)
		if err != nil {
			return nil, withExitCode(2, err)
		}
		src, err := tokensource.New(tokensource.Config{Issuer: f.issuerURL, TokenURL: f.tokenURL, ClientID: f.clientID, Key: key})
		if err != nil {
			return nil, withExitCode(2, err)
		}
		return func(ctx context.Context) (string, error) {
			t, err := src.Token(ctx)
			if err != nil {
				return "", err
			}
			return t.AccessToken, nil
		}, nil
	case os.Getenv("REGISTRUM_TOKEN") != "":
		tok := strings.TrimSpace(os.Getenv("REGISTRUM_TOKEN"))
		return func(context.Context) (string, error) { return tok, nil }, nil
	}
	return nil, withExitCode(2, errors.New("ingest: no bearer token: give --token-file, set REGISTRUM_TOKEN, or --client-id, --key and --token-url"))
}

// maxTokenFileBytes bounds a --token-file.
const maxTokenFileBytes = 64 << 10

// readTokenFile reads a --token-file: a regular file of at most
// maxTokenFileBytes readable by its owner only, as a --key file must be.
func readTokenFile(path string) ([]byte, error) {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		// Refused before opening: opening a FIFO would wait for a writer.
		return nil, fmt.Errorf("ingest: the token file %s must be a regular file of at most %d bytes", path, maxTokenFileBytes)
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ingest: token file: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("ingest: token file: %w", err)
	}
	if !st.Mode().IsRegular() || st.Size() > maxTokenFileBytes {
		return nil, fmt.Errorf("ingest: the token file %s must be a regular file of at most %d bytes", path, maxTokenFileBytes)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("ingest: the token file %s has mode %04o; it must be readable by its owner only (chmod 600)", path, st.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxTokenFileBytes+1))
	if err != nil || len(b) > maxTokenFileBytes {
		return nil, fmt.Errorf("ingest: the token file %s could not be read whole (at most %d bytes)", path, maxTokenFileBytes)
	}
	return b, nil
}

// checkHostURL accepts an http or https URL with a host and an optional
// path: no credentials (the resume command prints the URL), query or
// fragment. The refusal does not repeat the URL, which may hold a secret.
func checkHostURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#") {
		return errors.New("ingest: --url must be the host's http or https URL, such as http://127.0.0.1:8080, without credentials, query or fragment (the bearer token goes in --token-file)")
	}
	return nil
}

// command is the command line that runs this import again (no secret: a
// token is never on it), with extra flags, naming the binary as the user
// invoked it.
func (f ingestFlags) command(file string, extra ...string) string {
	parts := []string{"ingest", "--url", f.url, "--route", f.route, "--profile", f.profile}
	if f.operation != ingest.Create {
		parts = append(parts, "--operation", f.operation)
	}
	for _, o := range [][2]string{{"--token-file", f.tokenFile}, {"--client-id", f.clientID}, {"--key", f.keyFile}, {"--token-url", f.tokenURL}, {"--issuer", f.issuerURL}} {
		if o[1] != "" {
			parts = append(parts, o[0], o[1])
		}
	}
	parts = append(parts, extra...)
	if strings.HasPrefix(file, "-") {
		parts = append(parts, "--") // a file, not a flag
	}
	parts = append(parts, file)
	for i, p := range parts {
		parts[i] = invocation.ShellQuote(p)
	}
	invoked := f.invoked
	if invoked == "" {
		invoked = "registrum"
	}
	return invoked + " " + strings.Join(parts, " ")
}

// runIngest imports file. Its messages number chunks and items from 1, as
// lines are (the SDK's chunk indexes are from 0).
func runIngest(ctx context.Context, out io.Writer, f ingestFlags, file string) error {
	if f.operation != ingest.Create && f.operation != ingest.Patch {
		return withExitCode(2, fmt.Errorf("ingest: --operation is create or patch, not %q", f.operation))
	}
	if err := checkHostURL(f.url); err != nil {
		return withExitCode(2, err)
	}
	token, err := f.bearer()
	if err != nil {
		return err
	}
	src, err := os.Open(file)
	if err != nil {
		return withExitCode(2, fmt.Errorf("ingest: %w", err))
	}
	defer src.Close()
	c := &ingest.Client{BaseURL: f.url, Route: f.route, Profile: f.profile, Token: token, RetryFor: f.retryFor}
	c.Retrying = func(chunk int, err error, wait time.Duration) {
		fmt.Fprintf(out, "chunk %d: %v; retrying in %v\n", chunk+1, err, wait.Round(time.Millisecond))
	}

	var run *ingest.Run
	var bounds ingest.Bounds
	var binding *ingest.Binding
	if f.runID != "" {
		// A resumed run keeps the bounds it was opened with.
		if run, err = c.Run(ctx, f.runID); err != nil {
			return err
		}
		bounds = ingest.Bounds{MaximumItems: run.MaximumItems, MaximumBytes: run.MaximumBytes}
		if run.Operation != f.operation {
			return withExitCode(2, fmt.Errorf("ingest: run %s is a %s run: give --operation %s", run.RunID, run.Operation, run.Operation))
		}
	} else {
		if binding, err = c.Binding(ctx); err != nil {
			return err
		}
		bounds = binding.Bounds
	}
	start := time.Now()
	plan, err := ingest.PlanReader(src, f.operation, bounds)
	var le *chunking.LineError
	if errors.As(err, &le) {
		return fmt.Errorf("ingest: %s, line %d is not a %s item: %v (nothing was sent)", file, le.Line, f.operation, le.Err)
	}
	if err != nil {
		return fmt.Errorf("ingest: %s: %w", file, err)
	}
	fmt.Fprintf(out, "%s: %d items, %s, %d chunks of at most %d items and %s (planned in %v)\n",
		file, plan.ItemCount, size(plan.InputLength), len(plan.Chunks), bounds.MaximumItems, size(bounds.MaximumBytes), time.Since(start).Round(time.Millisecond))
	if run == nil {
		if run, err = c.Open(ctx, plan, binding); err != nil {
			return err
		}
		fmt.Fprintf(out, "run %s opened\n", run.RunID)
	} else {
		if err := ingest.Matches(run, plan); err != nil {
			return err
		}
		fmt.Fprintf(out, "run %s resumed at chunk %d of %d (%d items committed)\n", run.RunID, run.NextChunkIndex+1, len(plan.Chunks), run.CommittedItems)
	}
	fmt.Fprintf(out, "after an interruption, resume with:\n  %s\n", f.command(file, "--run", run.RunID))

	meter := newMeter(out, plan, run)
	began := time.Now()
	done, err := c.Upload(ctx, run, plan, src, meter.chunk)
	meter.finish()
	var refusal *ingest.Refusal
	switch {
	case err == nil:
		took := time.Since(began)
		fmt.Fprintf(out, "run %s complete: %d items in %d chunks (%d sent now, %d replayed) in %v, %.0f items/s; chunk round trip p50 %v, p99 %v\n",
			done.RunID, done.ItemCount, done.ChunkCount, meter.sent, meter.replayed, took.Round(time.Millisecond),
			float64(meter.items)/took.Seconds(), meter.quantile(0.50), meter.quantile(0.99))
		return nil
	case errors.As(err, &refusal):
		return refusedMessage(f, file, refusal)
	case ctx.Err() != nil:
		return fmt.Errorf("ingest: interrupted; run %s has %d of %d items committed; resume with:\n  %s", run.RunID, done.CommittedItems, plan.ItemCount, f.command(file, "--run", run.RunID))
	}
	return fmt.Errorf("%w\nrun %s has %d of %d items committed; resume with:\n  %s", err, run.RunID, done.CommittedItems, plan.ItemCount, f.command(file, "--run", run.RunID))
}

// refusedMessage explains a refused chunk: which line, why, and the
// successor run that takes the rest of the file.
func refusedMessage(f ingestFlags, file string, r *ingest.Refusal) error {
	var b strings.Builder
	switch {
	case r.Line > 0:
		fmt.Fprintf(&b, "ingest: the host refused line %d of %s (item %d of chunk %d): %v\n", r.Line, file, r.Line-r.Chunk.FirstItem, r.Chunk.Index+1, r.Problem)
	default:
		fmt.Fprintf(&b, "ingest: the host refused chunk %d (lines %d-%d of %s): %v\n", r.Chunk.Index+1, r.Chunk.FirstItem+1, r.Chunk.FirstItem+r.Chunk.Items, file, r.Problem)
	}
	blocked := r.Outcome == "bindingChanged" || r.Run.Status == "blocked"
	switch {
	case blocked:
		fmt.Fprintf(&b, "The active package changed since run %s was opened (activePackageChanged): the run is blocked and never reinterprets the rest of the file.\n", r.Run.RunID)
	case r.Run.Status == "cancelled" || r.Run.Status == "complete":
		fmt.Fprintf(&b, "Run %s is %s.\n", r.Run.RunID, r.Run.Status)
	default:
		fmt.Fprintf(&b, "Run %s stops here with its first %d items committed; rows are never skipped, so it cannot go on.\n", r.Run.RunID, r.Committed)
	}
	what := "Correct the source and start a successor run"
	if blocked {
		what = "Start a successor run under the new package"
	}
	if r.Committed == 0 {
		fmt.Fprintf(&b, "%s over the whole file:\n  %s", what, f.command(file))
	} else {
		rest := strings.TrimSuffix(file, ".jsonl") + ".rest.jsonl"
		fmt.Fprintf(&b, "%s over the rest of the file, from line %d:\n  tail -n +%d %s > %s\n  %s", what, r.Committed+1, r.Committed+1, invocation.ShellQuote(file), invocation.ShellQuote(rest), f.command(rest))
	}
	return errors.New(b.String())
}

// meter shows progress: a bar on a terminal, plain lines otherwise.
type meter struct {
	out      io.Writer
	bar      *progressbar.ProgressBar
	total    int64
	sent     int
	replayed int
	items    int
	last     time.Time
	tooks    []time.Duration
}

func newMeter(out io.Writer, plan *ingest.Plan, run *ingest.Run) *meter {
	m := &meter{out: out, total: plan.InputLength, last: time.Now()}
	if fd, ok := out.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(fd.Fd())) {
		m.bar = progressbar.NewOptions64(int64(plan.ItemCount),
			progressbar.OptionSetWriter(out),
			progressbar.OptionSetDescription(fmt.Sprintf("%s / %s", size(committedBytes(plan, run)), size(plan.InputLength))),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("items"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(30),
			progressbar.OptionUseIECUnits(true),
		)
		_ = m.bar.Set(run.CommittedItems)
	}
	return m
}

// chunk hears of one committed chunk.
func (m *meter) chunk(p ingest.Progress) {
	m.sent++
	if p.Replayed {
		m.replayed++
	}
	m.items += p.Chunk.Items
	m.tooks = append(m.tooks, p.Took)
	if m.bar != nil {
		m.bar.Describe(fmt.Sprintf("%s / %s", size(p.CommittedBytes), size(m.total)))
		_ = m.bar.Set(p.CommittedItems)
		return
	}
	if p.Replayed {
		fmt.Fprintf(m.out, "chunk %d had been committed already: the host answered its stored receipt\n", p.Chunk.Index+1)
	}
	if now := time.Now(); now.Sub(m.last) >= 2*time.Second || p.Run.Complete {
		m.last = now
		fmt.Fprintf(m.out, "committed %d/%d items, %s of %s (chunk %d of %d)\n", p.CommittedItems, p.Run.ItemCount, size(p.CommittedBytes), size(m.total), p.Chunk.Index+1, p.Run.ChunkCount)
	}
}

func (m *meter) finish() {
	if m.bar != nil {
		_ = m.bar.Exit()
		fmt.Fprintln(m.out)
	}
}

// quantile is the q-quantile of the chunk round trips of this import.
func (m *meter) quantile(q float64) time.Duration {
	if len(m.tooks) == 0 {
		return 0
	}
	s := slices.Clone(m.tooks)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))].Round(100 * time.Microsecond)
}

// committedBytes is how much of the source run has committed.
func committedBytes(plan *ingest.Plan, run *ingest.Run) int64 {
	if n := run.NextChunkIndex; n > 0 && n <= len(plan.Chunks) {
		return plan.Chunks[n-1].Offset + plan.Chunks[n-1].Length
	}
	return 0
}

// size is n bytes in the unit that shows it: bytes below 1 KiB, then KiB
// and MiB with one decimal, so a small file's progress is not "0.0 MiB".
func size(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
