package keys_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/registrum/registrum/issuer/keys"
)

// FuzzParsePublicSet checks that any accepted client key is a public key of
// an accepted kind with no private member, and that nothing panics.
func FuzzParsePublicSet(f *testing.F) {
	f.Add([]byte(rfc7638Key))
	f.Add([]byte(`{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}`))
	f.Add([]byte(`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`))
	f.Add([]byte(`{"kty":"EC","crv":"P-256","d":"x"}`))
	f.Add([]byte(`{"kty":"oct","k":"AAAA"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		set, err := keys.ParsePublicSet([]json.RawMessage{raw})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "keys: client keys: keys[0]: ") {
				t.Fatalf("error does not name the entry: %v", err)
			}
			return
		}
		k := set[0]
		if !k.IsPublic() {
			t.Fatal("accepted a key that is not public")
		}
		if _, err := keys.AlgorithmFor(&k); err != nil {
			t.Fatalf("accepted a key of a refused kind: %v", err)
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(raw, &members) == nil {
			for _, m := range []string{"d", "p", "q", "dp", "dq", "qi", "k", "oth"} {
				if _, ok := members[m]; ok {
					t.Fatalf("accepted a key with private member %q", m)
				}
			}
		}
		if _, err := keys.Thumbprint(&k); err != nil {
			t.Fatalf("accepted key has no thumbprint: %v", err)
		}
	})
}
