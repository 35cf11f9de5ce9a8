package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

func slotPath(route, id, slot string) string {
	return itemPath(route, id) + "/attachments/" + url.PathEscape(slot)
}

// UploadAttachment streams the content of a slot of a draft change request
// under the draft's ETag, with an Idempotency-Key (fresh unless given).
// size is the content's length (-1 when unknown); contentType one of the
// slot's types. The answer is the draft's new revision. A body that is an
// io.Seeker (a file, a bytes.Reader) is rewound for a retry; any other is
// never retried.
func (c *Client) UploadAttachment(ctx context.Context, route, id, slot, ifMatch, contentType string, content io.Reader, size int64, opts ...CallOption) (*Record, error) {
	o := options(opts)
	r := &request{method: http.MethodPatch, path: slotPath(route, id, slot), stream: content, size: size, ctype: contentType,
		header: http.Header{"If-Match": {ifMatch}}}
	c.write(r, o)
	resp, err := c.do(ctx, r, o.profile)
	if err != nil {
		return nil, err
	}
	return recordOf(resp)
}

// RemoveAttachment empties a slot of a draft under its ETag.
func (c *Client) RemoveAttachment(ctx context.Context, route, id, slot, ifMatch string, opts ...CallOption) (*Record, error) {
	o := options(opts)
	r := &request{method: http.MethodDelete, path: slotPath(route, id, slot), header: http.Header{"If-Match": {ifMatch}}}
	c.write(r, o)
	resp, err := c.do(ctx, r, o.profile)
	if err != nil {
		return nil, err
	}
	return recordOf(resp)
}

// Attachment is a download: the verified content, to be read and closed.
type Attachment struct {
	ContentType string
	// Size is the content's length in bytes (-1 when not announced).
	Size int64
	// Body streams the content; the caller closes it.
	Body io.ReadCloser
}

// DownloadAttachment opens the content of a slot as it stood in proposal
// version proposalVersion of a change request.
func (c *Client) DownloadAttachment(ctx context.Context, route, id, slot string, proposalVersion int64, opts ...CallOption) (*Attachment, error) {
	o := options(opts)
	r := &request{method: http.MethodGet, path: slotPath(route, id, slot), query: url.Values{"proposalVersion": {strconv.FormatInt(proposalVersion, 10)}},
		header: http.Header{"Accept": {"*/*"}}, open: true}
	resp, err := c.do(ctx, r, o.profile)
	if err != nil {
		return nil, err
	}
	size := int64(-1)
	if n, err := strconv.ParseInt(resp.header.Get("Content-Length"), 10, 64); err == nil {
		size = n
	}
	return &Attachment{ContentType: resp.header.Get("Content-Type"), Size: size, Body: resp.stream}, nil
}
