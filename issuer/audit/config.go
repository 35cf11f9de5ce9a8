package audit

import (
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"
)

// MinimumHashKeyBytes is the shortest hash key [Open] and [Verify] accept.
const MinimumHashKeyBytes = 32

// Config locates a chain and holds the key that authenticates it.
type Config struct {
	// Path is the active segment. Sealed segments are Path + "." + an
	// eight-digit sequence number; the lock file is Path + ".lock".
	Path string
	// MaximumFileBytes is the rotation threshold: an append that would make
	// the active segment larger than this seals it first. The configuration
	// loader enforces the deployment bounds; this package only requires a
	// positive value.
	MaximumFileBytes int64
	// HashKey is the raw content of the audit hash key secret, at least
	// [MinimumHashKeyBytes] long. The chain MAC key and the pseudonym key are
	// both derived from it.
	HashKey []byte
	// HashKeyVersion labels pseudonyms so the key generation is identifiable.
	// It must be nonzero.
	HashKeyVersion uint32
	// OnCommit, when set, is called by the commit goroutine after each group
	// commit with the number of entries made durable by its fsync and the
	// time the commit took (write, fsyncs and any rotation). It must return
	// quickly: appends wait while it runs. Metrics use it.
	OnCommit func(entries int, took time.Duration)
}

// Key-derivation labels. Changing either makes every existing chain unverifiable.
const (
	chainKeyInfo     = "registrum/issuer-audit/chain-key/v1"
	pseudonymKeyInfo = "registrum/issuer-audit/pseudonym-key/v1"
)

// keys holds the two sub-keys derived from the hash key.
type keys struct {
	chain     []byte
	pseudonym []byte
	version   uint32
}

// validate checks the configuration and derives the sub-keys.
func (c Config) validate() (keys, error) {
	if c.Path == "" {
		return keys{}, errors.New("audit: config: path is empty")
	}
	if c.MaximumFileBytes <= 0 {
		return keys{}, fmt.Errorf("audit: config: maximumFileBytes must be positive, got %d", c.MaximumFileBytes)
	}
	if len(c.HashKey) < MinimumHashKeyBytes {
		return keys{}, fmt.Errorf("audit: config: hash key is %d bytes, at least %d required", len(c.HashKey), MinimumHashKeyBytes)
	}
	if c.HashKeyVersion == 0 {
		return keys{}, errors.New("audit: config: hashKeyVersion must be nonzero")
	}
	chain, err := hkdf.Key(sha256.New, c.HashKey, nil, chainKeyInfo, 32)
	if err != nil {
		return keys{}, fmt.Errorf("audit: derive chain key: %w", err)
	}
	pseudo, err := hkdf.Key(sha256.New, c.HashKey, nil, pseudonymKeyInfo, 32)
	if err != nil {
		return keys{}, fmt.Errorf("audit: derive pseudonym key: %w", err)
	}
	return keys{chain: chain, pseudonym: pseudo, version: c.HashKeyVersion}, nil
}
