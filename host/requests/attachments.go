package requests

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/store"
)

// Operations journaled for slot changes (the request record's revision).
const (
	opAttachmentUpload = "attachment_upload"
	opAttachmentRemove = "attachment_remove"
)

// ContentStore returns the store attachment content is kept in.
func (s *Service) ContentStore() store.ContentStore { return s.content }

// PolicyDigest returns the digest of a slot's verification policy
// (model.Package.VerificationPolicyDigest), "" when it has none.
func PolicyDigest(p *model.Package, slot *model.AttachmentSlot) string {
	return p.VerificationPolicyDigest(slot)
}

// Upload is an attachment upload as the edge hands it over: the body is
// read by the service, never before it has checked the caller.
type Upload struct {
	SlotID      string
	IfMatch     string
	ContentType string
	// Length is the declared Content-Length, -1 when unknown.
	Length int64
	Body   io.Reader
}

// slotCheck is what the checks before a slot change established.
type slotCheck struct {
	grant *access.Grant
	slot  *model.AttachmentSlot
}

// admitSlotChange checks a slot change before any byte of the body is
// read: the request patch grant and the slot in writableFields, a record id,
// If-Match and an Idempotency-Key, and, on the record as it is now, the row
// boundary, ownership, the draft state and the validator. The write's
// transaction checks the record again.
func (s *Service) admitSlotChange(ctx context.Context, c records.Call, e *model.Entity, id, slotID, ifMatch string) (*slotCheck, error) {
	slot := e.Slot(slotID)
	if slot == nil || !e.IsRequestEntity() {
		return nil, problem.Concealed(problem.ReasonUnknownPath)
	}
	grant, err := s.records.Decide(ctx, c, model.OpPatch, e)
	if err != nil {
		return nil, err
	}
	if !values.IsUUID(id) {
		return nil, problem.Concealed(problem.ReasonUnknownPath)
	}
	if !grant.Writable.Has(slot.ID) || grant.PrincipalReference == "" {
		return nil, problem.Concealed(problem.ReasonProfileNotSatisfied)
	}
	if ifMatch == "" {
		return nil, problem.New(problem.PreconditionRequired, "a change of an attachment slot needs the request record's ETag in If-Match")
	}
	if err := records.CheckIfMatch(ifMatch); err != nil {
		return nil, err
	}
	if c.IdempotencyKey == "" {
		return nil, problem.New(problem.RequestInvalid, "a change of an attachment slot needs an Idempotency-Key header")
	}
	if len(c.IdempotencyKey) > records.MaxIdempotencyKeyBytes {
		return nil, problem.New(problem.RequestInvalid, "the Idempotency-Key is longer than %d bytes", records.MaxIdempotencyKeyBytes)
	}
	rec, req, err := s.visibleRequest(ctx, e, grant, id)
	if err != nil {
		return nil, err
	}
	if req.OwnerReference != grant.PrincipalReference {
		return nil, problem.New(problem.PreconditionFailed, "only the principal that owns the request may change its attachments")
	}
	if req.State != store.RequestDraft {
		return nil, problem.New(problem.PreconditionFailed, "only a draft's attachments can be changed; this request is %s (revise it first)", req.State)
	}
	if !s.records.Matches(ifMatch, rec) {
		// A replay names the validator the first call read: let the write
		// answer it from the idempotency record. A key never used is
		// refused here, before any byte is read.
		probe, err := s.records.Idempotency(c, grant)
		if err != nil {
			return nil, err
		}
		used, err := s.store.KeyUsed(ctx, probe.KeyReference)
		if err != nil {
			return nil, err
		}
		if !used {
			return nil, problem.New(problem.PreconditionFailed, "the request changed since the If-Match validator was read")
		}
	}
	return &slotCheck{grant: grant, slot: slot}, nil
}

// mediaType returns the upload's media type when the slot allows it.
func mediaType(slot *model.AttachmentSlot, header string) (string, error) {
	mt, params, err := mime.ParseMediaType(header)
	if err == nil && len(params) == 0 {
		for _, t := range slot.ContentTypes {
			if t == mt {
				return mt, nil
			}
		}
	}
	return "", problem.New(problem.RequestInvalid, "the Content-Type of an upload to slot %s must be one of %s, without parameters",
		slot.ID, strings.Join(slot.ContentTypes, ", "))
}

