package auth

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/registrum/registrum/host/config"
)

// evidenceSettings are settings with the evidence claim names of the dev issuer.
func evidenceSettings(url string) *config.Authentication {
	s := settings(url)
	s.AuthorityClaims = config.AuthorityClaims{Principal: "sub", Purpose: "purpose",
		RequesterTags: "requester_tags", EvidenceAudience: "evidence_aud", GrantID: "grant_id", GrantAuthority: "grant_authority", Actor: "act"}
	return s
}

func TestEvidenceTokensAreReadUnderTheConfiguredNames(t *testing.T) {
	key := newKey(t, "k1")
	ks := newKeyServer(t, key)
	v, err := NewVerifier(evidenceSettings(ks.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	base := with(claimsAt(time.Now()), "scope", nil, "purpose", nil,
		"requester_tags", []string{"dev", "audit"}, "evidence_aud", "https://evidence.test", "grant_id", "g-1", "grant_authority", "auth-1")

	c, err := v.Verify(ctx, key.Sign(t, "at+jwt", with(base, "act", "caseworker:anna")))
	if err != nil {
		t.Fatalf("evidence token refused: %v", err)
	}
	want := &Evidence{RequesterTags: []string{"dev", "audit"}, Audience: "https://evidence.test", GrantID: "g-1", GrantAuthority: "auth-1", Actor: "caseworker:anna"}
	if !reflect.DeepEqual(c.Evidence, want) || !reflect.DeepEqual(c.Scopes, []string{"dev", "audit"}) || c.Principal != "service:c1" {
		t.Fatalf("claims = %+v, evidence %+v", c, c.Evidence)
	}
	// Without a grant: both grant claims absent.
	c, err = v.Verify(ctx, key.Sign(t, "at+jwt", with(base, "jti", "t2", "grant_id", nil, "grant_authority", nil)))
	if err != nil || c.Evidence == nil || c.Evidence.GrantID != "" || c.Evidence.GrantAuthority != "" {
		t.Fatalf("evidence token without a grant: %v %+v", err, c)
	}
	// A standard token carries no evidence.
	c, err = v.Verify(ctx, key.Sign(t, "at+jwt", claimsAt(time.Now())))
	if err != nil || c.Evidence != nil || !c.HasScope("records:read") {
		t.Fatalf("standard token: %v %+v", err, c)
	}

	for name, claims := range map[string]map[string]any{
		"tags not an array":        with(base, "requester_tags", "dev"),
		"no tags":                  with(base, "requester_tags", []string{}),
		"too many tags":            with(base, "requester_tags", strings.Split(strings.Repeat("t ", MaximumRequesterTags+1), " ")[:MaximumRequesterTags+1]),
		"an empty tag":             with(base, "requester_tags", []string{"dev", ""}),
		"a tag that is a number":   with(base, "requester_tags", []any{"dev", 7}),
		"no evidence audience":     with(base, "evidence_aud", nil),
		"an empty audience":        with(base, "evidence_aud", ""),
		"an over-long audience":    with(base, "evidence_aud", strings.Repeat("a", 513)),
		"grant id alone":           with(base, "grant_authority", nil),
		"grant authority alone":    with(base, "grant_id", nil),
		"grant id not a string":    with(base, "grant_id", 12),
		"actor not a string":       with(base, "act", []string{"a"}),
		"scopes and tags together": with(base, "scope", "records:read"),
		"evidence claims, no tags": with(base, "requester_tags", nil),
	} {
		_, err := v.Verify(ctx, key.Sign(t, "at+jwt", with(claims, "jti", name)))
		if re, ok := IsRefused(err); !ok || re.Reason != ReasonClaims {
			t.Errorf("%s: err = %v, want a claims refusal", name, err)
		}
	}

	// Without the evidence names configured, the same token is an ordinary
	// token with no scopes and no evidence.
	plain, err := NewVerifier(settings(ks.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err = plain.Verify(ctx, key.Sign(t, "at+jwt", with(base, "jti", "t3")))
	if err != nil || c.Evidence != nil || len(c.Scopes) != 0 {
		t.Fatalf("evidence token, names not configured: %v %+v", err, c)
	}
}
