package records

import (
	"errors"
	"fmt"

	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/internal/strictjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
)

// The one map of refusals: what the store refuses (StoreRefusal) and a
// constraint the database refuses, in the author's terms (WriteRefusal).

// StoreRefusal turns a refusal the store decides into the problem the
// client gets: a key used with another request, a key whose outcome was
// erased, a record not found (concealed), a stale validator, and a write
// whose snapshot the store refused (the database moved to another package,
// or too many transactions in progress to name the state). Any other
// error is returned as it is. It is the one map of store refusals: every
// write and every read of a stored outcome answers through it.
func StoreRefusal(err error) error {
	switch {
	case errors.Is(err, store.ErrIdempotencyConflict):
		return problem.New(problem.IdempotencyConflict, "the Idempotency-Key was used before with a different request")
	case errors.Is(err, store.ErrOutcomeErased):
		return problem.New(problem.IdempotencyOutcomeErased, "the request under this Idempotency-Key happened; its answer was erased with the record's history")
	case errors.Is(err, store.ErrNotFound):
		return problem.Concealed(problem.ReasonNoRecord)
	case errors.Is(err, store.ErrStale):
		return StaleValidator()
	case errors.Is(err, store.ErrPackageChanged):
		return &problem.Error{Code: problem.ServiceUnavailable, Detail: "The database moved to another package; this host stops. Retry on a host of the active package.", Cause: err}
	case errors.Is(err, store.ErrSnapshotTooWide):
		return SourceUnavailable(err)
	}
	return err
}

// StaleValidator is the refusal of a write whose If-Match (or a batch or
// chunk item's ifMatch) does not name the record's current revision.
func StaleValidator() error {
	return problem.New(problem.PreconditionFailed, "the record changed since the validator named for it (If-Match, or an item's ifMatch) was read")
}

// Refusal turns the error of a write of e into the client's problem: a
// store refusal through StoreRefusal, a constraint violation in the
// author's terms (WriteRefusal), anything else as it is.
func (s *Service) Refusal(e *model.Entity, err error) error {
	if refused := StoreRefusal(err); refused != err {
		return refused
	}
	return s.WriteRefusal(e, err)
}

// WriteRefusal explains a constraint violation in the author's terms; a
// problem is returned as it is, and any other error too.
func (s *Service) WriteRefusal(e *model.Entity, err error) error {
	var pe *problem.Error
	if errors.As(err, &pe) {
		return pe
	}
	var ce *store.ConstraintError
	if !errors.As(err, &ce) {
		return err
	}
	if owner := s.pkg.EntityByID(ce.Owner.EntityID); owner != nil {
		e = owner
	}
	var at *string
	if f := e.Field(ce.Owner.FieldID); f != nil {
		p := strictjson.Pointer("data", f.APIName)
		at = &p
	}
	var detail string
	switch ce.Owner.Kind {
	case model.ConstraintUnique:
		detail = fmt.Sprintf("another live %s record already has this value (unique constraint %s)", e.ID, ce.Owner.ConstraintID)
	case model.ConstraintReference:
		detail = "the referenced record does not exist"
	case model.ConstraintTemporalNonOverlap:
		detail = fmt.Sprintf("the validity interval overlaps another record's (constraint %s)", ce.Owner.ConstraintID)
	case model.ConstraintCheck:
		detail = fmt.Sprintf("the values violate the check %s", ce.Owner.ConstraintID)
	case layout.KindFieldBounds:
		detail = "the value is outside the bounds of the field"
	default:
		detail = "the write violates a constraint of the registry"
	}
	return &problem.Error{Code: problem.RequestInvalid, Detail: detail, FieldPath: at, Cause: err}
}
