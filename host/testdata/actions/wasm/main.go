// Command wasm is the adjust action's handler built as a WebAssembly
// module, the same logic as ../scripts/adjust.tengo; the test builds it:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugins/adjust.wasm ./host/testdata/actions/wasm
package main

import (
	"encoding/json"

	"github.com/registrum/registrum/sdk/guest"
)

func init() {
	guest.HandleAction(func(in guest.Inputs) guest.ActionResult {
		n, _ := in["amount"].(json.Number)
		amount, err := n.Int64()
		if err != nil || amount > 1000 {
			return guest.RefuseAction("too_large", "amount")
		}
		return guest.ActionResult{Writes: []guest.ActionWrite{guest.Write("change", map[string]any{"balance": amount * 2})}}
	})
}

func main() {}
