// Package replay is the issuer's bounded single-use cache of client-assertion
// identifiers. An entry is kept until the assertion it came from could no
// longer be valid; when the cache is full of live entries it refuses new
// ones rather than evicting a live entry early.
package replay

import (
	"container/heap"
	"errors"
	"sync"
	"time"
)

// ErrReplayed reports a key that was already used and is still live.
var ErrReplayed = errors.New("replay: identifier already used")

// ErrFull reports a cache holding its maximum of live entries.
var ErrFull = errors.New("replay: cache full of live entries")

// Cache is a bounded set of keys, each live until its expiry. It is safe for
// concurrent use.
type Cache struct {
	mu       sync.Mutex
	capacity int
	live     map[string]time.Time
	byExpiry expiryHeap
}

// New returns a cache holding at most capacity live entries.
func New(capacity int) *Cache {
	return &Cache{capacity: capacity, live: make(map[string]time.Time, min(capacity, 1<<16))}
}

// Use records key as used until expiry. It returns ErrReplayed when key is
// already live, and ErrFull when capacity live entries are held; entries
// whose expiry is at or before now are dropped first.
func (c *Cache) Use(key string, expiry, now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.byExpiry) > 0 && !c.byExpiry[0].expiry.After(now) {
		e := heap.Pop(&c.byExpiry).(entry)
		if exp, ok := c.live[e.key]; ok && exp.Equal(e.expiry) {
			delete(c.live, e.key)
		}
	}
	if _, ok := c.live[key]; ok {
		return ErrReplayed
	}
	if len(c.live) >= c.capacity {
		return ErrFull
	}
	c.live[key] = expiry
	heap.Push(&c.byExpiry, entry{key: key, expiry: expiry})
	return nil
}

// Len returns the number of entries held (live or not yet pruned).
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.live)
}

type entry struct {
	key    string
	expiry time.Time
}

type expiryHeap []entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expiry.Before(h[j].expiry) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(entry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
