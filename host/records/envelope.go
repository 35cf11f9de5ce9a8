package records

import (
	"encoding/json"
	"strconv"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/store"
)

// Representation is the negotiated response form.
type Representation string

// Representations.
const (
	JSON   Representation = "json"
	JSONLD Representation = "json-ld"
)

// Envelope is the record envelope of the specification.
type Envelope struct {
	Context string       `json:"@context,omitempty"`
	Data    EnvelopeData `json:"data"`
	Meta    Meta         `json:"meta"`
}

// EnvelopeData is the data member of the envelope.
type EnvelopeData struct {
	RecordIdentifier   string         `json:"recordIdentifier"`
	RevisionIdentifier string         `json:"revisionIdentifier"`
	DomainData         map[string]any `json:"domainData"`
	// Snapshot is set on mutation responses.
	Snapshot string `json:"snapshot,omitempty"`
	// Tombstoned marks the final revision of a tombstoned record.
	Tombstoned bool `json:"tombstoned,omitempty"`
	// Request is data.request on change request records.
	Request json.RawMessage `json:"request,omitempty"`
	// ChangeContext is the correction context of a revision's batch, on
	// revision reads whose grant lists provenanceFields (docs/history.md).
	ChangeContext json.RawMessage `json:"changeContext,omitempty"`
	// RequestPresence lists the pending change requests that target the
	// record, when the grant declares requestPresence.
	RequestPresence json.RawMessage `json:"requestPresence,omitempty"`
}

// Meta identifies the registry, dataset and entity of a record.
type Meta struct {
	RegistryIdentifier   string `json:"registryIdentifier"`
	DatasetIdentifier    string `json:"datasetIdentifier"`
	EntityTypeIdentifier string `json:"entityTypeIdentifier"`
}

// MetaOf returns the meta member for an entity.
func MetaOf(p *model.Package, e *model.Entity) Meta {
	return Meta{RegistryIdentifier: p.Registry.ID, DatasetIdentifier: e.Dataset, EntityTypeIdentifier: e.ID}
}

// envelope builds the envelope of a record, narrowed to readable fields.
func (s *Service) envelope(rec *store.Record, readable access.FieldSet, rep Representation) Envelope {
	dd := make(map[string]any, len(rec.Entity.Fields))
	for _, f := range rec.Entity.Fields {
		if !readable.Has(f.ID) {
			continue
		}
		dd[f.APIName] = values.Encode(f, rec.Values[f.ID])
	}
	env := Envelope{
		Data: EnvelopeData{
			RecordIdentifier:   rec.ID,
			RevisionIdentifier: strconv.FormatInt(rec.Revision, 10),
			DomainData:         dd,
		},
		Meta: MetaOf(s.pkg, rec.Entity),
	}
	if rep == JSONLD {
		env.Context = s.pkg.Registry.URLs.Context
	}
	return env
}
