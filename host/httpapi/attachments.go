package httpapi

import (
	"encoding/base64"
	"encoding/hex"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/registrum/registrum/host/requests"
	"github.com/registrum/registrum/model"
)

// attachmentRoutes registers the upload, removal and download routes of
// each slot of a request entity:
// /v1/records/{route}/{recordId}/attachments/{slotId}.
func (a *API) attachmentRoutes(r chi.Router, item string, e *model.Entity) {
	for _, slot := range e.Attachments {
		path := item + "/attachments/" + slot.ID
		a.entityRoute(r, http.MethodPatch, path, e, a.uploadAttachment(slot.ID))
		a.entityRoute(r, http.MethodDelete, path, e, a.removeAttachment(slot.ID))
		a.entityRoute(r, http.MethodGet, path, e, a.downloadAttachment(slot.ID))
	}
}

// uploadAttachment serves PATCH …/attachments/{slotId}: the raw bytes are
// handed to the service unread, which checks the caller first and enforces
// the slot's maximum while it reads them.
func (a *API) uploadAttachment(slotID string) entityHandler {
	return func(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
		c := a.call(r)
		res, err := a.requests.UploadAttachment(r.Context(), c, e, chi.URLParam(r, "recordId"), requests.Upload{
			SlotID: slotID, IfMatch: r.Header.Get("If-Match"), ContentType: r.Header.Get("Content-Type"),
			Length: r.ContentLength, Body: r.Body,
		})
		if err != nil {
			return err
		}
		a.answer(w, e, c.Representation, res)
		return nil
	}
}

// removeAttachment serves DELETE …/attachments/{slotId}; a body is refused.
func (a *API) removeAttachment(slotID string) entityHandler {
	return func(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
		hasBody := r.ContentLength > 0 || r.Header.Get("Content-Type") != ""
		if r.ContentLength < 0 {
			n, _ := io.ReadFull(io.LimitReader(r.Body, 1), make([]byte, 1))
			hasBody = hasBody || n > 0
		}
		c := a.call(r)
		res, err := a.requests.RemoveAttachment(r.Context(), c, e, chi.URLParam(r, "recordId"), slotID, r.Header.Get("If-Match"), hasBody)
		if err != nil {
			return err
		}
		a.answer(w, e, c.Representation, res)
		return nil
	}
}

// downloadAttachment serves GET …/attachments/{slotId}?proposalVersion=N:
// the complete content as an attachment, never cached or sniffed. The
// bytes are checked while they are streamed; content found corrupt after
// the headers went out aborts the response, so a client never takes a
// truncated body for the content.
func (a *API) downloadAttachment(slotID string) entityHandler {
	return func(w http.ResponseWriter, r *http.Request, e *model.Entity) error {
		return a.download(w, r, e, slotID)
	}
}

// download streams one slot's content (downloadAttachment).
func (a *API) download(w http.ResponseWriter, r *http.Request, e *model.Entity, slotID string) error {
	d, err := a.requests.DownloadAttachment(r.Context(), a.call(r), e, chi.URLParam(r, "recordId"), slotID, r.URL.Query())
	if err != nil {
		return err
	}
	defer d.Body.Close()
	// The first bytes are read before the headers go out: content that is
	// corrupt from its first chunk is answered as an error, not a 200.
	first := make([]byte, 32<<10)
	n, rerr := io.ReadFull(d.Body, first)
	if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
		return rerr
	}
	h := w.Header()
	h.Set("Content-Type", d.ContentType)
	h.Set("Content-Length", strconv.FormatInt(d.Size, 10))
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": d.SlotID}))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if sum, err := hex.DecodeString(d.SHA256); err == nil {
		h.Set("Repr-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sum)+":")
	}
	h.Set("Proposal-Version", strconv.FormatInt(d.ProposalVersion, 10))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	if _, err := w.Write(first[:n]); err != nil {
		return nil // the client went away; nothing more can be answered
	}
	if rerr == nil {
		if _, err := io.CopyBuffer(w, d.Body, first); err != nil {
			a.log.Error("attachment download aborted", "trace", TraceID(r.Context()), "error", err.Error())
			panic(http.ErrAbortHandler)
		}
	}
	return nil
}
