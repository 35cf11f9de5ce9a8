// Package keys loads, checks and generates the JSON Web Keys of the token
// issuer (file secrets are read with package internal/secrets).
//
// It covers these jobs:
//
//   - RFC 7638 thumbprints ([Thumbprint]); the issuer names every key by its
//     thumbprint, so a key id can never drift from the key bytes.
//   - The issuer's own public keys ([LoadPublic], [LoadActiveP256]): a public JWK
//     file whose `kid` equals its thumbprint, EC P-256 for signing keys.
//   - Client registration keys ([ParsePublicSet]): at most eight public keys of
//     the accepted kinds (Ed25519 for EdDSA, P-256 for ES256, RSA of at least
//     2048 bits for RS256), refused outright when any private member is present.
//   - Key generation ([Generate], [GenerateFiles]): a private JWK written as
//     an owner-only secret file and its public JWK named by its thumbprint.
//
// Errors name the file, index or member at fault and never include key or
// secret bytes.
package keys
