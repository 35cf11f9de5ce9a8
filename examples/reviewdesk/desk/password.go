package desk

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// PasswordIterations is the PBKDF2-SHA256 work factor of HashPassword.
const PasswordIterations = 600_000

// Bounds of a stored hash and of a typed password.
const (
	minimumIterations = 100_000
	maximumIterations = 10_000_000
	maximumPassword   = 1024
)

type passwordHash struct {
	iterations int
	salt, key  []byte
}

// HashPassword returns the stored form of a reviewer password:
// "pbkdf2-sha256$<iterations>$<salt>$<key>", salt and key base64url.
func HashPassword(password string) (string, error) {
	if password == "" || len(password) > maximumPassword {
		return "", fmt.Errorf("reviewdesk: a password is 1 to %d bytes", maximumPassword)
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key, err := pbkdf2.Key(sha256.New, password, salt, PasswordIterations, 32)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	return fmt.Sprintf("pbkdf2-sha256$%d$%s$%s", PasswordIterations, enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

func parseHash(s string) (*passwordHash, error) {
	parts := strings.Split(s, "$")
	if len(parts) != 4 || parts[0] != "pbkdf2-sha256" {
		return nil, fmt.Errorf("not a pbkdf2-sha256 hash (make one with `reviewdesk hash-password`)")
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n < minimumIterations || n > maximumIterations {
		return nil, fmt.Errorf("iterations must be %d to %d", minimumIterations, maximumIterations)
	}
	salt, err1 := base64.RawURLEncoding.DecodeString(parts[2])
	key, err2 := base64.RawURLEncoding.DecodeString(parts[3])
	if err1 != nil || err2 != nil || len(salt) < 16 || len(key) != 32 {
		return nil, fmt.Errorf("salt or key malformed")
	}
	return &passwordHash{iterations: n, salt: salt, key: key}, nil
}

// matches derives the key of password and compares it in constant time.
func (h *passwordHash) matches(password string) bool {
	if len(password) == 0 || len(password) > maximumPassword {
		return false
	}
	key, err := pbkdf2.Key(sha256.New, password, h.salt, h.iterations, len(h.key))
	return err == nil && subtle.ConstantTimeCompare(key, h.key) == 1
}
