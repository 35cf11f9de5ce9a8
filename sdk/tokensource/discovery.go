package tokensource

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// DiscoveryPath is the RFC 8414 discovery document's path under an issuer's URL.
const DiscoveryPath = "/.well-known/oauth-authorization-server"

// metadata is the part of an RFC 8414 document the source reads.
type metadata struct {
	Issuer        string `json:"issuer"`
	TokenEndpoint string `json:"token_endpoint"`
}

// resolve fills in the audience and the token URL from the issuer's
// discovery document, once. The caller holds s.mu.
func (s *Source) resolve(ctx context.Context) error {
	if s.resolved {
		return nil
	}
	if s.cfg.Issuer != "" {
		docURL := s.cfg.Issuer
		if !strings.Contains(docURL, "/.well-known/") {
			docURL = strings.TrimSuffix(docURL, "/") + DiscoveryPath
		}
		md, found, err := s.discover(ctx, docURL)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("tokensource: no discovery document at %s", docURL)
		}
		if !sameAuthority(md.Issuer, docURL) {
			return fmt.Errorf("tokensource: the discovery document at %s names issuer %q, which is not on that URL's host and port", docURL, md.Issuer)
		}
		if s.cfg.TokenURL == "" {
			if !httpURL(md.TokenEndpoint) {
				return fmt.Errorf("tokensource: the discovery document at %s names no http or https token_endpoint", docURL)
			}
			s.cfg.TokenURL = md.TokenEndpoint
		}
		if s.cfg.Audience == "" {
			s.cfg.Audience = md.Issuer
		}
		s.resolved = true
		return nil
	}
	if s.cfg.Audience == "" {
		u, _ := url.Parse(s.cfg.TokenURL)
		docURL := u.Scheme + "://" + u.Host + DiscoveryPath
		md, found, err := s.discover(ctx, docURL)
		if err != nil {
			return err
		}
		switch {
		case !found || !sameEndpoint(md.TokenEndpoint, s.cfg.TokenURL):
			// No document describes this token endpoint: RFC 7523's
			// audience, the token endpoint URL.
			s.cfg.Audience = s.cfg.TokenURL
		case !sameAuthority(md.Issuer, s.cfg.TokenURL):
			return fmt.Errorf("tokensource: the discovery document at %s names issuer %q, which is not on the token URL's host and port; set Audience (or Issuer) to the issuer identifier", docURL, md.Issuer)
		default:
			s.cfg.Audience = md.Issuer
		}
	}
	s.resolved = true
	return nil
}

// discover reads the discovery document at docURL; found is false when the
// URL answers anything but 200 (redirects are not followed) or a body that
// is not a JSON object naming an http or https issuer.
func (s *Source) discover(ctx context.Context, docURL string) (md metadata, found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, docURL, nil)
	if err != nil {
		return md, false, fmt.Errorf("tokensource: discovery request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	client := *s.cfg.HTTPClient
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return md, false, fmt.Errorf("tokensource: discovery: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return md, false, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaximumResponseBytes+1))
	if err != nil {
		return md, false, fmt.Errorf("tokensource: read discovery document %s: %w", docURL, err)
	}
	if len(body) > MaximumResponseBytes {
		return md, false, fmt.Errorf("tokensource: discovery document %s larger than %d bytes", docURL, MaximumResponseBytes)
	}
	if err := json.Unmarshal(body, &md); err != nil || !httpURL(md.Issuer) {
		// Not a discovery document naming an issuer.
		return metadata{}, false, nil
	}
	return md, true, nil
}

// sameEndpoint reports whether a discovered token endpoint names the token
// URL: the same path on the same host and port (see sameAuthority), the
// scheme aside (a development issuer's documents may name https while it
// serves plain HTTP on loopback).
func sameEndpoint(discovered, tokenURL string) bool {
	ud, err1 := url.Parse(discovered)
	ut, err2 := url.Parse(tokenURL)
	return err1 == nil && err2 == nil && ud.Path == ut.Path && sameAuthority(discovered, tokenURL)
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.User == nil
}

// sameAuthority reports whether two URLs name the same host and port (the
// scheme's default port when none is written); the loopback names
// (localhost and loopback IP addresses) count as one host, since a
// development issuer's https identifier names localhost while it listens on
// 127.0.0.1.
func sameAuthority(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil || !httpURL(a) || !httpURL(b) {
		return false
	}
	if effectivePort(ua) != effectivePort(ub) {
		return false
	}
	ha, hb := strings.ToLower(ua.Hostname()), strings.ToLower(ub.Hostname())
	return ha == hb || (loopback(ha) && loopback(hb))
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
