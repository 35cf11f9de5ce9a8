package model

// ServiceCapability is one feature of the record service, with the routes
// it brings, and whether this release's record host serves it. (It is not a
// Capability, which is a real source granted to a plugin module.)
//
// The compiler accepts every capability the specification describes, but
// the OpenAPI document lists only the routes of served capabilities, and the
// compiler warns about every declared use of one that is not served. Serving
// a capability is therefore one change here: flip Served, and the document
// and the warnings follow (the record host's router test then checks that
// the routes are really there).
type ServiceCapability struct {
	// ID names the capability in warnings and route listings.
	ID string
	// Title says what the capability is, for people.
	Title string
	// Served is true when the record host of this release serves the
	// capability's routes.
	Served bool
	// Declared says, for people, what in a project declares the capability.
	Declared string
}

// Service capability ids.
const (
	// CapRecords is the ordinary record routes: list, create, read, patch,
	// tombstone and batch.
	CapRecords = "records"
	// CapMetadata is the registry document and the published documents.
	CapMetadata = "metadata"
	// CapRevisions is the revision history of a record.
	CapRevisions = "revisions"
	// CapTemporalReads is :current and :as-of on temporal entities.
	CapTemporalReads = "temporal-reads"
	// CapSnapshot is :snapshot reads.
	CapSnapshot = "snapshot"
	// CapIngestionRuns is the ingestion runs of batch entities.
	CapIngestionRuns = "ingestion-runs"
	// CapChangeRequests is the records of request entities and their
	// actions (submit, revise, cancel, apply).
	CapChangeRequests = "change-requests"
	// CapAttachments is the attachment slots of request entities.
	CapAttachments = "attachments"
	// CapImmediateActions is the immediate actions.
	CapImmediateActions = "immediate-actions"
	// CapGIS is the spatial adapter.
	CapGIS = "gis"
)

// serviceCapabilities is the one table of what the record host serves.
var serviceCapabilities = []ServiceCapability{
	{ID: CapRecords, Title: "record routes", Served: true, Declared: "an entity"},
	{ID: CapMetadata, Title: "registry metadata and published documents", Served: true, Declared: "always"},
	{ID: CapRevisions, Title: "revision history", Served: true, Declared: "a profile granting revisions"},
	{ID: CapTemporalReads, Title: "temporal reads (:current, :as-of)", Served: true, Declared: "temporal"},
	{ID: CapSnapshot, Title: "snapshot reads (:snapshot)", Served: true, Declared: "a profile granting snapshot"},
	{ID: CapIngestionRuns, Title: "ingestion runs", Served: true, Declared: "batch"},
	{ID: CapChangeRequests, Title: "change request records and actions", Served: true, Declared: "changeRequest"},
	{ID: CapAttachments, Title: "attachments", Served: true, Declared: "attachments"},
	{ID: CapImmediateActions, Title: "immediate actions", Served: true, Declared: "actions"},
	{ID: CapGIS, Title: "spatial adapter (GeoJSON)", Served: true, Declared: "geojson"},
}

// ServiceCapabilities returns the table of service capabilities, in a
// fixed order.
func ServiceCapabilities() []ServiceCapability {
	return append([]ServiceCapability(nil), serviceCapabilities...)
}

// ServiceCapabilityByID returns the service capability with that id.
func ServiceCapabilityByID(id string) (ServiceCapability, bool) {
	for _, c := range serviceCapabilities {
		if c.ID == id {
			return c, true
		}
	}
	return ServiceCapability{}, false
}
