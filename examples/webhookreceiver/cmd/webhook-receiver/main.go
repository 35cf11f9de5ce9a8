// Command webhook-receiver runs the example event receiver on its own:
//
//	go run ./examples/webhookreceiver/cmd/webhook-receiver --listen 127.0.0.1:9090 \
//	  --path /registry-events --key-file ./secrets/webhook-key
//
// Bind a destination to it in the host's eventDestinations (url
// http://127.0.0.1:9090/registry-events, network: loopback, the same key
// file as hmacSha256KeyRef) and it prints every verified delivery.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"

	"github.com/registrum/registrum/examples/webhookreceiver"
	"github.com/registrum/registrum/sdk/webhook"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9090", "address to listen on")
	path := flag.String("path", "/registry-events", "the destination's request path")
	keyFile := flag.String("key-file", "", "file holding the signing key (its exact bytes)")
	source := flag.String("source", "", "expected ce-source (default: any)")
	flag.Parse()
	key, err := os.ReadFile(*keyFile)
	if err != nil || len(key) < 32 {
		fmt.Fprintln(os.Stderr, "webhook-receiver: --key-file must name a file of at least 32 bytes")
		os.Exit(2)
	}
	r := webhookreceiver.New(&webhook.Verifier{Key: key, Path: *path, Source: *source}, os.Stdout)
	fmt.Printf("webhook-receiver listening on http://%s%s\n", *listen, *path)
	if err := http.ListenAndServe(*listen, r); err != nil {
		fmt.Fprintln(os.Stderr, "webhook-receiver:", err)
		os.Exit(1)
	}
}
