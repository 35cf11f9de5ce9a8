package hooks

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/registrum/registrum/internal/telemetry"
)

// A Doer sends one HTTP request (an *http.Client).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// nonPublic are the prefixes a public destination may never reach, beyond
// what netip classifies as loopback, private, link-local, multicast or
// unspecified.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (CGNAT)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: may embed any IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2001:db8::/32"), // documentation
	netip.MustParsePrefix("2002::/16"),     // 6to4: may embed any IPv4 address
}

// IsPublic reports whether a is a public unicast address.
func IsPublic(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// allowed reports whether the network policy admits a connection to a.
func allowed(policy string, a netip.Addr) bool {
	a = a.Unmap()
	switch policy {
	case NetworkLoopback:
		return a.IsLoopback()
	case NetworkPrivate:
		return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast()
	default:
		return IsPublic(a)
	}
}

// control checks the address of every connection as it is made, after name
// resolution: a name that resolves (or later rebinds) to an address the
// policy refuses is never connected to.
func control(policy string) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("hooks: network policy %s: unreadable address", policy)
		}
		if !allowed(policy, ap.Addr()) {
			return fmt.Errorf("hooks: network policy %s refuses address %s", policy, ap.Addr())
		}
		return nil
	}
}

// newClient returns the HTTP client of a destination: connections checked
// against its network policy, no proxy (a proxy would connect for us,
// unchecked), redirects never followed (a 3xx answer is a failed attempt),
// each attempt bounded by its context.
func newClient(d *Destination) Doer {
	const timeout = 10 * time.Second // the longest attempt the policy allows
	dialer := &net.Dialer{Timeout: timeout, Control: control(d.Network)}
	return &http.Client{
		// With telemetry on, each send is a client span and carries its
		// traceparent (an extra header; the protocol's stay exact).
		Transport: telemetry.Transport(&http.Transport{
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			MaxIdleConnsPerHost:   100,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   timeout,
			ResponseHeaderTimeout: timeout,
		}),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
