// Command planner is the planner of the change-request performance report
// built to WebAssembly with the guest SDK's fast API: one item created from
// the request's code and amount, as ../scripts/planner.tengo does.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o planner.wasm ./bench/testdata/requestperf/planner
package main

import "github.com/registrum/registrum/sdk/guest"

func init() {
	guest.HandlePlanFast(func(_ guest.Fields, plan *guest.PlanWriter) {
		plan.Create("new_item", "item")
		plan.SetFromField("code", "code")
		plan.SetFromField("amount", "amount")
	})
}

func main() {}
