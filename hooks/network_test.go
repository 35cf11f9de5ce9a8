package hooks

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

func TestNetworkPolicyClassifiesAddresses(t *testing.T) {
	cases := []struct {
		addr                     string
		public, private, loopbck bool
	}{
		{"93.184.215.14", true, true, false},
		{"2606:4700::1111", true, true, false},
		{"127.0.0.1", false, true, true},
		{"::1", false, true, true},
		{"::ffff:127.0.0.1", false, true, true},
		{"10.1.2.3", false, true, false},
		{"172.16.0.1", false, true, false},
		{"192.168.1.1", false, true, false},
		{"169.254.169.254", false, true, false},
		{"100.64.0.1", false, true, false},
		{"fd00::1", false, true, false},
		{"fe80::1", false, true, false},
		{"0.0.0.0", false, false, false},
		{"::", false, false, false},
		{"224.0.0.1", false, false, false},
		{"64:ff9b::a00:1", false, true, false},
		{"198.18.0.1", false, true, false},
	}
	for _, c := range cases {
		a := netip.MustParseAddr(c.addr)
		if got := allowed(NetworkPublic, a); got != c.public {
			t.Errorf("public %s: %v", c.addr, got)
		}
		if got := allowed(NetworkPrivate, a); got != c.private {
			t.Errorf("private %s: %v", c.addr, got)
		}
		if got := allowed(NetworkLoopback, a); got != c.loopbck {
			t.Errorf("loopback %s: %v", c.addr, got)
		}
	}
}

// The public policy is checked on the address actually connected to, after
// name resolution: a name that resolves to loopback is never reached.
func TestPublicPolicyRefusesALoopbackAddressAtConnectTime(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	u, _ := url.Parse(strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/hooks")
	c := newClient(&Destination{ID: "d", URL: u, Network: NetworkPublic})
	req, _ := http.NewRequest(http.MethodPost, u.String(), nil)
	_, err := c.Do(req)
	if err == nil || !strings.Contains(err.Error(), "network policy public refuses address") {
		t.Fatalf("err = %v", err)
	}
	if hits.Load() != 0 {
		t.Fatal("the receiver was reached")
	}
}

// Redirects are never followed: the 3xx answer is the attempt's result.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var other atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { other.Add(1) }))
	defer target.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/x", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL + "/hooks")
	c := newClient(&Destination{ID: "d", URL: u, Network: NetworkLoopback})
	req, _ := http.NewRequest(http.MethodPost, u.String(), strings.NewReader("{}"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || other.Load() != 0 {
		t.Fatalf("status %d, redirect target reached %d times", resp.StatusCode, other.Load())
	}
}
