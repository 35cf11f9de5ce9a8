package desk

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"sync"
	"time"
)

// Bounds of sessions and sign-in attempts.
const (
	sessionLifetime = 8 * time.Hour
	maximumSessions = 10_000
	// Failed sign-ins: after failureLimit failures within failureWindow
	// from one client address for one account, sign-in from that address
	// to that account is refused until the window has passed. Another
	// address is not affected: a guesser cannot lock the reviewer out.
	failureLimit  = 10
	failureWindow = 5 * time.Minute
	// maximumThrottled bounds the table of (address, account) pairs with
	// recent failures. When it is full, expired entries go first, then the
	// entry whose last failure is the oldest.
	maximumThrottled = 4096
	// reviewerAccount is the one account the desk has: its reviewer.
	reviewerAccount = "reviewer"
)

// throttleKey names whose failed sign-ins count together: one client
// address (an IPv6 address by its /64 prefix, which one client usually
// holds whole) and one account.
type throttleKey struct {
	address, account string
}

// clientKey is the throttle key of a sign-in to account from r's peer
// address (the connection's, not a forwarded header's: behind a proxy,
// every client shares the proxy's address).
func clientKey(r *http.Request, account string) throttleKey {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.To4() == nil {
			ip = ip.Mask(net.CIDRMask(64, 128))
		}
		host = ip.String()
	}
	return throttleKey{address: host, account: account}
}

// session is one browser's session: anonymous until the reviewer signs in.
// Its CSRF token is checked on every form post.
type session struct {
	id, csrf string
	reviewer bool
	expires  time.Time
}

type sessions struct {
	now  func() time.Time
	mu   sync.Mutex
	byID map[string]*session
	// failures holds, per key, the times of its recent failed sign-ins
	// (at most failureLimit, oldest first); at most maximumThrottled keys.
	failures map[throttleKey][]time.Time
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{now: now, byID: map[string]*session{}, failures: map[throttleKey][]time.Time{}}
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// start makes a new session.
func (s *sessions) start(reviewer bool) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.byID) >= maximumSessions {
		for id, se := range s.byID {
			if !now.Before(se.expires) || !se.reviewer {
				delete(s.byID, id)
			}
		}
	}
	se := &session{id: randomToken(), csrf: randomToken(), reviewer: reviewer, expires: now.Add(sessionLifetime)}
	s.byID[se.id] = se
	return se
}

// get returns the live session of id, or nil.
func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.byID[id]
	if se == nil {
		return nil
	}
	if !s.now().Before(se.expires) {
		delete(s.byID, id)
		return nil
	}
	c := *se
	return &c
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// throttled reports whether sign-in is refused for now to key.
func (s *sessions) throttled(key throttleKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recent(key, s.now().Add(-failureWindow))) >= failureLimit
}

// recent returns key's failures after cut, dropping older ones (and the
// key when none is left). s.mu is held.
func (s *sessions) recent(key throttleKey, cut time.Time) []time.Time {
	times := s.failures[key]
	i := 0
	for i < len(times) && !times[i].After(cut) {
		i++
	}
	if i == len(times) {
		delete(s.failures, key)
		return nil
	}
	times = times[i:]
	s.failures[key] = times
	return times
}

// failed counts a failed sign-in of key, within the table's bound.
func (s *sessions) failed(key throttleKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	cut := now.Add(-failureWindow)
	times := s.recent(key, cut)
	if times == nil && len(s.failures) >= maximumThrottled {
		s.evict(cut)
	}
	times = append(times, now)
	if len(times) > failureLimit {
		times = times[len(times)-failureLimit:]
	}
	s.failures[key] = times
}

// evict makes room for one key: expired entries go, then, if none did, the
// entry whose last failure is the oldest. s.mu is held.
func (s *sessions) evict(cut time.Time) {
	var oldest throttleKey
	var oldestAt time.Time
	for k, times := range s.failures {
		last := times[len(times)-1]
		if !last.After(cut) {
			delete(s.failures, k)
			continue
		}
		if oldestAt.IsZero() || last.Before(oldestAt) {
			oldest, oldestAt = k, last
		}
	}
	if len(s.failures) >= maximumThrottled {
		delete(s.failures, oldest)
	}
}

// validCSRF compares a posted form token with the session's in constant time.
func (se *session) validCSRF(posted string) bool {
	return se != nil && subtle.ConstantTimeCompare([]byte(posted), []byte(se.csrf)) == 1
}

func (d *Desk) cookieName() string {
	if d.secure {
		return "__Host-reviewdesk"
	}
	return "reviewdesk"
}

// current returns the request's session, or nil.
func (d *Desk) current(r *http.Request) *session {
	c, err := r.Cookie(d.cookieName())
	if err != nil || c.Value == "" || len(c.Value) > 64 {
		return nil
	}
	return d.sessions.get(c.Value)
}

// setCookie sends the session cookie: HttpOnly, SameSite=Strict, path /,
// Secure when the desk is served over https.
func (d *Desk) setCookie(w http.ResponseWriter, se *session) {
	c := &http.Cookie{Name: d.cookieName(), Value: se.id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: d.secure}
	if se.id == "" {
		c.MaxAge = -1
	} else {
		c.MaxAge = int(sessionLifetime / time.Second)
	}
	http.SetCookie(w, c)
}
