package plugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/registrum/registrum/plugins/contract"
)

// The members of a hook handler's input, the captured event body, as
// docs/schemas/plugin-hook-input.schema.json describes it.
var (
	hookBodyMembers    = []string{"causation", "data", "dataschema", "id", "source", "subject", "time", "type"}
	hookDataMembers    = []string{"entity", "packageRevision", "recordId", "revision", "trigger", "values"}
	hookRequestMembers = []string{"proposalVersion", "workflowRevision", "transition", "fromState", "toState", "deduplicationKey", "stage", "effectDigest"}

	hookDigest     = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	hookDataSchema = regexp.MustCompile(`^urn:engine:event-schema:[^:]+:[^:]+:[^:]+:sha256:[0-9a-f]{64}$`)
	hookSource     = regexp.MustCompile(`^urn:engine:registry:[^:]+:instance:[^:]+$`)
	hookReference  = regexp.MustCompile(`^hmac-sha256:[0-9a-f]{64}$`)
	hookUUID       = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

// CheckHookInput checks that input is a captured event body as the host
// hands it to a hook handler (docs/schemas/plugin-hook-input.schema.json):
// exactly its eight members, each of its type and form. The error names
// the first member at fault, as a path such as "data.revision".
func CheckHookInput(input []byte) error {
	v, err := contract.ParseValue(input)
	if err != nil {
		return fmt.Errorf("input: %w", err)
	}
	body, ok := v.(map[string]any)
	if !ok {
		return errors.New("input: not a JSON object")
	}
	h := hookCheck{}
	h.members("", body, hookBodyMembers, true)
	causation := h.object("causation", body)
	h.members("causation", causation, []string{"hop", "root"}, false)
	if hop, ok := h.integer("causation.hop", causation); ok && hop.Sign() < 0 {
		h.fail("causation.hop", "must not be negative")
	}
	h.matches("causation.root", causation, hookUUID, "a UUID")
	data := h.object("data", body)
	h.members("data", data, hookDataMembers, false)
	for _, m := range []string{"data.entity", "data.recordId", "data.trigger"} {
		h.str(m, data)
	}
	h.matches("data.packageRevision", data, hookDigest, "sha256:<64 lowercase hex>")
	h.integer("data.revision", data)
	h.object("data.values", data)
	if req := h.object("data.request", data); req != nil {
		h.members("data.request", req, hookRequestMembers, false)
		for _, m := range []string{"data.request.proposalVersion", "data.request.workflowRevision"} {
			if n, ok := h.integer(m, req); ok && n.Cmp(big.NewRat(1, 1)) < 0 {
				h.fail(m, "must be at least 1")
			}
		}
		for _, m := range []string{"data.request.transition", "data.request.fromState", "data.request.toState", "data.request.deduplicationKey"} {
			h.str(m, req)
		}
		for _, m := range []string{"stage", "effectDigest"} {
			if req[m] != nil {
				h.str("data.request."+m, req)
			}
		}
	}
	h.matches("dataschema", body, hookDataSchema, "urn:engine:event-schema:<registry>:<entity>:<event>:sha256:<64 hex>")
	h.matches("id", body, hookUUID, "a UUID")
	h.matches("source", body, hookSource, "urn:engine:registry:<registry>:instance:<instance>")
	subject := h.object("subject", body)
	h.members("subject", subject, []string{"recordReference", "recordRevision"}, false)
	h.matches("subject.recordReference", subject, hookReference, "hmac-sha256:<64 lowercase hex>")
	h.integer("subject.recordRevision", subject)
	h.str("time", body)
	h.str("type", body)
	return h.err
}

// hookCheck keeps the first fault of a hook input.
type hookCheck struct{ err error }

func (h *hookCheck) fail(path, format string, args ...any) {
	if h.err == nil {
		h.err = fmt.Errorf("input.%s: %s (the captured event body, docs/schemas/plugin-hook-input.schema.json)", path, fmt.Sprintf(format, args...))
	}
}

// members checks that obj has every required member and, when closed, no
// other.
func (h *hookCheck) members(path string, obj map[string]any, required []string, closed bool) {
	if obj == nil {
		return
	}
	at := func(m string) string { return strings.TrimPrefix(path+"."+m, ".") }
	for _, m := range required {
		if _, ok := obj[m]; !ok {
			h.fail(at(m), "is required")
		}
	}
	if !closed {
		return
	}
	extra := []string{}
	for m := range obj {
		if !slices.Contains(required, m) {
			extra = append(extra, m)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		h.fail(at(extra[0]), "is not a member of the captured event body")
	}
}

// hookMember returns the member of obj the path ends with, and whether it
// is present (an absent member is refused by members, when required).
func hookMember(path string, obj map[string]any) (any, bool) {
	v, ok := obj[path[strings.LastIndexByte(path, '.')+1:]]
	return v, ok
}

// object returns the member at path as an object: nil when absent, or with
// a fault when it is another value.
func (h *hookCheck) object(path string, obj map[string]any) map[string]any {
	v, present := hookMember(path, obj)
	if !present {
		return nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		h.fail(path, "must be an object")
	}
	return o
}

func (h *hookCheck) str(path string, obj map[string]any) (string, bool) {
	v, present := hookMember(path, obj)
	if !present {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		h.fail(path, "must be a string")
	}
	return s, ok
}

// integer returns the member at path as an integral number (1.0 is one, as
// JSON Schema has it).
func (h *hookCheck) integer(path string, obj map[string]any) (*big.Rat, bool) {
	v, present := hookMember(path, obj)
	if !present {
		return nil, false
	}
	if n, ok := v.(json.Number); ok {
		if r, ok := new(big.Rat).SetString(string(n)); ok && r.IsInt() {
			return r, true
		}
	}
	h.fail(path, "must be an integer")
	return nil, false
}

func (h *hookCheck) matches(path string, obj map[string]any, re *regexp.Regexp, form string) {
	if s, ok := h.str(path, obj); ok && !re.MatchString(s) {
		h.fail(path, "must be of the form %s", form)
	}
}
