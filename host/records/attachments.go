package records

import (
	"time"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store"
)

// slotMetadata is a slot as a member of domainData: its metadata when
// filled, nil when empty.
func slotMetadata(a *store.Attachment) any {
	if a == nil {
		return nil
	}
	m := map[string]any{
		"slotId":          a.SlotID,
		"proposalVersion": a.ProposalVersion,
		"filled":          true,
		"erased":          a.Erased,
		"byteSize":        a.Size,
		"sha256":          a.SHA256,
	}
	if !a.Erased {
		m["contentType"] = a.ContentType
		m["uploadedAt"] = a.UploadedAt.Format(time.RFC3339Nano)
		m["uploadedBy"] = a.UploadedBy
		m["verificationStatus"] = a.Status
	}
	return m
}

// slotsInto adds the readable slots of a request to domainData.
func slotsInto(dd map[string]any, e *model.Entity, req *store.Request, readable access.FieldSet) {
	for _, slot := range e.Attachments {
		if readable.Has(slot.ID) {
			dd[slot.ID] = slotMetadata(req.Attachment(slot.ID))
		}
	}
}
