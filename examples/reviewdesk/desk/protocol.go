package desk

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/registrum/registrum/sdk/reviewauthority"
)

// ProfileHeader carries the caller's authority profile on every protocol call.
const ProfileHeader = "Registry-Casework-Profile"

// Bounds of the review protocol.
const (
	maximumSubmissionBytes = 1 << 20
	maximumKeyBytes        = 256
	maximumNameBytes       = 256
	maximumSlots           = 64
)

var (
	digestPattern    = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	sha256Hex        = regexp.MustCompile(`^[0-9a-f]{64}$`)
	traceparentValue = regexp.MustCompile(`^00-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$`)
)

// submission is the body of POST /v1/review-requests.
type submission struct {
	Kind               string   `json:"kind"`
	Subject            *Subject `json:"subject"`
	RequesterReference string   `json:"requesterReference"`
	Initiator          *struct {
		Issuer  string `json:"issuer"`
		Subject string `json:"subject"`
	} `json:"initiator,omitempty"`
	Context *struct {
		Strategy string          `json:"strategy"`
		Snapshot json.RawMessage `json:"snapshot"`
		// Attachments is the slot manifest the proposal froze, when the
		// request entity has attachment slots.
		Attachments json.RawMessage `json:"attachments,omitempty"`
	} `json:"context"`

	attachments []Attachment
}

// manifest is a proposal's frozen slot manifest.
type manifest struct {
	Slots []struct {
		SlotID                   string `json:"slotId"`
		SHA256                   string `json:"sha256"`
		ByteSize                 int64  `json:"byteSize"`
		ContentType              string `json:"contentType"`
		VerificationStatus       string `json:"verificationStatus"`
		VerificationPolicyDigest string `json:"verificationPolicyDigest"`
	} `json:"slots"`
}

// binding is the answer to an accepted submission.
type binding struct {
	RequestID        string    `json:"requestId"`
	Subject          Subject   `json:"subject"`
	Policy           PolicyRef `json:"policy"`
	SubmissionDigest string    `json:"submissionDigest"`
}

// resultDocument is the answer of GET …/result.
type resultDocument struct {
	ResultID         string     `json:"resultId"`
	RequestID        string     `json:"requestId"`
	Subject          Subject    `json:"subject"`
	Policy           PolicyRef  `json:"policy"`
	SubmissionDigest string     `json:"submissionDigest"`
	Status           string     `json:"status"`
	CompletedAt      time.Time  `json:"completedAt"`
	AvailableUntil   *time.Time `json:"availableUntil,omitempty"`
}

// protocol wraps a review-protocol handler: a traceparent on every answer,
// then the bearer token and the profile header checked.
func (d *Desk) protocol(next func(http.ResponseWriter, *http.Request, *caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("traceparent", traceparent(r.Header.Get("traceparent")))
		w.Header().Set("Cache-Control", "no-store")
		c, err := d.tokens.verify(r.Context(), r.Header.Get("Authorization"))
		switch {
		case errors.Is(err, errKeysUnavailable):
			d.log.Warn("reviewdesk: cannot check a bearer token", "error", err)
			problem(w, http.StatusServiceUnavailable, "The issuer's key set is unavailable; try again.")
			return
		case err != nil:
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			problem(w, http.StatusUnauthorized, "A bearer token of an allowed client of the configured issuer is required.")
			return
		}
		if !slices.Contains(d.cfg.Profiles, r.Header.Get(ProfileHeader)) {
			problem(w, http.StatusForbidden, "The "+ProfileHeader+" header must name a profile of this desk.")
			return
		}
		next(w, r, c)
	}
}

