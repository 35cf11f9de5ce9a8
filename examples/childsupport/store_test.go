package childsupport_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/google/uuid"

	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Run(m)) }

func journal() store.Journal {
	return store.Journal{OperationID: uuid.NewString(), CommitID: uuid.NewString(), TraceID: "0123456789abcdef0123456789abcdef", RecordReference: "hmac-sha256:x", Data: []byte(`{}`)}
}

// TestLayoutInPostgreSQL activates the compiled example on a real
// PostgreSQL and checks that the constraints it declares hold there.
func TestLayoutInPostgreSQL(t *testing.T) {
	ctx := context.Background()
	_, p := compile(t)
	s, err := store.Open(ctx, storetest.NewPool(t), p, store.Options{})
	if err != nil {
		t.Fatalf("the store refuses the example's layout: %v", err)
	}
	create := func(entity string, values map[string]any) error {
		_, err := s.Create(ctx, p.EntityByID(entity), uuid.NewString(), values, journal())
		return err
	}
	caseID := uuid.NewString()
	caseValues := map[string]any{"case-number": "CS-0001", "support-type": "maintenance", "applicant-national-id": "P-1",
		"health-district": "north", "status": "open", "opened-on": "2026-11-22"}
	if _, err := s.Create(ctx, p.EntityByID("case"), caseID, caseValues, journal()); err != nil {
		t.Fatalf("create case: %v", err)
	}
	refused := func(what string, err error, constraintID string) {
		t.Helper()
		var ce *store.ConstraintError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: err = %v, want a constraint refusal", what, err)
		}
		if ce.Owner.ConstraintID != constraintID && ce.Owner.Kind+":"+ce.Owner.FieldID != constraintID {
			t.Fatalf("%s: refused by %+v, want constraint %s", what, ce.Owner, constraintID)
		}
	}
	// unique case-number
	refused("duplicate case number", create("case", caseValues), "case-number-unique")
	// reference to a missing case
	refused("child of a missing case", create("child", map[string]any{"case": uuid.NewString(), "child-national-id": "C-1"}), "reference:case")
	if err := create("child", map[string]any{"case": caseID, "child-national-id": "C-1"}); err != nil {
		t.Fatalf("create child: %v", err)
	}
	// decisions: non-negative amounts, non-overlapping validity per case
	decision := func(from, to, amount string) map[string]any {
		v := map[string]any{"case": caseID, "outcome": "granted", "monthly-amount": amount, "valid-from": from}
		if to != "" {
			v["valid-to"] = to
		}
		return v
	}
	refused("negative amount", create("decision", decision("2026-01-01", "2026-02-01", "-1.00")), "amount-not-negative")
	if err := create("decision", decision("2026-01-01", "2026-07-01", "120.50")); err != nil {
		t.Fatalf("create decision: %v", err)
	}
	refused("overlapping decision", create("decision", decision("2026-06-01", "", "99.00")), "temporal-non-overlap")
	if err := create("decision", decision("2026-07-01", "", "99.00")); err != nil {
		t.Fatalf("adjacent decision (end is exclusive): %v", err)
	}
}
