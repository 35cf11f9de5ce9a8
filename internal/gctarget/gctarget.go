// Package gctarget holds the Go collector's target (GOGC) of every
// registrum process: one value, applied by the registrum command at start
// and by the performance reports to the host they serve in their own
// process, so that both measure and run the same runtime.
package gctarget

import (
	"os"
	"runtime/debug"
)

// Percent is the collector's target of a registrum process whose
// environment does not set GOGC: the heap may grow to three times its live
// size between collections instead of twice. The host's live heap is small,
// and at the runtime's default of 100 the collector took a fifth of the
// host's CPU on a bulk import (docs/operations.md, "Go runtime settings").
const Percent = 200

// Apply sets the collector's target to Percent unless the environment sets
// GOGC, and reports whether it did.
func Apply() bool {
	if _, set := os.LookupEnv("GOGC"); set {
		return false
	}
	debug.SetGCPercent(Percent)
	return true
}
