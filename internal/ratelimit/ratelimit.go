// Package ratelimit limits how fast each client may call a service: one
// token bucket (golang.org/x/time/rate) per client, in a table of bounded
// size, and the answer's headers as the IETF draft "RateLimit header fields
// for HTTP" (draft-ietf-httpapi-ratelimit-headers-11) and RFC 9110
// Retry-After write them. The record host limits /v1 with it, the issuer
// /token.
package ratelimit

import (
	"container/list"
	"crypto/sha256"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultClients bounds the table of clients when the caller sets no bound.
// An entry is a few hundred bytes, so the default table stays under a few
// megabytes.
const DefaultClients = 10000

// PolicyName names the one quota policy in RateLimit-Policy and RateLimit.
const PolicyName = "client"

// Limiter admits each client's requests at a sustained rate with a burst.
// Clients are named by a key the caller chooses (see AddressKey); the table
// holds SHA-256 digests of keys, never the keys, and forgets the least
// recently seen client when it is full. A forgotten client starts again
// with a full bucket, as a client seen for the first time does; since the
// least recently seen client is the one most likely to have refilled its
// bucket anyway, the bound rarely lets a client through sooner. Its methods
// are safe for concurrent use.
type Limiter struct {
	limit   rate.Limit
	burst   int
	max     int
	policy  string
	mu      sync.Mutex
	recent  *list.List // of *client, most recently seen first
	clients map[[sha256.Size]byte]*list.Element
}

type client struct {
	key    [sha256.Size]byte
	bucket *rate.Limiter
}

// New returns a limiter that admits perSecond requests a second per client,
// with bursts of up to burst requests, keeping at most clients clients
// (DefaultClients when clients is 0 or less). perSecond must be positive and
// burst at least 1.
func New(perSecond float64, burst, clients int) (*Limiter, error) {
	if !(perSecond > 0) || math.IsInf(perSecond, 0) {
		return nil, fmt.Errorf("ratelimit: requests per second must be a positive number, not %v", perSecond)
	}
	if burst < 1 {
		return nil, fmt.Errorf("ratelimit: burst must be at least 1, not %d", burst)
	}
	if clients <= 0 {
		clients = DefaultClients
	}
	window := int64(math.Ceil(float64(burst) / perSecond))
	return &Limiter{
		limit:   rate.Limit(perSecond),
		burst:   burst,
		max:     clients,
		policy:  fmt.Sprintf("%q;q=%d;w=%d", PolicyName, burst, max(window, 1)),
		recent:  list.New(),
		clients: make(map[[sha256.Size]byte]*list.Element),
	}, nil
}

// Decision is the outcome of one request.
type Decision struct {
	// Allowed is whether the request may be served.
	Allowed bool
	// Remaining is how many more requests the client may send at once.
	Remaining int
	// Reset is how long until the client's bucket is full again (Allowed),
	// or until it holds one request (refused).
	Reset time.Duration
}

// Allow takes one request of the client named key at now.
func (l *Limiter) Allow(key string, now time.Time) Decision {
	sum := sha256.Sum256([]byte(key))
	l.mu.Lock()
	defer l.mu.Unlock()
	var c *client
	if el, ok := l.clients[sum]; ok {
		l.recent.MoveToFront(el)
		c = el.Value.(*client)
	} else {
		for l.recent.Len() >= l.max {
			oldest := l.recent.Back()
			delete(l.clients, oldest.Value.(*client).key)
			l.recent.Remove(oldest)
		}
		c = &client{key: sum, bucket: rate.NewLimiter(l.limit, l.burst)}
		l.clients[sum] = l.recent.PushFront(c)
	}
	allowed := c.bucket.AllowN(now, 1)
	tokens := c.bucket.TokensAt(now)
	d := Decision{Allowed: allowed, Remaining: max(int(math.Floor(tokens)), 0)}
	missing := float64(l.burst) - tokens
	if !allowed {
		missing = 1 - tokens
	}
	if missing > 0 {
		d.Reset = time.Duration(missing / float64(l.limit) * float64(time.Second))
	}
	return d
}

// Len returns the number of clients the table holds.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recent.Len()
}

// WriteHeaders sets the headers of an answer under decision d:
// RateLimit-Policy ("client";q=<burst>;w=<seconds to refill a burst>),
// RateLimit ("client";r=<remaining>;t=<seconds until Reset>) and, on a
// refusal, Retry-After, equal to the RateLimit t (whole seconds, rounded up,
// at least 1), as the draft asks of an answer carrying both.
func (l *Limiter) WriteHeaders(h http.Header, d Decision) {
	t := int64(math.Ceil(d.Reset.Seconds()))
	if !d.Allowed {
		t = max(t, 1)
		h.Set("Retry-After", strconv.FormatInt(t, 10))
	}
	h.Set("RateLimit-Policy", l.policy)
	h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", PolicyName, d.Remaining, t))
}

// RetryAfter returns the whole seconds a refused client should wait, as
// WriteHeaders sends them in Retry-After.
func RetryAfter(d Decision) int64 { return max(int64(math.Ceil(d.Reset.Seconds())), 1) }

// AddressKey returns the client key of a request's remote address
// (http.Request.RemoteAddr): the IP address, and for IPv6 its /64 prefix,
// since one host commonly holds a whole /64. The port is dropped. The
// address is the peer's: behind a reverse proxy every client shares the
// proxy's address, so limit there or by principal.
func AddressKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "address:" + host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return "address:" + p.String()
	}
	return "address:" + ip.String()
}
