package cursor_test

import (
	"os"
	"testing"

	"github.com/registrum/registrum/model/query/querytest"
	"github.com/registrum/registrum/store/querysql"
	"github.com/registrum/registrum/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Run(m)) }

// Shared fixtures (model/query/querytest, store/storetest) under the names
// the tests use.
var (
	personEntity = querytest.PersonEntity
	fullAllowed  = querytest.FullAllowed
	opts         = querytest.Opts
	wantProblem  = querytest.WantError
	ts           = querytest.TS
	openDB       = storetest.NewTables
	insertRows   = storetest.InsertRows
)

const (
	uuidA = querytest.UUIDA
	uuidB = querytest.UUIDB
)

// sql compiles the pages the paging test runs.
var sql querysql.Compiler
