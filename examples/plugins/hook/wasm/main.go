// Command wasm is the example hook handler built as a WebAssembly module:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o hook.wasm ./examples/plugins/hook/wasm
//
// It acknowledges a captured event whose envelope names a packaged entity
// and a positive record revision, and asks for a retry (kind
// unexpected_envelope) otherwise. The same logic is in ../hook.tengo.
package main

import (
	"encoding/json"
	"strings"

	"github.com/registrum/registrum/sdk/guest"
)

func init() { guest.HandleEvent(handle) }

func handle(ev guest.Event) guest.HookResult {
	data, _ := ev.Body["data"].(map[string]any)
	subject, _ := ev.Body["subject"].(map[string]any)
	entity, _ := data["entity"].(string)
	pkg, _ := data["packageRevision"].(string)
	rev, _ := subject["recordRevision"].(json.Number)
	n, err := rev.Int64()
	if entity == "" || !strings.HasPrefix(pkg, "sha256:") || err != nil || n < 1 {
		return guest.Retry("unexpected_envelope")
	}
	return guest.Acknowledge()
}

func main() {}
