// openid-client with its default client authentication against a running
// `registrum dev`: discovery → client_credentials with private_key_jwt →
// jose verification of the access token as an RFC 9068 at+jwt → a record
// host read with it. Exits non-zero with a reason on any failure.
//
// node oauth.mjs ISSUER_URL HOST_URL CLIENT_ID KEY_FILE ISSUER_CONFIG
import * as client from 'openid-client'
import * as jose from 'jose'
import { readFileSync } from 'node:fs'

const [issuerURL, hostURL, clientId, keyFile, issuerConfig] = process.argv.slice(2)
const fail = (msg) => { console.error(`oauth: ${msg}`); process.exit(1) }

// The access-token audience of the issuer's configuration.
const audience = /audiences:\s*\[\s*"([^"]+)"/.exec(readFileSync(issuerConfig, 'utf8'))?.[1]
if (!audience) fail(`no accessTokens.audiences in ${issuerConfig}`)

const jwk = JSON.parse(readFileSync(keyFile, 'utf8'))
const key = await jose.importJWK(jwk, jwk.alg ?? 'ES256')

// Discovery by the document's URL: `registrum dev` listens on plain HTTP on
// loopback while its identifier is https://localhost:PORT
// (docs/decisions/dev-issuer-scheme.md), hence allowInsecureRequests and the
// document URL (openid-client compares a bare server URL with the
// identifier). Client authentication is the library's default for
// private_key_jwt: aud = the issuer identifier.
const config = await client.discovery(
  new URL(`${issuerURL}/.well-known/oauth-authorization-server`),
  clientId, undefined, client.PrivateKeyJwt({ key, kid: jwk.kid }),
  { execute: [client.allowInsecureRequests] },
)
const as = config.serverMetadata()
for (const ep of [as.token_endpoint, as.jwks_uri]) {
  if (!ep?.startsWith(issuerURL + '/')) fail(`discovery names ${ep}, not served at ${issuerURL}`)
}

let tokens
try {
  tokens = await client.clientCredentialsGrant(config)
} catch (e) {
  fail(`token request refused: ${e.message} ${JSON.stringify(e.cause ?? e.error ?? '')}`)
}

const jwks = jose.createRemoteJWKSet(new URL(as.jwks_uri))
const { payload, protectedHeader } = await jose.jwtVerify(tokens.access_token, jwks, {
  issuer: as.issuer, audience, typ: 'at+jwt', algorithms: ['ES256'],
  requiredClaims: ['iss', 'exp', 'aud', 'sub', 'client_id', 'iat', 'jti'],
}).catch((e) => fail(`access token does not verify: ${e.message}`))
if (payload.client_id !== clientId) fail(`client_id ${payload.client_id}`)

for (const path of ['/v1/registry']) {
  const r = await fetch(hostURL + path, { headers: { authorization: `Bearer ${tokens.access_token}` } })
  if (r.status !== 200) fail(`GET ${path}: ${r.status} ${await r.text()}`)
}
console.log(`oauth: ok (iss ${payload.iss}, aud ${payload.aud}, typ ${protectedHeader.typ}, scope "${payload.scope ?? ''}")`)
