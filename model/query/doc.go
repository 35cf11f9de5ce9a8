// Package query parses the query options of a collection read ($select,
// $filter, $orderby, $count, $top, $skiptoken) against an entity and what
// the caller's grant allows, into a typed Query: the selected fields, the
// sort keys, the page size, the $count flag and the filter as a tree of
// Nodes, type-checked against the fields' literal rules (model/values).
//
// It writes no SQL, knows no HTTP and seals nothing: the store compiles a
// Query to SQL (store/querysql), and the host seals and opens the cursors
// of keyset pagination (host/cursor), which carry a Query's Canonical text
// and re-parse it with Build. Every refusal is an *Error of kind Invalid or
// CursorInvalid; the host answers them with the problem codes query.invalid
// and query.cursor_invalid. The grammar, the literal rules per field type,
// every bound and the cursor format are described in docs/query.md.
//
// A typical read:
//
//	q, err := query.Parse(entity, allowed, query.RawOptions(u.Query()))
//	if err != nil { /* errors.As(err, &qe): qe.Kind, qe.Detail */ }
//	// q.Cursor != "": the host opens the cursor into the query it carries.
//	// Otherwise q.Select, q.Sort, q.Expr, q.Count, q.Top describe the read.
package query