// UploadAttachment fills a slot of a draft request with the body's bytes:
// size and SHA-256 computed from the bytes received, the slot's maximum
// enforced while they are read, the content quarantined as pending when
// the slot is verified. The request record moves to a new revision; the
// answer is the ordinary mutation response.
func (s *Service) UploadAttachment(ctx context.Context, c records.Call, e *model.Entity, id string, up Upload) (*records.Result, error) {
	chk, err := s.admitSlotChange(ctx, c, e, id, up.SlotID, up.IfMatch)
	if err != nil {
		return nil, err
	}
	slot := chk.slot
	mt, err := mediaType(slot, up.ContentType)
	if err != nil {
		return nil, err
	}
	if up.Length == 0 {
		return nil, problem.New(problem.RequestInvalid, "an upload needs a nonempty body; remove the attachment with DELETE instead")
	}
	if up.Length > slot.MaximumBytes {
		return nil, problem.New(problem.RequestInvalid, "slot %s takes at most %d bytes", slot.ID, slot.MaximumBytes)
	}
	content, err := s.content.Put(ctx, up.Body, slot.MaximumBytes)
	switch {
	case errors.Is(err, store.ErrContentEmpty):
		return nil, problem.New(problem.RequestInvalid, "an upload needs a nonempty body; remove the attachment with DELETE instead")
	case errors.Is(err, store.ErrContentTooLarge):
		return nil, problem.New(problem.RequestInvalid, "slot %s takes at most %d bytes", slot.ID, slot.MaximumBytes)
	case err != nil:
		return nil, err
	}
	idem, err := s.records.Idempotency(c, chk.grant, "attachment-upload", e.ID, id, slot.ID, up.IfMatch, mt, content.SHA256, strconv.FormatInt(content.Size, 10))
	if err != nil {
		return nil, err
	}
	policy := PolicyDigest(s.pkg, slot)
	res, err := s.slotWrite(ctx, c, e, id, up.IfMatch, chk.grant, idem, opAttachmentUpload, func(w *store.Writer, req *store.Request) error {
		a := &store.Attachment{SlotID: slot.ID, ProposalVersion: req.ProposalVersion, SHA256: content.SHA256, Size: content.Size,
			ContentType: mt, UploadedBy: chk.grant.PrincipalReference, PolicyDigest: policy}
		if err := w.PutAttachment(ctx, e, id, a); err != nil {
			if errors.Is(err, store.ErrContentMissing) {
				return problem.New(problem.ServiceUnavailable, "the content was erased while it was being uploaded; upload it again")
			}
			return err
		}
		if policy != "" {
			if _, err := w.RequestVerification(ctx, store.VerificationKey{SHA256: content.SHA256, ContentType: mt, PolicyDigest: policy},
				slot.Verification.Verifier, e.ID, slot.ID, content.Size); err != nil {
				return err
			}
		}
		return nil
	})
	return res, err
}

// RemoveAttachment empties a slot of a draft request. The request record
// moves to a new revision; the answer is the ordinary mutation response.
// A body is refused.
func (s *Service) RemoveAttachment(ctx context.Context, c records.Call, e *model.Entity, id, slotID, ifMatch string, hasBody bool) (*records.Result, error) {
	chk, err := s.admitSlotChange(ctx, c, e, id, slotID, ifMatch)
	if err != nil {
		return nil, err
	}
	if hasBody {
		return nil, problem.New(problem.RequestInvalid, "a removal of an attachment takes no body")
	}
	idem, err := s.records.Idempotency(c, chk.grant, "attachment-remove", e.ID, id, slotID, ifMatch)
	if err != nil {
		return nil, err
	}
	return s.slotWrite(ctx, c, e, id, ifMatch, chk.grant, idem, opAttachmentRemove, func(w *store.Writer, req *store.Request) error {
		removed, err := w.RemoveAttachment(ctx, e, id, req.ProposalVersion, slotID)
		if err != nil {
			return err
		}
		if !removed {
			return problem.New(problem.PreconditionFailed, "slot %s is empty; there is nothing to remove", slotID)
		}
		return nil
	})
}

// slotWrite runs a slot change in the request record's transaction: the
// record locked and checked against If-Match, the draft locked and its
// owner checked, the change, then a new revision of the record.
func (s *Service) slotWrite(ctx context.Context, c records.Call, e *model.Entity, id, ifMatch string, grant *access.Grant, idem *store.Idempotency, op string,
	change func(w *store.Writer, req *store.Request) error) (*records.Result, error) {
	return s.records.Write(ctx, e, idem, func(w *store.Writer) (*store.Outcome, error) {
		cur, err := s.records.LockCurrent(ctx, w, e, grant, id, ifMatch)
		if err != nil {
			return nil, err
		}
		req, err := s.records.LockDraft(ctx, w, e, grant, id)
		if err != nil {
			return nil, err
		}
		if err := change(w, req); err != nil {
			return nil, err
		}
		if req.Attachments, err = w.Attachments(ctx, e, id, req.ProposalVersion); err != nil {
			return nil, err
		}
		if err := s.records.LoadHistory(ctx, w, e, req, nil); err != nil {
			return nil, err
		}
		rec, err := s.touch(ctx, w, c, grant, e, cur, op)
		if err != nil {
			return nil, err
		}
		out := &store.Outcome{Status: http.StatusOK}
		return out, s.records.WriteSnapshotAtCommit(ctx, w, func(tok string) error {
			return s.records.RenderInto(out, rec, req, grant, c.Representation, tok)
		})
	})
}

