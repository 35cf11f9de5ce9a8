package bench

import (
	"os"
	"testing"

	"github.com/registrum/registrum/internal/gctarget"
	"github.com/registrum/registrum/store/storetest"
)

// TestMain runs the reports at the Go collector's target of a registrum
// process (internal/gctarget, unless GOGC is set): most reports serve the
// host in this process, beside their floors, and measure it as the
// registrum command runs it. It stops the test cluster of
// store/storetest, if a report started one, when the reports end.
func TestMain(m *testing.M) {
	gctarget.Apply()
	os.Exit(storetest.Run(m))
}
