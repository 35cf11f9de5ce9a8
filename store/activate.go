package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/store/layout"
)

// Package activation (docs/decisions/package-activation.md).

// ActivationChannel is the notification channel on which an activation
// announces the new schema fingerprint to every host of the database.
const ActivationChannel = "registrum_package_activated"

// recordSchema keeps the field descriptors of p's revision, once.
func recordSchema(ctx context.Context, tx pgx.Tx, p *model.Package, fp string) error {
	b, err := json.Marshal(p.Entities)
	if err != nil {
		return fmt.Errorf("store: field descriptors: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO registrum.history_schemas (package_revision, schema_fingerprint, entities) VALUES ($1, $2, $3)
ON CONFLICT (package_revision) DO NOTHING`, p.Revision, fp, b); err != nil {
		return fmt.Errorf("store: record field descriptors: %w", err)
	}
	return nil
}

// DestructiveError refuses an activation whose plan holds destructive
// changes that were not confirmed; nothing was changed.
type DestructiveError struct {
	Changes []layout.Change
}

func (e *DestructiveError) Error() string {
	d := make([]string, len(e.Changes))
	for i, c := range e.Changes {
		d[i] = "  - " + c.Description
	}
	return "the activation holds destructive changes:\n" + strings.Join(d, "\n")
}

// Activation reports what Activate did.
type Activation struct {
	// From and To are the package revisions before and after.
	From, To string
	// Changes are the table changes applied (none when the layout is the same).
	Changes []layout.Change
}

// Activate moves the database to package p: the table changes between the
// layout of the active package (from its recorded field descriptors) and
// p's are derived and applied in one transaction, with the new package
// state, p's field descriptors and a notification to the database's hosts.
// Destructive changes are refused with a *DestructiveError unless confirmed.
// A database without a package gets p's layout, as Open gives it.
func Activate(ctx context.Context, pool *pgxpool.Pool, p *model.Package, confirmDestructive bool) (*Activation, error) {
	if err := CheckSchema(ctx, pool); err != nil {
		return nil, err
	}
	fp, err := layout.Fingerprint(p)
	if err != nil {
		return nil, err
	}
	if p.SchemaFingerprint != "" && p.SchemaFingerprint != fp {
		return nil, fmt.Errorf("store: the package records schema fingerprint %s but its layout is %s: recompile it with this release", p.SchemaFingerprint, fp)
	}
	out := &Activation{To: p.Revision}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockKey); err != nil {
			return err
		}
		var held string
		err := tx.QueryRow(ctx, "SELECT schema_fingerprint, package_revision FROM registrum.package_state").Scan(&held, &out.From)
		if errors.Is(err, pgx.ErrNoRows) {
			return errNoPackage
		}
		if err != nil {
			return err
		}
		if held != fp {
			var raw []byte
			err := tx.QueryRow(ctx, "SELECT entities FROM registrum.history_schemas WHERE package_revision = $1", out.From).Scan(&raw)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("the field descriptors of the active package %s are not recorded: start a host on it once with this release, then activate", out.From)
			}
			if err != nil {
				return err
			}
			var active model.Package
			if err := json.Unmarshal(raw, &active.Entities); err != nil {
				return fmt.Errorf("the field descriptors of the active package: %w", err)
			}
			if afp, err := layout.Fingerprint(&active); err != nil || afp != held {
				return fmt.Errorf("the recorded field descriptors of %s do not give the active layout %s", out.From, held)
			}
			plan, err := layout.PlanActivation(&active, p)
			if err != nil {
				return err
			}
			out.Changes = plan.Changes
			if d := plan.Destructive(); len(d) > 0 && !confirmDestructive {
				return &DestructiveError{Changes: d}
			}
			for _, s := range plan.Statements {
				if _, err := tx.Exec(ctx, s); err != nil {
					return fmt.Errorf("apply %q: %w", firstLine(s), err)
				}
			}
		}
		stmts, err := layout.DDL(p)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE registrum.package_state SET schema_fingerprint = $1, package_revision = $2, layout_ddl = $3, activated_at = now()",
			fp, p.Revision, strings.Join(stmts, ";\n")+";\n"); err != nil {
			return err
		}
		if err := recordSchema(ctx, tx, p, fp); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", ActivationChannel, fp)
		return err
	})
	if errors.Is(err, errNoPackage) {
		s, err := Open(ctx, pool, p, Options{})
		if err != nil {
			return nil, err
		}
		_ = s
		return out, nil
	}
	var de *DestructiveError
	if errors.As(err, &de) {
		return out, de
	}
	if err != nil {
		return nil, fmt.Errorf("store: activate package %s: %w", p.Revision, err)
	}
	return out, nil
}

var errNoPackage = errors.New("no active package")

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// ActiveFingerprint returns the schema fingerprint of the active package.
func (s *Store) ActiveFingerprint(ctx context.Context) (string, error) {
	var fp string
	if err := s.pool.QueryRow(ctx, "SELECT schema_fingerprint FROM registrum.package_state").Scan(&fp); err != nil {
		return "", fmt.Errorf("store: read the active package: %w", err)
	}
	return fp, nil
}

// ErrPackageChanged means the database was moved to another package while
// a host served this one.
var ErrPackageChanged = errors.New("the database was moved to another package")

// WatchActivations returns an error wrapping ErrPackageChanged as soon as
// the active package of the database no longer has schema fingerprint fp:
// it listens for activations (ActivationChannel) on a connection of its
// own, and checks the package state whenever it (re)connects, so that no
// activation goes unseen. It returns nil when ctx ends.
func WatchActivations(ctx context.Context, pool *pgxpool.Pool, fp string) error {
	for ctx.Err() == nil {
		err := watchOnce(ctx, pool, fp)
		if errors.Is(err, ErrPackageChanged) {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

func watchOnce(ctx context.Context, pool *pgxpool.Pool, fp string) error {
	// A connection of its own, outside the pool: listening holds it for
	// the host's life, and the pool's connections serve requests.
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+ActivationChannel); err != nil {
		return err
	}
	var held string
	if err := conn.QueryRow(ctx, "SELECT schema_fingerprint FROM registrum.package_state").Scan(&held); err != nil {
		return err
	}
	for {
		if held != fp {
			return fmt.Errorf("%w (schema fingerprint %s; this host serves %s)", ErrPackageChanged, held, fp)
		}
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		held = n.Payload
	}
}
