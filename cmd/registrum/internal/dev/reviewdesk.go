package dev

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/examples/reviewdesk/desk"
	"github.com/registrum/registrum/issuer"
	"github.com/registrum/registrum/issuer/keys"
	"github.com/registrum/registrum/model"
)

// The record host's credential with the review desk: a client of the dev
// issuer, holding one scope the desk requires.
const (
	reviewClientID    = "registrum-host"
	reviewClientScope = "review:submit"
	reviewClientKey   = "review-client.jwk"
	// reviewProfile is the Registry-Casework-Profile the host sends and the
	// desk accepts.
	reviewProfile = "registrum-dev"
	// reviewPollSeconds is how often the host asks the desk for a result.
	reviewPollSeconds = 2
)

// reviewDesk is the review desk dev runs for the package's review
// authorities: its configuration, the file holding the reviewer's
// password, and the authorities and policies it answers for.
type reviewDesk struct {
	Config       *desk.Config
	PasswordFile string
	Authorities  []string
}

// planReviewDesk returns the desk of the package's review authorities, or
// nil when no request entity is reviewed by an authority. The reviewer's
// password is generated once into <data>/reviewdesk/reviewer-password
// (owner-only); the desk keeps only its hash.
func planReviewDesk(p *model.Package, data, publicURL string, icfg *issuer.Config, issuerAddr string) (*reviewDesk, error) {
	policies := map[string]desk.Policy{}
	seen := map[string]bool{}
	var authorities []string
	for _, e := range p.Entities {
		if !e.IsRequestEntity() || e.ChangeRequest.Review.Mode != model.ReviewAuthority {
			continue
		}
		r := e.ChangeRequest.Review
		policies[r.PolicyID] = desk.Policy{Title: r.PolicyID + ", for " + e.ID + " requests", Version: "1"}
		if !seen[r.Authority] {
			seen[r.Authority] = true
			authorities = append(authorities, r.Authority)
		}
	}
	if len(authorities) == 0 {
		return nil, nil
	}
	sort.Strings(authorities)
	dir := filepath.Join(data, "reviewdesk")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("dev: review desk: %w", err)
	}
	pwFile := filepath.Join(dir, "reviewer-password")
	pw, err := os.ReadFile(pwFile)
	if errors.Is(err, fs.ErrNotExist) {
		b := make([]byte, 18)
		rand.Read(b)
		pw = []byte(base64.RawURLEncoding.EncodeToString(b))
		err = os.WriteFile(pwFile, append(pw, '\n'), 0o600)
	}
	if err != nil {
		return nil, fmt.Errorf("dev: review desk: reviewer password: %w", err)
	}
	hash, err := desk.HashPassword(strings.TrimSpace(string(pw)))
	if err != nil {
		return nil, fmt.Errorf("dev: review desk: %w", err)
	}
	cfg := &desk.Config{
		PublicURL:            publicURL,
		DataFile:             filepath.Join(dir, "requests.json"),
		ReviewerPasswordHash: hash,
		Authentication: desk.Authentication{Issuer: icfg.Issuer, JWKSURL: "http://" + issuerAddr + icfg.Signing.JWKSPath,
			Audience: icfg.AccessTokens.Audiences[0], Clients: []string{reviewClientID}, RequiredScope: reviewClientScope,
			RevokedKeyIDs: append([]string(nil), icfg.Signing.RevokedKeyIDs...)},
		Profiles: []string{reviewProfile},
		Policies: policies,
	}
	return &reviewDesk{Config: cfg, PasswordFile: pwFile, Authorities: authorities}, nil
}

// writeReviewClient registers the record host's client with the dev
// issuer (issuerDir/clients) and keeps its private key in the host's
// secrets (generated once).
func writeReviewClient(data, issuerDir string) error {
	secrets := filepath.Join(data, "secrets")
	if err := os.MkdirAll(secrets, 0o700); err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	keyPath := filepath.Join(secrets, reviewClientKey)
	var priv jose.JSONWebKey
	raw, err := os.ReadFile(keyPath)
	switch {
	case err == nil:
		if err := priv.UnmarshalJSON(raw); err != nil || priv.IsPublic() {
			return fmt.Errorf("dev: %s holds no private JWK: remove it to have a new one made", keyPath)
		}
	case errors.Is(err, fs.ErrNotExist):
		k, _, err := keys.Generate(keys.AlgES256)
		if err != nil {
			return err
		}
		if raw, err = k.MarshalJSON(); err != nil {
			return err
		}
		if err := os.WriteFile(keyPath, raw, 0o600); err != nil {
			return fmt.Errorf("dev: write the review client's key: %w", err)
		}
		priv = *k
	default:
		return fmt.Errorf("dev: %w", err)
	}
	pub := priv.Public()
	pub.KeyID, pub.Algorithm, pub.Use = priv.KeyID, priv.Algorithm, "sig"
	pubJSON, err := pub.MarshalJSON()
	if err != nil {
		return err
	}
	reg := fmt.Sprintf("# Written by registrum dev: the record host's credential with the review desk.\nclientId: %q\nprincipal: %q\nauthorization:\n  scopes: [%q]\nkeys:\n  - %s\n",
		reviewClientID, "service:"+reviewClientID, reviewClientScope, pubJSON)
	if err := os.WriteFile(filepath.Join(issuerDir, "clients", reviewClientID+".yaml"), []byte(reg), 0o644); err != nil {
		return fmt.Errorf("dev: register the review client: %w", err)
	}
	return nil
}

// reviewBlock is the record host's reviewAuthorities section: every
// authority of the package answered by the desk at deskURL, the host
// authenticating as the review client.
func reviewBlock(rd *reviewDesk, p *model.Package, deskURL string, setup *issuer.DevSetup) string {
	if rd == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("reviewAuthorities:\n")
	for _, id := range rd.Authorities {
		fmt.Fprintf(&b, "  %s:\n    endpoint: %q\n    profile: %q\n    producerId: %q\n    pollSeconds: %d\n    client: {tokenUrl: %q, clientId: %q, keyRef: %q, audience: %q}\n",
			id, deskURL, reviewProfile, p.Registry.ID, reviewPollSeconds, setup.TokenURL, reviewClientID, "secret:file/"+reviewClientKey, setup.Issuer)
	}
	return b.String()
}
