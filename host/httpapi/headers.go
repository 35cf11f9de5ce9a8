package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/host/records"
)

// challenge sets the headers a refusal carries beside its problem document:
// the RFC 6750 Bearer challenge of a 401 (error="invalid_token", and
// nothing about the token itself), and Retry-After on a 503.
func challenge(w http.ResponseWriter, pe *problem.Error) {
	switch pe.Code.Status() {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", error_description="The access token was refused."`)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", strconv.Itoa(records.RetryAfterSeconds))
	}
}

// notModified reports whether an If-None-Match header names the current
// ETag (weak comparison, as RFC 9110 asks of If-None-Match) or is "*".
func notModified(ifNoneMatch, etag string) bool {
	if ifNoneMatch == "" || etag == "" {
		return false
	}
	for _, part := range strings.Split(ifNoneMatch, ",") {
		t := strings.TrimSpace(part)
		if t == "*" || strings.TrimPrefix(t, "W/") == strings.TrimPrefix(etag, "W/") {
			return true
		}
	}
	return false
}
