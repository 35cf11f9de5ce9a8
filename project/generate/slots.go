package generate

import "github.com/registrum/registrum/model"

// SHA256HexPattern is the content hash of an attachment: 64 lowercase hex digits.
const SHA256HexPattern = `^[0-9a-f]{64}$`

// slotProperty is an attachment slot as a member of domainData.
type slotProperty struct {
	name   string
	schema obj
}

// slotsOf returns the domainData members of the entity's attachment slots.
func slotsOf(e *model.Entity) []slotProperty {
	out := make([]slotProperty, 0, len(e.Attachments))
	for _, s := range e.Attachments {
		out = append(out, slotProperty{name: s.ID, schema: SlotSchema(s)})
	}
	return out
}

// SlotSchema returns the schema of an attachment slot in domainData: the
// filled slot's metadata, or null when the slot is empty. The slot is
// engine-owned (readOnly) and carries the x-registry-attachment extension.
func SlotSchema(s *model.AttachmentSlot) obj {
	return obj{
		"readOnly":              true,
		"anyOf":                 []any{slotMetadataSchema(s), obj{"type": "null"}},
		"x-registry-field":      s.ID,
		"x-registry-attachment": model.AttachmentExtension(s),
	}
}

// slotMetadataSchema is the metadata of a filled (or erased) slot. Erasure
// keeps slot id, proposal version, filled and erased state, size and hash,
// and removes content type, verification status and the uploading actor and time.
func slotMetadataSchema(s *model.AttachmentSlot) obj {
	types := make([]any, len(s.ContentTypes))
	for i, t := range s.ContentTypes {
		types[i] = t
	}
	return obj{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"slotId", "proposalVersion", "filled", "erased", "byteSize", "sha256"},
		"properties": obj{
			"slotId":             obj{"const": s.ID},
			"proposalVersion":    obj{"type": "integer", "minimum": 1},
			"filled":             obj{"type": "boolean"},
			"erased":             obj{"type": "boolean"},
			"byteSize":           obj{"type": "integer", "minimum": 1, "maximum": s.MaximumBytes},
			"sha256":             obj{"type": "string", "pattern": SHA256HexPattern},
			"contentType":        obj{"type": "string", "enum": types},
			"uploadedAt":         obj{"type": "string", "format": "date-time", "pattern": TimestampPattern},
			"uploadedBy":         obj{"type": "string"},
			"verificationStatus": obj{"type": "string", "enum": []any{"notRequired", "pending", "approved", "rejected"}},
		},
	}
}
