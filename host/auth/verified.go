package auth

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"sync"
)

// verifiedCacheEntries bounds the cache of verified signatures.
const verifiedCacheEntries = 8192

// verifiedCache remembers which tokens' signatures verified under which key,
// so that a client presenting the same token on many requests costs one
// signature verification. It holds digests of tokens, never tokens. A hit
// counts only for the very key object that verified it: a refreshed key set
// brings new key objects, so a key dropped from the set stops matching at
// once. Everything else (header, denylist, key-set allowance, lifetime,
// issuer, audience) is checked on every request as before.
type verifiedCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*ecdsa.PublicKey
}

func (c *verifiedCache) seen(token string, key *ecdsa.PublicKey) bool {
	sum := sha256.Sum256([]byte(token))
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.entries[sum]
	return ok && k == key
}

func (c *verifiedCache) add(token string, key *ecdsa.PublicKey) {
	sum := sha256.Sum256([]byte(token))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= verifiedCacheEntries {
		// Start afresh rather than track recency: tokens are short-lived.
		c.entries = make(map[[sha256.Size]byte]*ecdsa.PublicKey, 256)
	}
	c.entries[sum] = key
}
