package plugins_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/plugins"
	"github.com/registrum/registrum/plugins/contract"
)

// TestCheckHookInputAgreesWithTheSchema: the hook input check of `plugins
// run` accepts exactly what docs/schemas/plugin-hook-input.schema.json does.
func TestCheckHookInputAgreesWithTheSchema(t *testing.T) {
	s := schema(t, "plugin-hook-input")
	edit := func(old, new string) string {
		if !strings.Contains(capturedBody, old) {
			t.Fatalf("captured body has no %q", old)
		}
		return strings.Replace(capturedBody, old, new, 1)
	}
	request := `"request":{"proposalVersion":1,"workflowRevision":1,"transition":"submit","fromState":"draft","toState":"submitted","deduplicationKey":"k","stage":null,"effectDigest":"d"},`
	for _, doc := range []string{
		capturedBody,
		edit(`"recordId"`, request+`"recordId"`),
		edit(`"revision":3`, `"revision":3.0`),
		`{}`,
		`[]`,
		capturedBody[:len(capturedBody)-1] + `,"attempt":2}`,
		edit(`"time":"2026-11-22T00:00:00.000Z",`, ``),
		edit(`"2026-11-22T00:00:00.000Z"`, `null`),
		edit(`"hop":0`, `"hop":-1`),
		edit(`"hop":0`, `"hop":"0"`),
		edit(`"hop":0,`, ``),
		edit(`"root":"0b9d3a3e-8c1e-4f7a-9f59-7a1f7f0b8a10"`, `"root":"not-a-uuid"`),
		edit(`"revision":3`, `"revision":3.5`),
		edit(`"packageRevision":"sha256:`, `"packageRevision":"sha1:`),
		edit(`"values":{"phone":"1"}`, `"values":[]`),
		edit(`,"values":{"phone":"1"}`, ``),
		edit(`"recordId"`, `"request":null,"recordId"`),
		edit(`"recordId"`, strings.Replace(request, `"proposalVersion":1`, `"proposalVersion":0`, 1)+`"recordId"`),
		edit(`"recordId"`, strings.Replace(request, `"stage":null,`, ``, 1)+`"recordId"`),
		edit(`"recordId"`, strings.Replace(request, `"stage":null`, `"stage":1`, 1)+`"recordId"`),
		edit(`"dataschema":"urn:engine:event-schema:`, `"dataschema":"urn:other:`),
		edit(`"source":"urn:engine:registry:csr:instance:a"`, `"source":"urn:engine:registry:csr"`),
		edit(`"recordReference":"hmac-sha256:`, `"recordReference":"sha256:`),
		edit(`"recordRevision":3`, `"recordRevision":"3"`),
		edit(`"subject":{`, `"subject":{"extra":1,`),
		edit(`"type":"child.phone_changed"`, `"type":7`),
		edit(`"id":"0b9d3a3e-8c1e-4f7a-9f59-7a1f7f0b8a10"`, `"id":"x"`),
	} {
		want := schemaAccepts(t, s, []byte(doc))
		err := plugins.CheckHookInput([]byte(doc))
		if (err == nil) != want {
			t.Errorf("schema accepts %v, check says %v, on %s", want, err, doc)
		}
	}
}

// TestRunModuleChecksWhatTheHostChecks: a run holds the module to its pinned
// digest and its declared writes, and refuses, before loading anything, an
// input that is not its kind's document (for a hook handler, not a
// captured event body) with ErrInput.
func TestRunModuleChecksWhatTheHostChecks(t *testing.T) {
	ctx := context.Background()
	cfg := plugins.Config{CacheDir: cacheDir}
	planner, dir := pinned(t, "p", model.EngineTengo, model.KindPlanner, examplePath("planner/planner.tengo"))
	in := []byte(`{"request":{"child_id":"c-1","phone":"1"}}`)
	if _, err := plugins.RunModule(ctx, cfg, planner, dir, in); err != nil {
		t.Fatalf("pinned planner: %v", err)
	}

	tampered := planner
	tampered.SHA256 = canonjson.DigestBytes([]byte("the reviewed bytes"))
	if _, err := plugins.RunModule(ctx, cfg, tampered, dir, in); err == nil || !strings.Contains(err.Error(), "is not the reviewed module") {
		t.Fatalf("digest mismatch: %v", err)
	}

	narrow := planner
	narrow.Writes = []contract.Write{{Entity: "child", Operation: contract.OperationPatch, Fields: []string{"address"}}}
	if _, err := plugins.RunModule(ctx, cfg, narrow, dir, in); plugins.FailureKindOf(err) != plugins.FailureInvalidOutput {
		t.Fatalf("plan outside the declared writes: %v", err)
	}

	for _, bad := range []string{`not json`, `{"request":[]}`, `{"request":{},"caller":"x"}`} {
		if _, err := plugins.RunModule(ctx, cfg, planner, dir, []byte(bad)); !errors.Is(err, plugins.ErrInput) {
			t.Errorf("planner input %s: %v, want ErrInput", bad, err)
		}
	}

	hook, hdir := pinned(t, "h", model.EngineTengo, model.KindHookHandler, examplePath("hook/hook.tengo"))
	if _, err := plugins.RunModule(ctx, cfg, hook, hdir, []byte(capturedBody)); err != nil {
		t.Fatalf("hook handler on a captured body: %v", err)
	}
	for _, bad := range []string{`{}`, `{"data":{}}`, capturedBody[:len(capturedBody)-1] + `,"attempt":2}`} {
		_, err := plugins.RunModule(ctx, cfg, hook, hdir, []byte(bad))
		if !errors.Is(err, plugins.ErrInput) || !strings.Contains(err.Error(), "captured event body") {
			t.Errorf("hook input %s: %v, want ErrInput naming the captured event body", bad, err)
		}
	}
}
