package auth

import "strings"

// BearerToken reads an Authorization header value. presented is true
// whenever a credential was sent (the header is not blank); token is the
// credential of the Bearer scheme (the scheme name compared without case, as
// RFC 7235 requires), or "" when the header uses another scheme or carries
// no token. A presented credential without a token is a rejected
// credential (401), not a missing one (the concealed 404).
func BearerToken(header string) (token string, presented bool) {
	h := strings.TrimSpace(header)
	if h == "" {
		return "", false
	}
	scheme, rest, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(rest), true
}
