package keys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// privateMembers are the JWK members that carry private or symmetric key
// material (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037 §2).
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "k", "oth"}

// decodeObject decodes one JSON object strictly: exactly one value, an object,
// with no duplicate member at any depth. It returns the top-level members.
func decodeObject(raw []byte) (map[string]json.RawMessage, error) {
	if err := checkNoDuplicates(raw); err != nil {
		return nil, err
	}
	var members map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&members); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if members == nil {
		return nil, errors.New("not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON object")
	}
	return members, nil
}

// checkNoDuplicates walks raw JSON and refuses any object that names a member
// twice, which encoding/json would otherwise resolve silently (last one wins).
func checkNoDuplicates(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var walk func() error
	walk = func() error {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("invalid JSON: %w", err)
		}
		delim, ok := tok.(json.Delim)
		if !ok {
			return nil
		}
		switch delim {
		case '{':
			seen := map[string]bool{}
			for dec.More() {
				keyTok, err := dec.Token()
				if err != nil {
					return fmt.Errorf("invalid JSON: %w", err)
				}
				key, _ := keyTok.(string)
				if seen[key] {
					return fmt.Errorf("duplicate member %q", key)
				}
				seen[key] = true
				if err := walk(); err != nil {
					return err
				}
			}
		case '[':
			for dec.More() {
				if err := walk(); err != nil {
					return err
				}
			}
		}
		if _, err := dec.Token(); err != nil { // closing delimiter
			return fmt.Errorf("invalid JSON: %w", err)
		}
		return nil
	}
	return walk()
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
