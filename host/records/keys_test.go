package records_test

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"testing"

	"github.com/registrum/registrum/host/records"
)

// expectedMAC computes the documented construction independently:
// HMAC-SHA-256 under the HKDF-derived key of label, over the domain and the
// length-prefixed parts.
func expectedMAC(t *testing.T, root []byte, label, domain string, parts ...string) string {
	t.Helper()
	key, err := hkdf.Key(sha256.New, root, nil, label, 32)
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(domain))
	for _, p := range parts {
		m.Write(binary.BigEndian.AppendUint64(nil, uint64(len(p))))
		m.Write([]byte(p))
	}
	return hex.EncodeToString(m.Sum(nil))
}

func TestKeysFollowTheDocumentedConstruction(t *testing.T) {
	root := bytes.Repeat([]byte{7}, 32)
	k, err := records.DeriveKeys(root)
	if err != nil {
		t.Fatal(err)
	}
	want := `"engine-hmac-sha256:` + expectedMAC(t, root, "registrum etag v1", "engine-etag-v1", "rev-1", "child", "3f2b8c1e-4d5a-4b6c-8d7e-9f0a1b2c3d4e", "2", "json") + `"`
	// Keyed hashes are cloned per use: many concurrent uses must each give
	// the same answer.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if got := k.ETag("rev-1", "child", "3f2b8c1e-4d5a-4b6c-8d7e-9f0a1b2c3d4e", "2", "json"); got != want {
					t.Errorf("ETag = %s, want %s", got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got, want := k.PrincipalReference("client-a"), "hmac-sha256:"+expectedMAC(t, root, "registrum reference v1", "engine-principal-v1", "client-a"); got != want {
		t.Errorf("PrincipalReference = %s, want %s", got, want)
	}
	if got, want := k.RecordReference("child", "r1"), "hmac-sha256:"+expectedMAC(t, root, "registrum reference v1", "engine-record-v1", "child", "r1"); got != want {
		t.Errorf("RecordReference = %s, want %s", got, want)
	}
	// A part longer than what a pooled hash keeps of its buffers, then
	// short ones again on the same hashes.
	long := string(bytes.Repeat([]byte("p"), 5000))
	for range 3 {
		if got, want := k.PrincipalReference(long), "hmac-sha256:"+expectedMAC(t, root, "registrum reference v1", "engine-principal-v1", long); got != want {
			t.Errorf("PrincipalReference of a long principal = %s, want %s", got, want)
		}
		if got, want := k.PrincipalReference("client-b"), "hmac-sha256:"+expectedMAC(t, root, "registrum reference v1", "engine-principal-v1", "client-b"); got != want {
			t.Errorf("PrincipalReference after a long one = %s, want %s", got, want)
		}
	}
	if k.ETag("rev-1", "child", "r", "2", "json") == k.ETag("rev-1", "child", "r", "2", "jsonld") {
		t.Error("the representation does not change the ETag")
	}
}
