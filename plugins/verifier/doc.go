// Package verifier runs attachment verifiers: the checks a registry's
// operator configures to approve or reject uploaded attachment bytes before
// a change request can be submitted.
//
// Every verifier sits behind one interface, [Verifier]. Two kinds implement it:
//
//   - [Process]: a reviewed verifier binary run out of process through
//     hashicorp/go-plugin (net/rpc). The binary's sha256 is checked against the
//     digest the operator pinned before every start; the bytes are streamed in
//     bounded chunks; a crashed process is restarted on the next call and a
//     hung one is killed at the caller's deadline.
//   - [HTTP]: a scanner run as a service, reached by a POST of the exact bytes
//     with a bearer credential read from a secret file.
//
// A verifier answers [Approved], [Rejected] (with a value-free [Reason]) or
// [Retry]. Every failure — a crash, a hang past the deadline, garbage instead
// of an answer, a failed handshake, content that does not match its declared
// size or digest — is a retry: Verify returns a [Retry] verdict together with a
// [*Failure] whose [Cause] is a fixed, value-free word that is safe to log.
// Plugin- or scanner-controlled text never appears in an error.
//
// [ReadPackage] reads the "verifiers" member of a compiled registry package,
// [CheckPackage] also checks the pinned digests of its binaries (and its http
// credentials), [OpenPackage] opens them all for a starting host, refusing
// start-up on any mismatch, and [Open] turns one entry into a verifier.
// docs/verifiers.md is the guide for authors and operators.
package verifier
