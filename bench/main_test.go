package bench

import (
	"os"
	"testing"

	"github.com/registrum/registrum/store/storetest"
)

// TestMain stops the test cluster of store/storetest, if a report started
// one, when the reports end.
func TestMain(m *testing.M) { os.Exit(storetest.Run(m)) }