// submit is POST /v1/review-requests: a submission is stored once per
// client and Idempotency-Key; the same key again answers the same binding,
// another submission under a used key is refused.
func (d *Desk) submit(w http.ResponseWriter, r *http.Request, c *caller) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" || len(key) > maximumKeyBytes {
		problem(w, http.StatusBadRequest, fmt.Sprintf("An Idempotency-Key header of 1 to %d bytes is required.", maximumKeyBytes))
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		problem(w, http.StatusUnsupportedMediaType, "The submission is application/json.")
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, maximumSubmissionBytes+1))
	if err != nil {
		problem(w, http.StatusBadRequest, "The submission could not be read.")
		return
	}
	if len(raw) > maximumSubmissionBytes {
		problem(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("A submission is at most %d bytes.", maximumSubmissionBytes))
		return
	}
	sub, err := decodeSubmission(raw)
	if err != nil {
		problem(w, http.StatusBadRequest, err.Error())
		return
	}
	pol, ok := d.cfg.Policies[sub.Kind]
	if !ok {
		problem(w, http.StatusUnprocessableEntity, "This desk applies no review policy of that kind.")
		return
	}
	// The registry expects the SHA-256 of the submission's canonical form
	// (RFC 8785) echoed, whatever equivalent form it was sent in.
	digest, err := reviewauthority.SubmissionDigest(raw)
	if err != nil {
		problem(w, http.StatusBadRequest, "The submission is not canonicalizable JSON.")
		return
	}
	req := &Request{
		ID: newID("rr_"), ClientID: c.ClientID, IdempotencyKey: key, Profile: r.Header.Get(ProfileHeader),
		Subject: *sub.Subject, Policy: d.policyRef(sub.Kind, pol), SubmissionDigest: digest,
		Requester: sub.RequesterReference, Snapshot: sub.Context.Snapshot, ReceivedAt: d.now().UTC().Truncate(time.Second),
	}
	req.Attachments = sub.attachments
	stored, created, err := d.store.submit(req)
	switch {
	case errors.Is(err, errKeyReused):
		problem(w, http.StatusConflict, "The Idempotency-Key was used for another submission.")
		return
	case err != nil:
		d.log.Error("reviewdesk: cannot store a submission", "error", err)
		problem(w, http.StatusServiceUnavailable, "The submission could not be stored; try again.")
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		d.log.Info("reviewdesk: review request received", "requestId", stored.ID, "type", stored.Subject.Type, "record", stored.Subject.ID, "version", stored.Subject.Version)
	}
	writeJSON(w, status, binding{RequestID: stored.ID, Subject: stored.Subject, Policy: stored.Policy, SubmissionDigest: stored.SubmissionDigest})
}

// result is GET /v1/review-requests/{requestId}/result: 404 for a request
// unknown to the caller, 202 while it awaits review, else the result.
func (d *Desk) result(w http.ResponseWriter, r *http.Request, c *caller) {
	req := d.store.get(r.PathValue("requestId"))
	if req == nil || req.ClientID != c.ClientID {
		problem(w, http.StatusNotFound, "No such review request.")
		return
	}
	if req.Result == nil {
		writeJSON(w, http.StatusAccepted, map[string]string{"requestId": req.ID, "status": "pending"})
		return
	}
	res := req.Result
	writeJSON(w, http.StatusOK, resultDocument{ResultID: res.ResultID, RequestID: req.ID, Subject: req.Subject, Policy: req.Policy,
		SubmissionDigest: req.SubmissionDigest, Status: res.Status, CompletedAt: res.CompletedAt, AvailableUntil: res.AvailableUntil})
}

// cancel is POST /v1/review-requests/{requestId}/cancel: the registry
// withdraws a request (its requester cancelled or revised it). A request
// awaiting review is settled as cancelled and its result answered; the same
// withdrawal again answers the same; a request a reviewer already settled
// is 409; one the caller did not submit is 404.
func (d *Desk) cancel(w http.ResponseWriter, r *http.Request, c *caller) {
	if len(r.Header.Get("Idempotency-Key")) > maximumKeyBytes {
		problem(w, http.StatusBadRequest, fmt.Sprintf("An Idempotency-Key is at most %d bytes.", maximumKeyBytes))
		return
	}
	res := &Result{ResultID: newID("res_"), Status: StatusCancelled, CompletedAt: d.now().UTC().Truncate(time.Second)}
	req, err := d.store.withdraw(r.PathValue("requestId"), c.ClientID, res)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		problem(w, http.StatusNotFound, "No such review request.")
		return
	case errors.Is(err, errSettled):
		problem(w, http.StatusConflict, "The review request was already settled by a reviewer.")
		return
	case err != nil:
		d.log.Error("reviewdesk: cannot store a withdrawal", "error", err)
		problem(w, http.StatusServiceUnavailable, "The withdrawal could not be stored; try again.")
		return
	}
	d.log.Info("reviewdesk: review request withdrawn", "requestId", req.ID)
	res = req.Result
	writeJSON(w, http.StatusOK, resultDocument{ResultID: res.ResultID, RequestID: req.ID, Subject: req.Subject, Policy: req.Policy,
		SubmissionDigest: req.SubmissionDigest, Status: res.Status, CompletedAt: res.CompletedAt})
}

