package auth

import "testing"

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		header, token string
		presented     bool
	}{
		{"", "", false},
		{"   ", "", false},
		{"Bearer abc.def.ghi", "abc.def.ghi", true},
		{"bearer abc.def.ghi", "abc.def.ghi", true},
		{"BEARER   abc.def.ghi  ", "abc.def.ghi", true},
		{"Bearer", "", true},
		{"Bearer    ", "", true},
		{"Basic dXNlcjpwYXNz", "", true},
		{"Bearerabc", "", true},
		{"DPoP abc.def.ghi", "", true},
	} {
		tok, presented := BearerToken(tc.header)
		if tok != tc.token || presented != tc.presented {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", tc.header, tok, presented, tc.token, tc.presented)
		}
	}
}
