package soak

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrum/registrum/sdk/verifier"
)

// malwareMarker in an attachment's bytes makes the soak's scanner reject
// it; every other content is approved.
const malwareMarker = "MALWARE"

// verdictFor is the verdict the soak's scanner gives content: what the
// verification of an acknowledged upload must end with.
func verdictFor(content []byte) string {
	if bytes.Contains(content, []byte(malwareMarker)) {
		return "rejected"
	}
	return "approved"
}

// markerCheck is the verifier the scanner serves: it rejects content
// holding malwareMarker and approves the rest.
type markerCheck struct{ calls *atomic.Int64 }

// Verify implements verifier.Verifier.
func (m markerCheck) Verify(_ context.Context, _ verifier.Attachment, content io.Reader) (verifier.Verdict, error) {
	m.calls.Add(1)
	b, err := io.ReadAll(content)
	if err != nil {
		return verifier.Verdict{}, fmt.Errorf("soak scanner: read: %w", err)
	}
	if verdictFor(b) == "rejected" {
		return verifier.Reject(verifier.ReasonMalware), nil
	}
	return verifier.Approve(), nil
}

// scanner is the soak's http verifier (docs/verifiers.md, "The http kind"),
// served by sdk/verifier.HTTPHandler on a fixed loopback address. Down, it
// is unreachable: the listener is closed and every connection cut, so the
// host's calls fail to connect (a retry) until it listens again on the
// same address.
type scanner struct {
	addr    string
	handler http.Handler
	calls   atomic.Int64 // verifications that reached Verify

	mu  sync.Mutex
	srv *http.Server // nil while down
}

// startScanner serves the scanner with credential on a loopback port.
func startScanner(credential []byte) (*scanner, error) {
	s := &scanner{}
	s.handler = verifier.HTTPHandler(markerCheck{calls: &s.calls}, func() ([]byte, error) { return credential, nil }, 4096)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("soak scanner: listen: %w", err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	return s, nil
}

// URL is the endpoint the registry's verifier entry names.
func (s *scanner) URL() string { return "http://" + s.addr + "/scan" }

func (s *scanner) serve(ln net.Listener) {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go srv.Serve(ln)
}

// setDown takes the scanner away (down) or brings it back on its address.
func (s *scanner) setDown(down bool) error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if down {
		if srv == nil {
			return nil
		}
		s.mu.Lock()
		s.srv = nil
		s.mu.Unlock()
		return srv.Close()
	}
	if srv != nil {
		return nil
	}
	var ln net.Listener
	var err error
	// The port was ours a moment ago; retry briefly should the kernel
	// still hold it.
	for try := 0; try < 50; try++ {
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			s.serve(ln)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("soak scanner: listen again on %s: %w", s.addr, err)
}

// dropIdle ends the idle keep-alive connections the hosts hold to the
// scanner (before the end-of-run sample of their goroutines).
func (s *scanner) dropIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.SetKeepAlivesEnabled(false)
	}
}
