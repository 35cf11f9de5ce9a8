package desk

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// Bounds of sessions and sign-in attempts.
const (
	sessionLifetime = 8 * time.Hour
	maximumSessions = 10_000
	// Failed sign-ins: after failureLimit failures within failureWindow,
	// sign-in is refused until the window has passed.
	failureLimit  = 10
	failureWindow = 5 * time.Minute
)

// session is one browser's session: anonymous until the reviewer signs in.
// Its CSRF token is checked on every form post.
type session struct {
	id, csrf string
	reviewer bool
	expires  time.Time
}

type sessions struct {
	now      func() time.Time
	mu       sync.Mutex
	byID     map[string]*session
	failures []time.Time
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{now: now, byID: map[string]*session{}}
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

// throttled reports whether sign-in is refused for now.
func (s *sessions) throttled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cut := s.now().Add(-failureWindow)
	kept := s.failures[:0]
	for _, t := range s.failures {
		if t.After(cut) {
			kept = append(kept, t)
		}
	}
	s.failures = kept
	return len(kept) >= failureLimit
}

func (s *sessions) failed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, s.now())
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
