package querysql_test

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
	itemEntity   = querytest.ItemEntity
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

// sql is the compiler of the tests: no pseudo fields.
var sql querysql.Compiler
