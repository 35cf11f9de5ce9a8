// Package query is the record host's query layer for collection reads: it
// parses the query options of a read ($select, $filter, $orderby, $count,
// $top, $skiptoken) against an entity and what the caller's grant allows,
// compiles them to parameterised SQL fragments that the store runs, and
// seals and opens the encrypted, caller-bound cursors of keyset pagination.
//
// It lives in the store because it writes SQL; it never executes any and
// knows nothing about HTTP: the core service hands it the decoded query
// parameters, and the store runs the fragments it produces. Every refusal is a *problem.Error with code query.invalid or
// query.cursor_invalid. The grammar, the literal rules per field type, every
// bound and the cursor format are described in docs/query.md.
//
// A typical read:
//
//	q, err := sealer.Parse(entity, allowed, query.RawOptions(u.Query()), caller, now)
//	if err != nil { /* render the problem */ }
//	stmt := q.PageStatement(columns, scope) // scope: row boundaries, lifecycle
//	rows := store.Run(stmt)                 // at most q.Limit() rows
//	if len(rows) > q.Top {                  // one more than a page: a next page exists
//		next, err := sealer.Seal(q, caller, rows[q.Top-1], now)
//	}
//
// Column references in the fragments are unqualified columns of the
// entity's table (store/layout).
package query
