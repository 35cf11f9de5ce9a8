package config

import (
	"crypto/hmac"
	"fmt"
	"net/url"
	"regexp"

	"github.com/registrum/registrum/internal/secrets"
)

// EventDestination is a webhook destination the package's url hooks name by
// id (handler.destinationId). Its limits only tighten the compiled delivery
// policy; it cannot change what an event carries.
type EventDestination struct {
	// URL is where deliveries are POSTed: scheme, host, port and the fixed
	// request path; no query, fragment or user information.
	URL string `yaml:"url"`
	// HMACSHA256KeyRef names the signing key: the secret file's exact bytes
	// (at least 32), never trimmed or decoded.
	HMACSHA256KeyRef string `yaml:"hmacSha256KeyRef"`
	// PreviousHMACSHA256KeyRef, during a key rotation, names the key being
	// retired (the same form and rules as HMACSHA256KeyRef, another secret).
	// While it is set, every delivery's webhook-signature (Standard Webhooks)
	// carries a signature under each key, so receivers configured with
	// either accept it; X-Registry-Signature is made with the current key
	// only. Remove it to retire the old key.
	PreviousHMACSHA256KeyRef string `yaml:"previousHmacSha256KeyRef"`
	// ClassificationCeiling is the most sensitive event classification the
	// destination may receive (public, internal or restricted); the host
	// refuses to start when a hook bound to it is classified higher.
	ClassificationCeiling string `yaml:"classificationCeiling"`
	// Network is the destination's network policy: public (default; https
	// to a public address only), private (http or https, private and
	// loopback addresses admitted) or loopback (loopback addresses only).
	Network string `yaml:"network"`
	// MaximumAttempts, AttemptTimeoutMs and PayloadRetentionSeconds tighten
	// the compiled delivery policy (0: as compiled), never widen it:
	// MaximumAttempts cuts each hook's retry schedule short, and
	// PayloadRetentionSeconds must outlast the schedule so tightened (the
	// host checks both against the package at start-up).
	MaximumAttempts         int   `yaml:"maximumAttempts"`
	AttemptTimeoutMs        int   `yaml:"attemptTimeoutMs"`
	PayloadRetentionSeconds int64 `yaml:"payloadRetentionSeconds"`
}

// MinEventKeyBytes is the shortest webhook signing key.
const MinEventKeyBytes = 32

var instanceIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

func (c *Config) validateEvents() error {
	if c.InstanceID != "" && !instanceIDPattern.MatchString(c.InstanceID) {
		return c.fail("instanceId", "must be 1 to 64 lowercase letters, digits and dashes, starting with a letter or digit")
	}
	if len(c.EventDestinations) > 0 && c.InstanceID == "" {
		return c.fail("instanceId", "is required when eventDestinations are bound: it names this deployment in every event's source")
	}
	for id, d := range c.EventDestinations {
		at := "eventDestinations." + id
		if !idPattern.MatchString(id) {
			return c.fail(at, "a destination id is lowercase letters, digits and dashes")
		}
		if d == nil {
			return c.fail(at, "is empty")
		}
		switch d.Network {
		case "":
			d.Network = "public"
		case "public", "private", "loopback":
		default:
			return c.fail(at+".network", "must be public, private or loopback")
		}
		u, err := url.Parse(d.URL)
		switch {
		case err != nil || u.Host == "" || !u.IsAbs():
			return c.fail(at+".url", "must be an absolute URL")
		case u.User != nil:
			return c.fail(at+".url", "must not hold user information; deliveries are authenticated by their signature")
		case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
			return c.fail(at+".url", "must have no query or fragment: deliveries go to a fixed path")
		case u.Path == "":
			return c.fail(at+".url", "must name the request path (at least /)")
		case u.Scheme != "https" && !(u.Scheme == "http" && d.Network != "public"):
			return c.fail(at+".url", "must be https; http needs network: private or loopback")
		case d.Network == "loopback" && !isLoopback(u.Hostname()):
			return c.fail(at+".url", "network loopback needs a loopback host (localhost, 127.0.0.1, ::1)")
		}
		if _, err := secrets.ParseRef(d.HMACSHA256KeyRef); err != nil {
			return c.fail(at+".hmacSha256KeyRef", "%v", err)
		}
		if d.PreviousHMACSHA256KeyRef != "" {
			if _, err := secrets.ParseRef(d.PreviousHMACSHA256KeyRef); err != nil {
				return c.fail(at+".previousHmacSha256KeyRef", "%v", err)
			}
			if d.PreviousHMACSHA256KeyRef == d.HMACSHA256KeyRef {
				return c.fail(at+".previousHmacSha256KeyRef", "names the current key; a rotation puts the new key in hmacSha256KeyRef and the old one here")
			}
		}
		switch d.ClassificationCeiling {
		case "public", "internal", "restricted":
		default:
			return c.fail(at+".classificationCeiling", "must be public, internal or restricted")
		}
		if d.MaximumAttempts < 0 || d.AttemptTimeoutMs < 0 || d.PayloadRetentionSeconds < 0 {
			return c.fail(at, "maximumAttempts, attemptTimeoutMs and payloadRetentionSeconds must not be negative")
		}
	}
	return nil
}

// EventKey resolves a destination's signing key: the secret's exact bytes,
// at least MinEventKeyBytes.
func (c *Config) EventKey(id string) ([]byte, error) {
	d := c.EventDestinations[id]
	if d == nil {
		return nil, fmt.Errorf("config: no event destination %q", id)
	}
	at := "eventDestinations." + id + ".hmacSha256KeyRef"
	k, err := secrets.ResolveFile(c.Secrets.Root, d.HMACSHA256KeyRef)
	if err != nil {
		return nil, c.fail(at, "%v", err)
	}
	if len(k) < MinEventKeyBytes {
		return nil, c.fail(at, "the signing key must hold at least %d bytes (it is used as its exact bytes)", MinEventKeyBytes)
	}
	return k, nil
}

// PreviousEventKey resolves the key a destination is rotating away from:
// nil when previousHmacSha256KeyRef is not set, otherwise the secret's exact
// bytes, at least MinEventKeyBytes and not the current key's bytes.
func (c *Config) PreviousEventKey(id string) ([]byte, error) {
	d := c.EventDestinations[id]
	if d == nil {
		return nil, fmt.Errorf("config: no event destination %q", id)
	}
	if d.PreviousHMACSHA256KeyRef == "" {
		return nil, nil
	}
	at := "eventDestinations." + id + ".previousHmacSha256KeyRef"
	k, err := secrets.ResolveFile(c.Secrets.Root, d.PreviousHMACSHA256KeyRef)
	if err != nil {
		return nil, c.fail(at, "%v", err)
	}
	if len(k) < MinEventKeyBytes {
		return nil, c.fail(at, "the signing key must hold at least %d bytes (it is used as its exact bytes)", MinEventKeyBytes)
	}
	cur, err := c.EventKey(id)
	if err != nil {
		return nil, err
	}
	if hmac.Equal(k, cur) {
		return nil, c.fail(at, "holds the same bytes as hmacSha256KeyRef; a rotation needs a new key")
	}
	return k, nil
}
