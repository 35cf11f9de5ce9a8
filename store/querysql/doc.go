// Package querysql compiles the parsed query of a collection read
// (model/query) to parameterised SQL over the entity's table: the filter as
// a WHERE expression, the keyset ORDER BY, the keyset predicate that
// resumes after a cursor's position, and the page and $count statements.
// It writes SQL and never executes any; the store runs the statements.
//
// A typical read:
//
//	q, err := query.Parse(entity, allowed, opts) // or the host's cursor opening
//	stmt := querysql.Compiler{}.PageStatement(q, columns, scope) // scope: row boundaries, lifecycle
//	rows := run(stmt)                                            // at most q.Limit() rows
//
// Column references in the fragments are unqualified columns of the
// entity's table (store/layout). The SQL each filter compiles to, its NULL
// semantics and the keyset order are described in docs/query.md.
package querysql
