package requests

// Review authorities and jobs: this file and reviewjobs.go connect the record host to external review authorities
// and runs the post-commit work of change requests as River jobs: sending a
// frozen proposal's submission, pulling the result the authority settled
// (a completion notification is only ever a wake-up; the result is always
// fetched), and applying an approved proposal automatically through its
// logical executor, by the same apply action and guards a person uses.
//
// Every job carries identifiers only and is idempotent: a host that dies
// mid-job leaves the job to River, which gives it to a host again; the
// submission is sent with a stable Idempotency-Key, the result is stored
// once, and the automatic apply uses a stable key of its own.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/registrum/registrum/host/config"
	"github.com/registrum/registrum/internal/telemetry"
	"github.com/registrum/registrum/sdk/tokensource"
	"github.com/registrum/registrum/store"
)

// maxResponseBytes bounds an authority's answer.
const maxResponseBytes = 1 << 20

// ProfileHeader carries the authority profile on every call.
const ProfileHeader = "Registry-Casework-Profile"

// Authorities are the configured review authorities, by id.
type Authorities struct {
	byID map[string]*authority
}

type authority struct {
	id  string
	cfg *config.ReviewAuthority
	// bearer returns the token of the next call: from the issuer client
	// (tokens, cached until it expires), or the static token file read
	// again on every call.
	bearer func(context.Context) (string, error)
	http   *http.Client
}

// NewAuthorities returns the review authorities of cfg (none when it
// configures none). Each is called with the credential its configuration
// names: a client of Registrum's issuer, or a static token file (which
// must resolve now, so that a host with a missing token does not start).
func NewAuthorities(cfg *config.Config) (*Authorities, error) {
	a := &Authorities{byID: map[string]*authority{}}
	for id, ac := range cfg.ReviewAuthorities {
		au := &authority{id: id, cfg: ac, http: &http.Client{Timeout: 30 * time.Second, Transport: telemetry.Transport(nil)}}
		if ref := ac.StaticTokenRef; ref != "" {
			if _, err := cfg.StaticToken(ref); err != nil {
				return nil, fmt.Errorf("review: authority %s: %w", id, err)
			}
			au.bearer = func(context.Context) (string, error) { return cfg.StaticToken(ref) }
		} else {
			ts, err := tokenSource(cfg, ac.Client)
			if err != nil {
				return nil, fmt.Errorf("review: authority %s: %w", id, err)
			}
			au.bearer = func(ctx context.Context) (string, error) {
				tok, err := ts.Token(ctx)
				if err != nil {
					return "", err
				}
				return tok.AccessToken, nil
			}
		}
		a.byID[id] = au
	}
	return a, nil
}

// tokenSource builds a private-key-JWT client of Registrum's issuer.
func tokenSource(cfg *config.Config, cc config.ClientCredentials) (*tokensource.Source, error) {
	raw, err := cfg.ClientKey(cc)
	if err != nil {
		return nil, err
	}
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(raw); err != nil || k.IsPublic() {
		return nil, fmt.Errorf("the secret %s holds no private JWK", cc.KeyRef)
	}
	return tokensource.New(tokensource.Config{TokenURL: cc.TokenURL, ClientID: cc.ClientID, Key: &k, Audience: cc.Audience})
}

// Producer implements records.ReviewAuthorities.
func (a *Authorities) Producer(id string) (string, time.Duration, bool) {
	au, ok := a.byID[id]
	if !ok {
		return "", 0, false
	}
	return au.cfg.ProducerID, time.Duration(au.cfg.RecoveryDays) * 24 * time.Hour, true
}

