package requests

// Attachment verification: this file runs the attachment verification jobs: each pending
// verdict (content, media type, verification policy) is claimed under a
// durable lease, its content streamed to the slot's verifier through the
// plugin runtime (plugins/verifier: go-plugin binaries with pinned digests,
// or http scanners), and the verdict committed under the lease. A verifier
// that gives no decision leaves the verdict pending and the job retries
// with backoff; every attempt and verdict is audited.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/plugins/verifier"
	"github.com/registrum/registrum/store"
)

// VerificationOptions tune the worker.
type VerificationOptions struct {
	// Lease is how long a claimed verdict stays with one worker (default
	// 4 minutes); it must outlast a verifier call.
	Lease time.Duration
	// MaxBackoff caps the wait between two attempts (default 5 minutes).
	MaxBackoff time.Duration
}

// VerificationWorker verifies attachments.
type VerificationWorker struct {
	river.WorkerDefaults[store.VerifyAttachmentArgs]
	store     *store.Store
	content   store.ContentStore
	verifiers map[string]verifier.VerifyCloser
	log       *slog.Logger
	opts      VerificationOptions
}

// RegisterVerification adds the verification worker to w. verifiers are the package's
// opened verifiers by id; content is where attachment content is kept.
func RegisterVerification(w *river.Workers, st *store.Store, content store.ContentStore, verifiers map[string]verifier.VerifyCloser, log *slog.Logger, o VerificationOptions) (*VerificationWorker, error) {
	if o.Lease <= 0 {
		o.Lease = 4 * time.Minute
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	wk := &VerificationWorker{store: st, content: content, verifiers: verifiers, log: log, opts: o}
	if err := river.AddWorkerSafely(w, wk); err != nil {
		return nil, fmt.Errorf("verification: %w", err)
	}
	return wk, nil
}

// NextRetry backs off exponentially from one second, capped by MaxBackoff.
func (w *VerificationWorker) NextRetry(job *river.Job[store.VerifyAttachmentArgs]) time.Time {
	d := time.Second << min(job.Attempt, 20)
	return time.Now().Add(min(d, w.opts.MaxBackoff))
}

// Timeout lets a call run as long as the lease allows.
func (w *VerificationWorker) Timeout(*river.Job[store.VerifyAttachmentArgs]) time.Duration {
	return w.opts.Lease
}

// Work claims the verdict, runs the verifier and settles the verdict.
func (w *VerificationWorker) Work(ctx context.Context, job *river.Job[store.VerifyAttachmentArgs]) error {
	trace := records.TraceIDOf(ctx)
	v, err := w.store.ClaimVerification(ctx, job.Args.VerificationKey, w.opts.Lease, trace)
	var held *store.ErrLeaseHeld
	switch {
	case errors.As(err, &held):
		return river.JobSnooze(time.Until(held.RetryAt) + time.Second)
	case err != nil:
		return err
	case v == nil:
		return nil // settled already (reused, or another attempt won)
	}
	verdict, err := w.verify(ctx, v)
	if errors.Is(err, store.ErrContentMissing) {
		// Erased before it could be verified: nothing is left to decide.
		if rerr := w.store.ReleaseVerification(context.WithoutCancel(ctx), v, trace); rerr != nil {
			return rerr
		}
		if derr := w.store.DropOrphanVerification(context.WithoutCancel(ctx), v.VerificationKey); derr != nil {
			return derr
		}
		return river.JobCancel(err)
	}
	if err != nil {
		w.log.Warn("attachment verification gave no decision; it stays pending and is retried",
			"trace", trace, "verifier", v.Verifier, "attempt", v.Attempts, "cause", string(verifier.CauseOf(err)))
		if rerr := w.store.ReleaseVerification(context.WithoutCancel(ctx), v, trace); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err // River retries with backoff
	}
	settled, err := w.store.SettleVerification(context.WithoutCancel(ctx), v, verdict, trace)
	if err != nil {
		return err
	}
	if !settled {
		w.log.Info("attachment verdict discarded: the content was erased or the lease lost meanwhile", "trace", trace, "verifier", v.Verifier)
	}
	return nil
}

// verify streams the content to the verifier; the error is a
// *verifier.Failure (or a content failure) when no decision was reached.
func (w *VerificationWorker) verify(ctx context.Context, v *store.Verification) (string, error) {
	vf, ok := w.verifiers[v.Verifier]
	if !ok {
		return "", fmt.Errorf("verification: verifier %q is not loaded on this host", v.Verifier)
	}
	body, err := w.content.Open(ctx, v.SHA256)
	if err != nil {
		return "", fmt.Errorf("verification: open content: %w", err)
	}
	defer body.Close()
	got, err := vf.Verify(ctx, verifier.Attachment{SlotID: v.SlotID, MediaType: v.ContentType, DeclaredSize: v.Size, SHA256: v.SHA256}, body)
	if err != nil {
		return "", err
	}
	switch got.Outcome {
	case verifier.Approved:
		return store.VerificationApproved, nil
	case verifier.Rejected:
		return store.VerificationRejected, nil
	}
	return "", &verifier.Failure{Verifier: v.Verifier, Cause: verifier.CauseProtocol}
}
