// Command wasm is the example planner built as a WebAssembly module, with
// the guest SDK's fast planner API (plan.PlanFast):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o planner.wasm ./examples/plugins/planner/wasm
package main

import (
	"github.com/registrum/registrum/examples/plugins/planner/plan"
	"github.com/registrum/registrum/sdk/guest"
)

func init() { guest.HandlePlanFast(plan.PlanFast) }

func main() {}
