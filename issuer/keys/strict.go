package keys

import (
	"encoding/json"
	"errors"
	"fmt"

	josejson "github.com/go-jose/go-jose/v4/json"
)

// privateMembers are the JWK members that carry private or symmetric key
// material (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037 §2).
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "k", "oth"}

// decodeObject decodes one JSON object strictly: exactly one value, an object,
// with no duplicate member at any depth (go-jose's JSON decoder refuses
// duplicates, which encoding/json would resolve silently). It returns the
// top-level members.
func decodeObject(raw []byte) (map[string]json.RawMessage, error) {
	var whole any
	if err := josejson.Unmarshal(raw, &whole); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, ok := whole.(map[string]any); !ok {
		return nil, errors.New("not a JSON object")
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	return members, nil
}

// privateMemberIn returns the first private-key member present in members, or "".
func privateMemberIn(members map[string]json.RawMessage) string {
	for _, name := range privateMembers {
		if _, ok := members[name]; ok {
			return name
		}
	}
	return ""
}
