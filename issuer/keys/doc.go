// Package keys loads, checks and generates the JSON Web Keys of the token
// issuer, and resolves the file secrets its configuration refers to.
//
// It covers four jobs:
//
//   - RFC 7638 thumbprints ([Thumbprint]); the issuer names every key by its
//     thumbprint, so a key id can never drift from the key bytes.
//   - The issuer's own public keys ([LoadPublic], [LoadActiveP256]): a public JWK
//     file whose `kid` equals its thumbprint, EC P-256 for signing keys.
//   - Client registration keys ([ParsePublicSet]): at most eight public keys of
//     the accepted kinds (Ed25519 for EdDSA, P-256 for ES256, RSA of at least
//     2048 bits for RS256), refused outright when any private member is present.
//   - Key generation ([Generate]) and file secrets ([ResolveFileSecret]):
//     `secret:file/<name>` references resolved under a root, accepting only a
//     regular, owner-only file that stays inside the root.
//
// Errors name the file, index or member at fault and never include key or
// secret bytes.
package keys
