package httpapi

import (
	"encoding/base64"
	"encoding/hex"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/registrum/registrum/host/records"
	"github.com/registrum/registrum/model"
)

// attachmentRoutes registers the upload, removal and download routes of
// each slot of a request entity:
// /v1/records/{route}/{recordId}/attachments/{slotId}.
func (a *API) attachmentRoutes(r chi.Router, item string, e *model.Entity) {
	for _, slot := range e.Attachments {
		path := item + "/attachments/" + slot.ID
		a.entityRoute(r, http.MethodPatch, path, e, withParam("slotId", slot.ID, a.uploadAttachment))
		a.entityRoute(r, http.MethodDelete, path, e, withParam("slotId", slot.ID, a.removeAttachment))
		a.entityRoute(r, http.MethodGet, path, e, withParam("slotId", slot.ID, a.downloadAttachment))
	}
}

// uploadAttachment serves PATCH …/attachments/{slotId}: the raw bytes are
// handed to the service unread, which checks the caller first and enforces
// the slot's maximum while it reads them.
func (a *API) uploadAttachment(w http.ResponseWriter, r *http.Request) {
	e, err := a.records.EntityForRoute(chi.URLParam(r, "route"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c := a.call(r)
	res, err := a.records.UploadAttachment(r.Context(), c, e, chi.URLParam(r, "recordId"), records.Upload{
		SlotID: chi.URLParam(r, "slotId"), IfMatch: r.Header.Get("If-Match"), ContentType: r.Header.Get("Content-Type"),
		Length: r.ContentLength, Body: r.Body,
	})
	a.answer(w, r, e, c.Representation, res, err)
}

// removeAttachment serves DELETE …/attachments/{slotId}; a body is refused.
func (a *API) removeAttachment(w http.ResponseWriter, r *http.Request) {
	e, err := a.records.EntityForRoute(chi.URLParam(r, "route"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	hasBody := r.ContentLength > 0 || r.Header.Get("Content-Type") != ""
	if r.ContentLength < 0 {
		n, _ := io.ReadFull(io.LimitReader(r.Body, 1), make([]byte, 1))
		hasBody = hasBody || n > 0
	}
	c := a.call(r)
	res, err := a.records.RemoveAttachment(r.Context(), c, e, chi.URLParam(r, "recordId"), chi.URLParam(r, "slotId"), r.Header.Get("If-Match"), hasBody)
	a.answer(w, r, e, c.Representation, res, err)
}

// downloadAttachment serves GET …/attachments/{slotId}?proposalVersion=N:
// the complete content as an attachment, never cached or sniffed. The
// bytes are checked while they are streamed; content found corrupt after
// the headers went out aborts the response, so a client never takes a
// truncated body for the content.
func (a *API) downloadAttachment(w http.ResponseWriter, r *http.Request) {
	e, err := a.records.EntityForRoute(chi.URLParam(r, "route"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	d, err := a.records.DownloadAttachment(r.Context(), a.call(r), e, chi.URLParam(r, "recordId"), chi.URLParam(r, "slotId"), r.URL.Query())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer d.Body.Close()
	// The first bytes are read before the headers go out: content that is
	// corrupt from its first chunk is answered as an error, not a 200.
	first := make([]byte, 32<<10)
	n, rerr := io.ReadFull(d.Body, first)
	if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
		a.fail(w, r, rerr)
		return
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
		return
	}
	if _, err := w.Write(first[:n]); err != nil {
		return
	}
	if rerr == nil {
		if _, err := io.CopyBuffer(w, d.Body, first); err != nil {
			a.log.Error("attachment download aborted", "trace", TraceID(r.Context()), "error", err.Error())
			panic(http.ErrAbortHandler)
		}
	}
}
