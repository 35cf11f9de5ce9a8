// Package hooks delivers the events a registry emits.
//
// Events are captured in the same transaction as the write that causes them
// (an outbox row and a River job inserted by the store), then delivered after
// commit: as signed CloudEvents to webhook destinations, with retry, dead
// letters and operator replay, and to local handlers (reviewed tengo or wasm
// modules called through package plugins). River workers of this package do
// the delivery; nothing here runs inside a request's transaction.
//
// The package imports model, store and plugins; it never sees HTTP requests
// of clients.
package hooks

import (
	"context"
	"encoding/json"
	"time"
)

// Event is one captured event, as handlers and destinations receive it.
type Event struct {
	// ID is unique per event; Type is the event type, e.g.
	// "registry.record.created"; Subject the record route and id.
	ID, Type, Subject string
	// Entity and RecordID name the record; Revision the revision the event
	// describes.
	Entity, RecordID string
	Revision         int64
	// Stage is a change request's review stage, for lifecycle events.
	Stage string
	// Time is when the causing transaction committed.
	Time time.Time
	// Data is the event body, already narrowed to what the destination's
	// grant may read.
	Data json.RawMessage
}

// A Handler receives events: a webhook destination or a local handler
// module. A returned error means "try again later"; a handler that must
// refuse an event for good reports it in its result instead.
type Handler interface {
	Handle(ctx context.Context, e Event) error
}
