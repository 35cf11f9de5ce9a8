// Command eicar-verifier is an example attachment verifier: it rejects
// content that contains the EICAR anti-virus test signature and approves
// everything else. It shows the shape of a real scanner plugin built with
// sdk/verifier; the scan itself is package eicar, which `registrum dev` also
// serves as an http verifier.
//
// Build it, pin its digest in the registry package, and the host runs it:
//
//	go build -o eicar-verifier ./examples/plugins/eicar-verifier
//	sha256sum eicar-verifier
package main

import (
	"github.com/registrum/registrum/examples/plugins/eicar-verifier/eicar"
	"github.com/registrum/registrum/sdk/verifier"
)

func main() {
	verifier.Serve(eicar.New())
}
