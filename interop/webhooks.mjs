// A Standard Webhooks receiver written with the npm `standardwebhooks`
// package (the reference library of the specification), bound by
// `registrum dev --event-destinations` to a destination in mid-rotation:
// hmacSha256KeyRef is CURRENT_KEY_FILE, previousHmacSha256KeyRef is
// PREVIOUS_KEY_FILE. For every real delivery it checks that:
//   - a receiver configured with "whsec_" + base64 of the current key file's
//     bytes verifies it, and so does one configured with the previous key's
//     (webhook-signature carries both entries), and one with another key
//     does not; a changed body does not verify;
//   - webhook-id is ce-id, webhook-timestamp is X-Registry-Delivery-Time in
//     seconds, and the seed's headers are still there, X-Registry-Signature
//     one "v1=" value.
// It writes its port to PORT_FILE once listening, answers 204 to a delivery
// that passes and 401 otherwise, and exits 0 after EXPECTED deliveries
// passed, non-zero on the first failure or after TIMEOUT_SECONDS.
//
// node webhooks.mjs PORT_FILE CURRENT_KEY_FILE PREVIOUS_KEY_FILE [EXPECTED] [TIMEOUT_SECONDS]
import { Webhook } from 'standardwebhooks'
import { createServer } from 'node:http'
import { randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'

const [portFile, currentKeyFile, previousKeyFile, expectedArg = '1', timeoutArg = '240'] = process.argv.slice(2)
const expected = Number(expectedArg)
const fail = (msg) => { console.error(`standardwebhooks: ${msg}`); process.exit(1) }

// The secret a receiver configures: "whsec_" and base64 of the key file's
// exact bytes. It is never printed.
const secret = (bytes) => 'whsec_' + bytes.toString('base64')
const current = new Webhook(secret(readFileSync(currentKeyFile)))
const previous = new Webhook(secret(readFileSync(previousKeyFile)))
const unrelated = new Webhook(secret(randomBytes(32)))

const seedHeaders = ['ce-specversion', 'ce-id', 'ce-source', 'ce-type', 'ce-time', 'ce-dataschema', 'x-registry-event-generation',
  'x-registry-delivery-attempt', 'x-registry-delivery-time', 'idempotency-key', 'x-registry-signature', 'content-type']

const verifies = (wh, body, headers) => {
  try {
    wh.verify(body, headers)
    return true
  } catch {
    return false
  }
}

// check returns why a delivery fails, or '' when it passes.
function check (req, body) {
  const h = req.headers
  if (req.method !== 'POST') return `method ${req.method}`
  for (const name of seedHeaders) {
    if (typeof h[name] !== 'string' || h[name] === '') return `the seed's header ${name} is missing`
  }
  if (!/^v1=[A-Za-z0-9_-]{43}$/.test(h['x-registry-signature'])) return `X-Registry-Signature is not one v1= value: ${h['x-registry-signature']}`
  const headers = { 'webhook-id': h['webhook-id'], 'webhook-timestamp': h['webhook-timestamp'], 'webhook-signature': h['webhook-signature'] }
  if (headers['webhook-id'] !== h['ce-id']) return `webhook-id ${headers['webhook-id']} is not ce-id ${h['ce-id']}`
  const seconds = Math.floor(Date.parse(h['x-registry-delivery-time']) / 1000)
  if (headers['webhook-timestamp'] !== String(seconds)) {
    return `webhook-timestamp ${headers['webhook-timestamp']} is not X-Registry-Delivery-Time ${h['x-registry-delivery-time']} in seconds`
  }
  const entries = (headers['webhook-signature'] ?? '').split(' ')
  if (entries.length !== 2 || !entries.every((e) => e.startsWith('v1,'))) return `webhook-signature ${headers['webhook-signature']}: want two v1 entries`
  if (!verifies(current, body, headers)) return 'the current key\'s secret does not verify'
  if (!verifies(previous, body, headers)) return 'the previous key\'s secret does not verify'
  if (verifies(unrelated, body, headers)) return 'an unrelated secret verifies'
  const changed = Buffer.concat([body, Buffer.from(' ')])
  if (verifies(current, changed, headers)) return 'a changed body verifies'
  const event = JSON.parse(body.toString('utf8'))
  if (event.id !== h['ce-id']) return 'the body\'s id is not ce-id'
  return ''
}

let passed = 0
const server = createServer((req, res) => {
  const chunks = []
  req.on('data', (c) => chunks.push(c))
  req.on('end', () => {
    const body = Buffer.concat(chunks)
    const why = check(req, body)
    if (why !== '') {
      res.writeHead(401).end()
      fail(`delivery ${req.headers['ce-id']} (${req.headers['ce-type']}): ${why}`)
    }
    res.writeHead(204).end()
    passed++
    console.log(`standardwebhooks: verified ${req.headers['ce-type']} ${req.headers['ce-id']} with the current and the previous secret`)
    if (passed >= expected) {
      console.log(`standardwebhooks: ok (${passed} deliveries, webhook-signature under both keys of the rotation)`)
      server.close()
      process.exit(0)
    }
  })
})
server.listen(0, '127.0.0.1', () => writeFileSync(portFile, String(server.address().port)))
setTimeout(() => fail(`${passed} of ${expected} deliveries after ${timeoutArg}s`), Number(timeoutArg) * 1000).unref()
