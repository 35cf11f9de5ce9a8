package desk

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Result statuses a reviewer settles.
const (
	StatusApproved         = "approved"
	StatusRejected         = "rejected"
	StatusChangesRequested = "changesRequested"
	// StatusCancelled is a request the registry withdrew before a reviewer
	// settled it.
	StatusCancelled = "cancelled"
)

// Subject names what a submission asks to be reviewed: one proposal of one
// request record of a registry, by its effect digest.
type Subject struct {
	Source  string `json:"source"`
	Type    string `json:"type"`
	ID      string `json:"id"`
	Version int64  `json:"version"`
	Digest  string `json:"digest"`
}

// PolicyRef is the review policy a request is reviewed under.
type PolicyRef struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	Digest  string `json:"digest"`
}

// Request is one review request the desk holds.
type Request struct {
	ID string `json:"id"`
	// ClientID and IdempotencyKey identify the submission: the same key of
	// the same client is the same request.
	ClientID         string          `json:"clientId"`
	IdempotencyKey   string          `json:"idempotencyKey"`
	Profile          string          `json:"profile"`
	Subject          Subject         `json:"subject"`
	Policy           PolicyRef       `json:"policy"`
	SubmissionDigest string          `json:"submissionDigest"`
	Requester        string          `json:"requesterReference"`
	Snapshot         json.RawMessage `json:"snapshot"`
	ReceivedAt       time.Time       `json:"receivedAt"`
	// Attachments are the proposal's frozen attachment slots; nil when the
	// request entity has none.
	Attachments []Attachment `json:"attachments"`
	Result      *Result      `json:"result,omitempty"`
}

// Attachment is one filled attachment slot of a proposal as the registry
// froze it at submission, with its verification status then.
type Attachment struct {
	Slot         string `json:"slotId"`
	MediaType    string `json:"contentType"`
	Bytes        int64  `json:"byteSize"`
	SHA256       string `json:"sha256"`
	Verification string `json:"verificationStatus"`
	PolicyDigest string `json:"verificationPolicyDigest,omitempty"`
}

// Result is what the reviewer settled.
type Result struct {
	ResultID       string     `json:"resultId"`
	Status         string     `json:"status"`
	CompletedAt    time.Time  `json:"completedAt"`
	AvailableUntil *time.Time `json:"availableUntil,omitempty"`
}

// fileStore keeps every request in one JSON file, rewritten atomically
// (temporary file, fsync, rename) after each change; a change that cannot
// be written is not kept in memory either.
type fileStore struct {
	path string
	mu   sync.Mutex
	reqs []*Request
}

type storeFile struct {
	Format   string     `json:"format"`
	Requests []*Request `json:"requests"`
}

const storeFormat = "registrum.reviewdesk/v1"

func openStore(path string) (*fileStore, error) {
	s := &fileStore{path: path}
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reviewdesk: data file: %w", err)
	}
	var f storeFile
	if err := json.Unmarshal(raw, &f); err != nil || f.Format != storeFormat {
		return nil, fmt.Errorf("reviewdesk: data file %s is not a review desk's (format %s)", path, storeFormat)
	}
	s.reqs = f.Requests
	return s, nil
}

// write persists reqs; the caller holds mu.
func (s *fileStore) write(reqs []*Request) error {
	b, err := json.MarshalIndent(storeFile{Format: storeFormat, Requests: reqs}, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("reviewdesk: data file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".requests-*.tmp")
	if err != nil {
		return fmt.Errorf("reviewdesk: data file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("reviewdesk: data file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("reviewdesk: data file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("reviewdesk: data file: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("reviewdesk: data file: %w", err)
	}
	return nil
}

// errKeyReused is a submission key of a client already used for another
// submission.
var errKeyReused = errors.New("reviewdesk: the Idempotency-Key was used for another submission")

// submit stores r unless its client's key is known: then the stored request
// is returned (created false), or errKeyReused when the digests differ.
func (s *fileStore) submit(r *Request) (*Request, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, old := range s.reqs {
		if old.ClientID == r.ClientID && old.IdempotencyKey == r.IdempotencyKey {
			if old.SubmissionDigest != r.SubmissionDigest {
				return nil, false, errKeyReused
			}
			return copyRequest(old), false, nil
		}
	}
	next := append(slices.Clip(s.reqs), r)
	if err := s.write(next); err != nil {
		return nil, false, err
	}
	s.reqs = next
	return copyRequest(r), true, nil
}

// get returns request id, or nil.
func (s *fileStore) get(id string) *Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reqs {
		if r.ID == id {
			return copyRequest(r)
		}
	}
	return nil
}

// list returns every request, newest first.
func (s *fileStore) list() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Request, 0, len(s.reqs))
	for i := len(s.reqs) - 1; i >= 0; i-- {
		out = append(out, copyRequest(s.reqs[i]))
	}
	return out
}

// errSettled is a decision on a request that already has a result.
var errSettled = errors.New("reviewdesk: the request is already settled")

// settle records the result of request id once.
func (s *fileStore) settle(id string, res *Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.reqs, func(r *Request) bool { return r.ID == id })
	if i < 0 {
		return fs.ErrNotExist
	}
	if s.reqs[i].Result != nil {
		return errSettled
	}
	updated := copyRequest(s.reqs[i])
	updated.Result = res
	next := slices.Clone(s.reqs)
	next[i] = updated
	if err := s.write(next); err != nil {
		return err
	}
	s.reqs = next
	return nil
}

// withdraw cancels request id of client: a request awaiting review is
// settled as cancelled with res; one already cancelled answers its result
// again; one a reviewer settled is errSettled; an unknown one (or another
// client's) fs.ErrNotExist.
func (s *fileStore) withdraw(id, client string, res *Result) (*Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.reqs, func(r *Request) bool { return r.ID == id && r.ClientID == client })
	switch {
	case i < 0:
		return nil, fs.ErrNotExist
	case s.reqs[i].Result != nil && s.reqs[i].Result.Status == StatusCancelled:
		return copyRequest(s.reqs[i]), nil
	case s.reqs[i].Result != nil:
		return nil, errSettled
	}
	updated := copyRequest(s.reqs[i])
	updated.Result = res
	next := slices.Clone(s.reqs)
	next[i] = updated
	if err := s.write(next); err != nil {
		return nil, err
	}
	s.reqs = next
	return copyRequest(updated), nil
}

func copyRequest(r *Request) *Request {
	c := *r
	if r.Result != nil {
		res := *r.Result
		c.Result = &res
	}
	return &c
}