// Result implements records.ReviewAuthorities: GET
// {endpoint}/v1/review-requests/{requestId}/result.
func (a *Authorities) Result(ctx context.Context, id, requestID string) (*AuthorityResult, error) {
	au, ok := a.byID[id]
	if !ok {
		return nil, fmt.Errorf("review: authority %s is not configured", id)
	}
	status, body, err := au.call(ctx, http.MethodGet, "/v1/review-requests/"+url.PathEscape(requestID)+"/result", "", nil)
	if err != nil {
		return nil, err
	}
	switch status {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusNoContent, http.StatusAccepted:
		return nil, nil
	default:
		return nil, fmt.Errorf("review: authority %s answered %d to a result request", id, status)
	}
	var r AuthorityResult
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("review: authority %s: result: %w", id, err)
	}
	r.Raw = body
	return &r, nil
}

// accepted is the authority's answer to a submission.
type accepted struct {
	RequestID        string  `json:"requestId"`
	Subject          Subject `json:"subject"`
	Policy           Policy  `json:"policy"`
	SubmissionDigest string  `json:"submissionDigest"`
}

// errRefused is an answer that sending again cannot change.
var errRefused = errors.New("review: the authority refused the submission")

// submit sends a submission: POST {endpoint}/v1/review-requests with the
// exact stored body and a key that stays the same on every retry.
func (au *authority) submit(ctx context.Context, sub *store.Submission) (*accepted, error) {
	key := fmt.Sprintf("registrum-submission:%s:%s:%d", sub.Entity, sub.RecordID, sub.ProposalVersion)
	status, body, err := au.call(ctx, http.MethodPost, "/v1/review-requests", key, sub.Body)
	if err != nil {
		return nil, err
	}
	switch {
	case status == http.StatusOK || status == http.StatusCreated:
	case status >= 400 && status < 500 && status != http.StatusTooManyRequests && status != http.StatusRequestTimeout:
		return nil, fmt.Errorf("%w (%d)", errRefused, status)
	default:
		return nil, fmt.Errorf("review: authority %s answered %d to a submission", au.id, status)
	}
	var acc accepted
	if err := json.Unmarshal(body, &acc); err != nil || acc.RequestID == "" {
		return nil, fmt.Errorf("review: authority %s: the answer to a submission names no request", au.id)
	}
	return &acc, nil
}

// withdraw cancels an accepted submission at the authority: POST
// {endpoint}/v1/review-requests/{requestId}/cancel with a key that stays
// the same on every retry. 2xx means cancelled; 404, 409 and 410 mean the
// authority holds nothing left to cancel (unknown, already completed or
// gone), which ends the withdrawal too; anything else is retried.
func (au *authority) withdraw(ctx context.Context, sub *store.Submission) error {
	key := fmt.Sprintf("registrum-withdrawal:%s:%s:%d", sub.Entity, sub.RecordID, sub.ProposalVersion)
	status, _, err := au.call(ctx, http.MethodPost, "/v1/review-requests/"+url.PathEscape(sub.AuthorityRequestID)+"/cancel", key, nil)
	if err != nil {
		return err
	}
	switch {
	case status >= 200 && status < 300, status == http.StatusNotFound, status == http.StatusConflict, status == http.StatusGone:
		return nil
	default:
		return fmt.Errorf("review: authority %s answered %d to a withdrawal", au.id, status)
	}
}

// call sends one request with the host's bearer token for the authority
// (its issuer client's, or the static one) and the authority profile, and
// reads a bounded answer.
func (au *authority) call(ctx context.Context, method, path, idemKey string, body []byte) (int, []byte, error) {
	tok, err := au.bearer(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("review: authority %s: token: %w", au.id, err)
	}
	req, err := http.NewRequestWithContext(ctx, method, au.cfg.Endpoint+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set(ProfileHeader, au.cfg.Profile)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := au.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("review: authority %s: %w", au.id, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return 0, nil, fmt.Errorf("review: authority %s: read answer: %w", au.id, err)
	}
	if len(b) > maxResponseBytes {
		return 0, nil, fmt.Errorf("review: authority %s: answer larger than %d bytes", au.id, maxResponseBytes)
	}
	return resp.StatusCode, b, nil
}
