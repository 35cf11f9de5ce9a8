package records

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/registrum/registrum/host/cursor"
)

// Sealed tokens: the revision and snapshot cursors of the history reads are
// sealed under keys derived from the cursor key, which the kernel holds.

// Seal seals v as JSON with AES-256-GCM under a key derived from the cursor
// key with label, authenticating aad: the construction of revision and
// snapshot cursors.
func (s *Service) Seal(label, aad string, v any) (string, error) {
	aead, err := s.labelAEAD(label)
	if err != nil {
		return "", fmt.Errorf("records: seal: %w", err)
	}
	plain, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("records: seal: %w", err)
	}
	out := make([]byte, 1+aead.NonceSize(), 1+aead.NonceSize()+len(plain)+aead.Overhead())
	out[0] = 1
	if _, err := rand.Read(out[1:]); err != nil {
		return "", fmt.Errorf("records: seal: %w", err)
	}
	out = aead.Seal(out, out[1:1+aead.NonceSize()], plain, []byte(aad))
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// OpenSealed opens what Seal sealed under label into v.
func (s *Service) OpenSealed(label, aad, token string, v any) error {
	if len(token) > cursor.MaxCursorBytes {
		return errors.New("records: sealed token too long")
	}
	aead, err := s.labelAEAD(label)
	if err != nil {
		return err
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(raw) < 1+aead.NonceSize()+aead.Overhead() || raw[0] != 1 {
		return errors.New("records: not a sealed token")
	}
	plain, err := aead.Open(nil, raw[1:1+aead.NonceSize()], raw[1+aead.NonceSize():], []byte(aad))
	if err != nil {
		return err
	}
	return json.Unmarshal(plain, v)
}

// labelAEAD is the AES-256-GCM of the key derived from the cursor key with
// label, derived on a label's first use.
func (s *Service) labelAEAD(label string) (cipher.AEAD, error) {
	if a, ok := s.aeads.Load(label); ok {
		return a.(cipher.AEAD), nil
	}
	a, err := deriveAEAD(s.keys.cursor, label)
	if err != nil {
		return nil, err
	}
	shared, _ := s.aeads.LoadOrStore(label, a)
	return shared.(cipher.AEAD), nil
}

// deriveAEAD returns the AES-256-GCM of the key derived from secret with
// label.
func deriveAEAD(secret []byte, label string) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, secret, nil, label, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
