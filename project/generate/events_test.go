package generate

import (
	"regexp"
	"strings"
	"testing"

	"github.com/registrum/registrum/internal/canonjson"
	"github.com/registrum/registrum/model"
)

const (
	testRevision = `"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"`
	testRecordID = `"0b6d7c8e-1f2a-4b3c-8d4e-5f6a7b8c9d0e"`
)

func eventSchemaOf(t *testing.T, p *model.Package, entityID, eventID string) []byte {
	t.Helper()
	e := p.EntityByID(entityID)
	b, err := EventSchema(p, e, e.Hook(eventID))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEventSchemasArePackagedByEntityAndEvent(t *testing.T) {
	got, err := EventSchemas(testPackage())
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"generated/event-schemas/person.person-status-changed.schema.json",
		"generated/event-schemas/application.application-submitted.schema.json",
	} {
		if _, ok := got[path]; !ok {
			t.Errorf("%s missing from %v", path, sortedKeys(got))
		}
	}
	if len(got) != 2 {
		t.Errorf("got %d event schemas, want one per hook (2)", len(got))
	}
}

func TestEventSchemaDescribesData(t *testing.T) {
	s := compileSchema(t, eventSchemaOf(t, testPackage(), "person", "person-status-changed"))
	data := func(values string) string {
		return `{"entity":"person","packageRevision":` + testRevision + `,"recordId":` + testRecordID +
			`,"revision":3,"trigger":"patched","values":` + values + `}`
	}
	valid := []string{
		data(`{"nationalId":"AB123","status":"closed","income":"10.00"}`),
		data(`{"nationalId":"AB123","status":"closed","income":null}`),
	}
	for _, in := range valid {
		if err := validates(t, s, in); err != nil {
			t.Errorf("valid data refused: %s\n%v", in, err)
		}
	}
	invalid := map[string]string{
		"unprojected field":      data(`{"nationalId":"AB123","status":"closed","income":null,"active":true}`),
		"projected field absent": data(`{"nationalId":"AB123","status":"closed"}`),
		"authored id":            data(`{"national-id":"AB123","status":"closed","income":null}`),
		"value outside type":     data(`{"nationalId":"AB123","status":"gone","income":null}`),
		"other trigger":          strings.Replace(data(`{"nationalId":"AB123","status":"closed","income":null}`), `"patched"`, `"created"`, 1),
		"other entity":           strings.Replace(data(`{"nationalId":"AB123","status":"closed","income":null}`), `"person"`, `"district"`, 1),
		"revision zero":          strings.Replace(data(`{"nationalId":"AB123","status":"closed","income":null}`), `:3,`, `:0,`, 1),
		"bad package revision":   strings.Replace(data(`{"nationalId":"AB123","status":"closed","income":null}`), testRevision, `"abc"`, 1),
		"missing values": `{"entity":"person","packageRevision":` + testRevision + `,"recordId":` + testRecordID +
			`,"revision":3,"trigger":"patched"}`,
		"extra member":          strings.TrimSuffix(data(`{"nationalId":"AB123","status":"closed","income":null}`), "}") + `,"request":{}}`,
		"header member in data": strings.TrimSuffix(data(`{"nationalId":"AB123","status":"closed","income":null}`), "}") + `,"id":"x"}`,
	}
	for name, in := range invalid {
		if err := validates(t, s, in); err == nil {
			t.Errorf("%s: invalid data accepted: %s", name, in)
		}
	}
}

func TestLifecycleEventSchemaRequiresRequest(t *testing.T) {
	s := compileSchema(t, eventSchemaOf(t, testPackage(), "application", "application-submitted"))
	const head = `{"entity":"application","packageRevision":` + testRevision + `,"recordId":` + testRecordID +
		`,"revision":2,"trigger":"request_lifecycle","values":{"newStatus":"closed"}`
	request := func(members string) string { return head + `,"request":{` + members + `}}` }
	const full = `"proposalVersion":1,"workflowRevision":2,"transition":"submit","fromState":"draft","toState":"submitted","deduplicationKey":"k1"`
	valid := []string{
		request(full + `,"stage":null,"effectDigest":null`),
		request(full + `,"stage":"intake","effectDigest":` + testRevision),
	}
	for _, in := range valid {
		if err := validates(t, s, in); err != nil {
			t.Errorf("valid lifecycle data refused: %s\n%v", in, err)
		}
	}
	invalid := map[string]string{
		"no request":           head + `}`,
		"no stage":             request(full + `,"effectDigest":null`),
		"no deduplication key": request(strings.Replace(full, `,"deduplicationKey":"k1"`, "", 1) + `,"stage":null,"effectDigest":null`),
		"proposal version 0":   request(strings.Replace(full, `"proposalVersion":1`, `"proposalVersion":0`, 1) + `,"stage":null,"effectDigest":null`),
		"bad effect digest":    request(full + `,"stage":null,"effectDigest":"x"`),
		"extra request member": request(full + `,"stage":null,"effectDigest":null,"review":{}`),
	}
	for name, in := range invalid {
		if err := validates(t, s, in); err == nil {
			t.Errorf("%s: invalid lifecycle data accepted: %s", name, in)
		}
	}
}

func TestEventSchemaURN(t *testing.T) {
	p := testPackage()
	urn, err := EventSchemaURN(p, "person", "person-status-changed")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^urn:engine:event-schema:test-registry:person:person-status-changed:sha256:[0-9a-f]{64}$`).MatchString(urn) {
		t.Fatalf("URN %q has the wrong shape", urn)
	}
	// The digest is over the canonical (RFC 8785) bytes of the packaged schema.
	file := eventSchemaOf(t, p, "person", "person-status-changed")
	canon, err := canonjson.Transform(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := canonjson.DigestBytes(canon); !strings.HasSuffix(urn, ":"+want) {
		t.Fatalf("URN %s does not end with the digest of the canonical schema %s", urn, want)
	}
	again, err := EventSchemaURN(testPackage(), "person", "person-status-changed")
	if err != nil || again != urn {
		t.Fatalf("URN is not stable: %s vs %s (%v)", again, urn, err)
	}

	changed := testPackage()
	changed.EntityByID("person").Hook("person-status-changed").Projection = []string{"national-id", "status"}
	other, err := EventSchemaURN(changed, "person", "person-status-changed")
	if err != nil {
		t.Fatal(err)
	}
	if other == urn {
		t.Fatal("changing the projection did not change the URN")
	}
	retyped := testPackage()
	retyped.EntityByID("person").Field("national-id").MaxLength = ptr(13)
	if u, _ := EventSchemaURN(retyped, "person", "person-status-changed"); u == urn {
		t.Fatal("changing a projected field's bound did not change the URN")
	}

	if _, err := EventSchemaURN(p, "nobody", "x"); err == nil || !strings.Contains(err.Error(), `"nobody"`) {
		t.Errorf("unknown entity: err = %v", err)
	}
	if _, err := EventSchemaURN(p, "person", "nothing"); err == nil || !strings.Contains(err.Error(), `"nothing"`) {
		t.Errorf("unknown event: err = %v", err)
	}
}

func TestEventSchemaRefusesUnknownProjection(t *testing.T) {
	p := testPackage()
	e := p.EntityByID("person")
	h := e.Hook("person-status-changed")
	h.Projection = []string{"nationalId"} // an apiName, not the authored id
	_, err := EventSchema(p, e, h)
	if err == nil || !strings.Contains(err.Error(), `"nationalId"`) || !strings.Contains(err.Error(), "person.person-status-changed") {
		t.Fatalf("err = %v, want one naming the event and the unknown field", err)
	}
}
