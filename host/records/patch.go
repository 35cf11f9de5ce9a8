package records

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/registrum/registrum/host/access"
	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/internal/strictjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/values"
	"github.com/registrum/registrum/store"
)

// MaxPatchOperations bounds the operations of one JSON Patch.
const MaxPatchOperations = 256

// patchOps is a checked JSON Patch, ready to apply to {"data": {...}}.
type patchOps struct {
	raw []byte
}

var patchMembers = map[string]map[string]bool{
	"add":     {"op": true, "path": true, "value": true},
	"replace": {"op": true, "path": true, "value": true},
	"test":    {"op": true, "path": true, "value": true},
	"remove":  {"op": true, "path": true},
	"move":    {"op": true, "path": true, "from": true},
	"copy":    {"op": true, "path": true, "from": true},
}

// parsePatch checks a JSON Patch body: every operation well formed, every
// path under /data/ naming a field the grant may write (a test or a from
// may name a readable one), no envelope member.
func parsePatch(e *model.Entity, grant *access.Grant, body []byte) (*patchOps, error) {
	doc, err := strictjson.Decode(body)
	if err != nil {
		return nil, BodyFault(err)
	}
	ops, ok := doc.([]any)
	if !ok {
		return nil, problem.At(problem.RequestInvalid, "", "a JSON Patch body is an array of operations")
	}
	if len(ops) == 0 {
		return nil, problem.At(problem.RequestInvalid, "", "the patch has no operations")
	}
	if len(ops) > MaxPatchOperations {
		return nil, problem.At(problem.RequestInvalid, "", "the patch has more than %d operations", MaxPatchOperations)
	}
	for i, raw := range ops {
		at := "/" + strconv.Itoa(i)
		op, ok := raw.(map[string]any)
		if !ok {
			return nil, problem.At(problem.RequestInvalid, at, "each patch operation is an object")
		}
		name, _ := op["op"].(string)
		allowed, ok := patchMembers[name]
		if !ok {
			return nil, problem.At(problem.RequestInvalid, at+"/op", "op must be add, remove, replace, move, copy or test")
		}
		for _, m := range sortedKeys(op) {
			if !allowed[m] {
				return nil, problem.At(problem.RequestInvalid, at+"/"+m, "unknown member %q in a %s operation", m, name)
			}
		}
		for m := range allowed {
			if _, has := op[m]; !has {
				return nil, problem.At(problem.RequestInvalid, at+"/"+m, "a %s operation needs %s", name, m)
			}
		}
		path, ok := op["path"].(string)
		if !ok {
			return nil, problem.At(problem.RequestInvalid, at+"/path", "path must be a string")
		}
		if err := checkPatchPath(e, grant, path, at+"/path", name != "test"); err != nil {
			return nil, err
		}
		if name == "move" || name == "copy" {
			from, ok := op["from"].(string)
			if !ok {
				return nil, problem.At(problem.RequestInvalid, at+"/from", "from must be a string")
			}
			if err := checkPatchPath(e, grant, from, at+"/from", name == "move"); err != nil {
				return nil, err
			}
		}
	}
	return &patchOps{raw: body}, nil
}

// checkPatchPath checks one JSON Pointer of a patch.
func checkPatchPath(e *model.Entity, grant *access.Grant, path, at string, write bool) error {
	rest, ok := strings.CutPrefix(path, "/data/")
	if !ok {
		return problem.At(problem.RequestInvalid, at, "patch paths start with /data/ followed by a field's apiName")
	}
	seg, deeper, _ := strings.Cut(rest, "/")
	name := strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
	f := e.FieldByAPIName(name)
	if f == nil || !grant.Readable.Has(f.ID) && !grant.Writable.Has(f.ID) {
		return problem.At(problem.RequestInvalid, strictjson.Pointer("data", name), "%q is not a field of %s: envelope members and unknown names cannot be patched", name, e.ID)
	}
	if write && !grant.Writable.Has(f.ID) {
		return problem.At(problem.RequestInvalid, strictjson.Pointer("data", name), "%s is not writable", name)
	}
	if !write && !grant.Readable.Has(f.ID) {
		return problem.At(problem.RequestInvalid, strictjson.Pointer("data", name), "%s is not readable", name)
	}
	if deeper != "" && f.Type != model.TypeStructured && f.Type != model.TypeCRS84Point {
		return problem.At(problem.RequestInvalid, strictjson.Pointer("data", name), "%s has no members to patch", name)
	}
	return nil
}

// applyPatch applies ops to the current values and checks the result.
func (s *Service) applyPatch(e *model.Entity, cur *store.Record, ops *patchOps) (map[string]any, error) {
	data := map[string]any{}
	for _, f := range e.Fields {
		data[f.APIName] = values.Encode(f, cur.Values[f.ID])
	}
	doc, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.DecodePatch(ops.raw)
	if err != nil {
		return nil, problem.At(problem.RequestInvalid, "", "the patch is not a valid JSON Patch")
	}
	out, err := patch.Apply(doc)
	if err != nil {
		if errors.Is(err, jsonpatch.ErrTestFailed) {
			return nil, problem.New(problem.PreconditionFailed, "a test operation of the patch does not hold")
		}
		return nil, problem.At(problem.RequestInvalid, "", "the patch does not apply to the record: %s", patchReason(err))
	}
	parsed, err := strictjson.Decode(out)
	if err != nil {
		return nil, err
	}
	next, ok := parsed.(map[string]any)["data"].(map[string]any)
	if !ok {
		return nil, problem.At(problem.RequestInvalid, "/data", "the patch must leave data an object")
	}
	stored := map[string]any{}
	for _, f := range e.Fields {
		v, err := s.decodeValue(f, next[f.APIName])
		if err != nil {
			return nil, err
		}
		if v != nil {
			stored[f.ID] = v
		}
	}
	if err := checkInterval(e, stored); err != nil {
		return nil, err
	}
	return stored, nil
}

// patchReason names the class of an apply failure without echoing values.
func patchReason(err error) string {
	switch {
	case errors.Is(err, jsonpatch.ErrMissing):
		return "a path does not exist"
	case errors.Is(err, jsonpatch.ErrInvalidIndex):
		return "an array index is out of range"
	default:
		return "an operation cannot be applied"
	}
}
