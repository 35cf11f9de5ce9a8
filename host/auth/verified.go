package auth

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"sync"
	"time"
)

// verifiedCacheEntries bounds the cache of verified tokens.
const verifiedCacheEntries = 8192

// verifiedToken is what a full verification established about one token.
type verifiedToken struct {
	kid    string
	key    *ecdsa.PublicKey
	claims *Claims
	// notBefore is the latest of nbf and iat (zero when neither is present);
	// expires is exp. Both are checked again on every use, with the skew.
	notBefore, expires time.Time
}

// verifiedCache remembers tokens that passed every check, so that a client
// presenting the same token on many requests costs one parse and one
// signature verification. It holds digests of tokens, never tokens. An entry
// counts only while its kid is not revoked and the key set still holds the
// very key object that verified it (a refreshed set brings new objects, so a
// key dropped or replaced stops matching at once), and only within the
// token's lifetime, checked against the clock on every use.
type verifiedCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*verifiedToken
}

func (c *verifiedCache) get(token string) *verifiedToken {
	sum := sha256.Sum256([]byte(token))
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[sum]
}

func (c *verifiedCache) add(token string, vt *verifiedToken) {
	sum := sha256.Sum256([]byte(token))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= verifiedCacheEntries {
		// Start afresh rather than track recency: tokens are short-lived.
		c.entries = make(map[[sha256.Size]byte]*verifiedToken, 256)
	}
	c.entries[sum] = vt
}

// cached returns the claims of a token verified before, when every condition
// of its entry still holds.
func (v *Verifier) cached(token string) (*Claims, bool) {
	vt := v.verified.get(token)
	if vt == nil || v.revoked[vt.kid] {
		return nil, false
	}
	key, held, stale := v.key(vt.kid)
	if !held || key != vt.key || (stale && !v.running.Load()) {
		// A stale set without the background loop is refreshed by the full path.
		return nil, false
	}
	now := v.now()
	if !now.Before(vt.expires.Add(v.skew)) || vt.notBefore.After(now.Add(v.skew)) {
		return nil, false
	}
	return vt.claims, true
}
