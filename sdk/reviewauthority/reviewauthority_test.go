package reviewauthority_test

import (
	"strings"
	"testing"

	"github.com/registrum/registrum/sdk/reviewauthority"
)

func TestSubmissionDigestIsOfTheCanonicalForm(t *testing.T) {
	a, err := reviewauthority.SubmissionDigest([]byte(`{"kind":"k","subject":{"version":1,"id":"x"},"n":1.50}`))
	if err != nil {
		t.Fatal(err)
	}
	// jsonb's form: other member order, spaces, another spelling of a number.
	b, err := reviewauthority.SubmissionDigest([]byte(`{"n": 1.5, "kind": "k", "subject": {"id": "x", "version": 1}}`))
	if err != nil || a != b || !strings.HasPrefix(a, "sha256:") || len(a) != len("sha256:")+64 {
		t.Fatalf("digests %s and %s (%v)", a, b, err)
	}
	if c, _ := reviewauthority.SubmissionDigest([]byte(`{"kind":"other"}`)); c == a {
		t.Fatal("another submission has the same digest")
	}
	for _, bad := range []string{`{"a":1,"a":2}`, `{`, `{"a":1}{}`} {
		if _, err := reviewauthority.SubmissionDigest([]byte(bad)); err == nil {
			t.Errorf("%s: digest of a document that is not one JSON object", bad)
		}
	}
}
