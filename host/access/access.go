// Package access decides, in one place, whether a caller may perform an
// operation on an entity and which fields it may read and write. Every read
// and write of the record host asks a Decider before touching the store.
package access

import (
	"context"

	"github.com/registrum/registrum/host/model"
)

// Request is what a decision is asked about.
type Request struct {
	// Operation is a model operation (model.OpCreate, model.OpGet, …).
	Operation string
	Entity    *model.Entity
	// Bearer is the presented access token, "" when none was presented.
	Bearer string
	// Profile is the access profile the caller selected, "" for the route's default.
	Profile string
}

// Grant is what a decision allows.
type Grant struct {
	// Profile is the access profile that granted the operation.
	Profile string
	// PrincipalReference is the keyed reference of the caller, "" for anonymous.
	PrincipalReference string
	// Readable and Writable hold authored field ids.
	Readable map[string]bool
	Writable map[string]bool
}

// Decider makes access decisions. A refusal is returned as an error the edge
// renders: the concealed not-found for anything the caller may not see,
// authentication.refused for a presented and rejected token.
type Decider interface {
	Decide(ctx context.Context, r Request) (*Grant, error)
}

// Unrestricted grants every operation and every field to every caller. It is
// the decider of deployments without access profiles (the foundation's
// first slice); packages with profiles are decided by the profile decider.
type Unrestricted struct{}

// Decide grants everything.
func (Unrestricted) Decide(_ context.Context, r Request) (*Grant, error) {
	g := &Grant{Profile: r.Profile, Readable: map[string]bool{}, Writable: map[string]bool{}}
	for _, f := range r.Entity.Fields {
		g.Readable[f.ID] = true
		g.Writable[f.ID] = true
	}
	return g, nil
}
