// Command plannermap is the example planner built as a WebAssembly module
// with the guest SDK's map-based API (plan.Plan), for the benchmark's
// comparison with the fast API the example's own build uses.
package main

import (
	"github.com/registrum/registrum/examples/plugins/planner/plan"
	"github.com/registrum/registrum/sdk/guest"
)

func init() { guest.HandlePlan(plan.Plan) }

func main() {}
