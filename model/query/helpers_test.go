package query_test

import "github.com/registrum/registrum/model/query/querytest"

// Shared fixtures (model/query/querytest) under the names the tests use.
var (
	personEntity = querytest.PersonEntity
	fullAllowed  = querytest.FullAllowed
	opts         = querytest.Opts
	wantProblem  = querytest.WantError
)