// decodeSubmission reads a submission strictly: unknown members refused,
// every member checked.
func decodeSubmission(raw []byte) (*submission, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var s submission
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("The submission is not a review request: %s.", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return nil, fmt.Errorf("The submission holds more than one JSON value.")
	}
	sj := s.Subject
	switch {
	case s.Kind == "":
		return nil, fmt.Errorf("kind is required.")
	case sj == nil || sj.Source == "" || sj.Type == "" || sj.ID == "" || sj.Version < 1:
		return nil, fmt.Errorf("subject needs source, type, id and a version of 1 or more.")
	case len(sj.Source) > maximumNameBytes || len(sj.Type) > maximumNameBytes || len(sj.ID) > maximumNameBytes:
		return nil, fmt.Errorf("subject members are at most %d bytes.", maximumNameBytes)
	case !digestPattern.MatchString(sj.Digest):
		return nil, fmt.Errorf("subject.digest is sha256: and 64 lowercase hex digits.")
	case s.RequesterReference == "" || len(s.RequesterReference) > maximumNameBytes:
		return nil, fmt.Errorf("requesterReference is 1 to %d bytes.", maximumNameBytes)
	case s.Context == nil || s.Context.Strategy != "submitted":
		return nil, fmt.Errorf("context.strategy must be submitted.")
	}
	var snapshot map[string]json.RawMessage
	if json.Unmarshal(s.Context.Snapshot, &snapshot) != nil || snapshot == nil {
		return nil, fmt.Errorf("context.snapshot must be an object.")
	}
	if s.Context.Attachments != nil {
		var m manifest
		if json.Unmarshal(s.Context.Attachments, &m) != nil || m.Slots == nil || len(m.Slots) > maximumSlots {
			return nil, fmt.Errorf("context.attachments must be an object holding a list of at most %d slots.", maximumSlots)
		}
		s.attachments = []Attachment{}
		for _, sl := range m.Slots {
			if sl.SlotID == "" || len(sl.SlotID) > maximumNameBytes || len(sl.ContentType) > maximumNameBytes || sl.ByteSize < 0 || sl.VerificationStatus == "" || len(sl.VerificationStatus) > 32 ||
				!sha256Hex.MatchString(strings.TrimPrefix(sl.SHA256, "sha256:")) || (sl.VerificationPolicyDigest != "" && !digestPattern.MatchString(sl.VerificationPolicyDigest)) {
				return nil, fmt.Errorf("context.attachments: every slot has a slotId, sha256, byteSize, contentType and verificationStatus.")
			}
			s.attachments = append(s.attachments, Attachment{Slot: sl.SlotID, MediaType: sl.ContentType, Bytes: sl.ByteSize,
				SHA256: sl.SHA256, Verification: sl.VerificationStatus, PolicyDigest: sl.VerificationPolicyDigest})
		}
	}
	return &s, nil
}

// policyRef is the binding of a policy: its id, version and the digest of
// both.
func (d *Desk) policyRef(id string, p Policy) PolicyRef {
	sum := sha256.Sum256([]byte("registrum.reviewdesk.policy/v1\n" + id + "\n" + p.Version))
	return PolicyRef{ID: id, Version: p.Version, Digest: "sha256:" + hex.EncodeToString(sum[:])}
}

// traceparent answers with the caller's trace id (a new one when it sent
// none) and a span of the desk's own.
func traceparent(in string) string {
	trace := ""
	if m := traceparentValue.FindStringSubmatch(in); m != nil && m[1] != strings.Repeat("0", 32) {
		trace = m[1]
	}
	if trace == "" {
		trace = randomHex(16)
	}
	return "00-" + trace + "-" + randomHex(8) + "-01"
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func newID(prefix string) string { return prefix + randomHex(16) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// problem answers an RFC 9457 problem document.
func problem(w http.ResponseWriter, status int, detail string) {
	b, _ := json.Marshal(map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	w.Write(b)
}