// Download is attachment content ready to be sent.
type Download struct {
	SlotID          string
	ProposalVersion int64
	ContentType     string
	Size            int64
	SHA256          string
	// Body yields the verified bytes; the caller closes it.
	Body io.ReadCloser
}

// DownloadAttachment opens the content of a slot of one proposal version
// of a request: the caller needs the request read grant, the slot in
// readableFields and the row boundary; an empty, erased, pending or
// rejected slot is not found.
func (s *Service) DownloadAttachment(ctx context.Context, c records.Call, e *model.Entity, id, slotID string, query map[string][]string) (*Download, error) {
	slot := e.Slot(slotID)
	if slot == nil || !e.IsRequestEntity() {
		return nil, problem.Concealed(problem.ReasonUnknownPath)
	}
	grant, err := s.records.Decide(ctx, c, model.OpGet, e)
	if err != nil {
		return nil, err
	}
	if !values.IsUUID(id) {
		return nil, problem.Concealed(problem.ReasonUnknownPath)
	}
	if !grant.Readable.Has(slot.ID) {
		return nil, problem.Concealed(problem.ReasonProfileNotSatisfied)
	}
	var version int64
	for k, v := range query {
		switch {
		case k == "accessProfile":
		case k == "proposalVersion" && len(v) == 1:
			n, err := strconv.ParseInt(v[0], 10, 64)
			if err != nil || n < 1 || strconv.FormatInt(n, 10) != v[0] {
				return nil, problem.New(problem.QueryInvalid, "proposalVersion must be a positive integer")
			}
			version = n
		default:
			return nil, problem.New(problem.QueryInvalid, "%s is not an option of an attachment download", k)
		}
	}
	if version == 0 {
		return nil, problem.New(problem.QueryInvalid, "proposalVersion is required: the proposal version whose attachment to download")
	}
	_, req, err := s.visibleRequest(ctx, e, grant, id)
	if err != nil {
		return nil, err
	}
	if version > req.ProposalVersion {
		return nil, problem.NotFound()
	}
	atts := req.Attachments
	if version != req.ProposalVersion {
		if atts, err = s.store.Attachments(ctx, e, id, version); err != nil {
			return nil, err
		}
	}
	var a *store.Attachment
	for i := range atts {
		if atts[i].SlotID == slot.ID {
			a = &atts[i]
		}
	}
	if a == nil || !a.Downloadable() {
		return nil, problem.NotFound()
	}
	body, err := s.content.Open(ctx, a.SHA256)
	if errors.Is(err, store.ErrContentMissing) {
		return nil, problem.NotFound()
	}
	if err != nil {
		return nil, err
	}
	return &Download{SlotID: slot.ID, ProposalVersion: version, ContentType: a.ContentType, Size: a.Size, SHA256: a.SHA256, Body: body}, nil
}

// attachmentManifest checks the slots of a draft for submission with the
// check that decides whether submit is offered (records.SlotRefusal) and
// returns the canonical manifest the proposal freezes: each filled slot's
// hash, size, media type, status and verification policy digest.
func attachmentManifest(e *model.Entity, req *store.Request) ([]byte, error) {
	if len(e.Attachments) == 0 {
		return nil, nil
	}
	if err := records.SlotRefusal(e, req); err != nil {
		return nil, err
	}
	slots := []any{}
	for _, slot := range e.Attachments {
		a := req.Attachment(slot.ID)
		if a == nil || a.Erased {
			continue
		}
		entry := map[string]any{"slotId": slot.ID, "sha256": a.SHA256, "byteSize": a.Size, "contentType": a.ContentType, "verificationStatus": a.Status}
		if a.PolicyDigest != "" {
			entry["verificationPolicyDigest"] = a.PolicyDigest
		}
		slots = append(slots, entry)
	}
	return canonjson.Marshal(map[string]any{"slots": slots})
}

// visibleRequest reads request record id of e with its workflow state, or
// the concealed not-found when it is not live, lies outside the grant's row
// boundaries or is another principal's under requestVisibility owner.
func (s *Service) visibleRequest(ctx context.Context, e *model.Entity, grant *access.Grant, id string) (*store.Record, *store.Request, error) {
	rec, err := s.store.Get(ctx, e, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, problem.Concealed(problem.ReasonNoRecord)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := records.Hidden(rec, grant); err != nil {
		return nil, nil, err
	}
	req, err := s.store.Request(ctx, e, id)
	if err != nil {
		return nil, nil, err
	}
	if !records.RequestVisible(grant, req) {
		return nil, nil, problem.Concealed(problem.ReasonRequestHidden)
	}
	return rec, req, nil
}
