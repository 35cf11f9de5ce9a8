// Package issuer is Registrum's token issuer: it issues short-lived ES256
// at+jwt access tokens to registered machine clients (OAuth 2.0
// client_credentials with RFC 7523 private-key-JWT client authentication),
// publishes its signing keys and RFC 8414 metadata, and records every decision
// in the keyed audit chain of package audit before it answers.
//
// The pieces:
//
//   - [LoadConfig] reads and validates the one YAML configuration document.
//   - [LoadRegistry] reads the per-client registration files of
//     clients.directory; [Server.Reload] swaps in a freshly loaded registry
//     (the binary calls it on SIGHUP).
//   - [New] builds a [Server]: signer, audit writer, replay cache, registry;
//     [Server.Handler] serves POST /token, the key set, the metadata
//     documents, /health and /ready.
//   - [WriteDevSetup] writes a supervised-local-development deployment with
//     generated keys and demo clients, for `registrum dev` and for tests.
package issuer
