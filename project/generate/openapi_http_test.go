package generate

import (
	"bytes"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
)

// TestOpenAPIValidatesTraffic checks the generated request and response
// schemas by validating concrete HTTP requests and responses against the
// document with libopenapi-validator.
func TestOpenAPIValidatesTraffic(t *testing.T) {
	doc, err := declaredOpenAPI(testPackage())
	if err != nil {
		t.Fatal(err)
	}
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	const host = "http://registry.example.test"
	const id = "0b6d7c8e-1f2a-4b3c-8d4e-5f6a7b8c9d0e"
	const etag = `"engine-hmac-sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"`
	const person = `{"nationalId":"AB123","active":true,"status":"active"}`
	request := func(method, path, contentType, body string, headers ...string) *http.Request {
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, host+path, r)
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		return req
	}
	batch := func(n int) string {
		items := make([]string, n)
		for i := range items {
			items[i] = `{"operation":"create","data":` + person + `}`
		}
		return `{"items":[` + strings.Join(items, ",") + `]}`
	}
	valid := map[string]*http.Request{
		"create":         request("POST", "/v1/records/persons", "application/json", `{"data":`+person+`}`),
		"create profile": request("POST", "/v1/records/persons?accessProfile=operator", "application/json", `{"data":`+person+`}`, "Idempotency-Key", "k1"),
		"patch":          request("PATCH", "/v1/records/persons/"+id, "application/json-patch+json", `[{"op":"replace","path":"/data/status","value":"closed"}]`, "If-Match", etag),
		"tombstone":      request("DELETE", "/v1/records/persons/"+id, "", "", "If-Match", etag),
		"batch at bound": request("POST", "/v1/records/persons:batch", "application/json", batch(50)),
		"list":           request("GET", "/v1/records/persons?$count=true", "", ""),
		"as-of":          request("GET", "/v1/records/districts:as-of?asOf=2026-01-01T00:00:00Z", "", ""),
		"apply": request("POST", "/v1/records/applications/"+id+"/actions/apply", "application/json",
			`{"proposalVersion":1,"effectDigest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","reason":""}`,
			"If-Match", etag, "Idempotency-Key", "k2"),
		"invoke": request("POST", "/v1/actions/close-person", "application/json", `{"input":{"person":"`+id+`"},"preconditions":{"close":{"ifMatch":`+`"x"`+`}}}`, "Idempotency-Key", "k3"),
	}
	for name, req := range valid {
		if ok, errs := v.ValidateHttpRequestSync(req); !ok {
			t.Errorf("%s: valid request refused: %v", name, validationMessages(errs))
		}
	}
	invalid := map[string]*http.Request{
		"create missing required": request("POST", "/v1/records/persons", "application/json", `{"data":{"nationalId":"AB123"}}`),
		"create unknown member":   request("POST", "/v1/records/persons", "application/json", `{"data":`+person+`,"meta":{}}`),
		"create bad value":        request("POST", "/v1/records/persons", "application/json", `{"data":{"nationalId":"AB123","active":true,"status":"gone"}}`),
		"patch without If-Match":  request("PATCH", "/v1/records/persons/"+id, "application/json-patch+json", `[{"op":"replace","path":"/data/status","value":"closed"}]`),
		"patch outside data":      request("PATCH", "/v1/records/persons/"+id, "application/json-patch+json", `[{"op":"replace","path":"/meta/x","value":1}]`, "If-Match", etag),
		"batch over bound":        request("POST", "/v1/records/persons:batch", "application/json", batch(51)),
		"batch empty":             request("POST", "/v1/records/persons:batch", "application/json", batch(0)),
		"apply without key":       request("POST", "/v1/records/applications/"+id+"/actions/apply", "application/json", `{"proposalVersion":1,"effectDigest":"sha256:00"}`, "If-Match", etag),
		"apply reason null": request("POST", "/v1/records/applications/"+id+"/actions/apply", "application/json",
			`{"proposalVersion":1,"effectDigest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","reason":null}`, "If-Match", etag, "Idempotency-Key", "k2"),
		"unknown profile":    request("GET", "/v1/records/persons?accessProfile=nobody", "", ""),
		"unknown route":      request("GET", "/v1/records/nothing", "", ""),
		"tombstone disabled": request("DELETE", "/v1/records/districts/"+id, "", "", "If-Match", etag),
		"patch create-only":  request("PATCH", "/v1/records/districts/"+id, "application/json-patch+json", `[]`, "If-Match", etag),
		"long key":           request("POST", "/v1/records/persons", "application/json", `{"data":`+person+`}`, "Idempotency-Key", strings.Repeat("k", 257)),
	}
	for name, req := range invalid {
		if ok, _ := v.ValidateHttpRequestSync(req); ok {
			t.Errorf("%s: invalid request accepted", name)
		}
	}

	response := func(status int, contentType, body string) *http.Response {
		return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {contentType}},
			Body: io.NopCloser(bytes.NewReader([]byte(body)))}
	}
	envelope := `{"data":{"recordIdentifier":"` + id + `","revisionIdentifier":"1","domainData":` + person + `},` +
		`"meta":{"registryIdentifier":"test-registry","datasetIdentifier":"people","entityTypeIdentifier":"person"}}`
	problem := `{"type":"https://registry.example.test/problems/resource/not_found","title":"Not found","status":404,"detail":"No such record.",` +
		`"code":"resource.not_found","traceId":"0123456789abcdef0123456789abcdef","fieldPath":null}`
	read := func() *http.Request { return request("GET", "/v1/records/persons/"+id, "", "") }
	if ok, errs := v.ValidateHttpResponse(read(), response(200, "application/json", envelope)); !ok {
		t.Errorf("envelope refused: %v", validationMessages(errs))
	}
	if ok, errs := v.ValidateHttpResponse(read(), response(404, "application/problem+json", problem)); !ok {
		t.Errorf("problem document refused: %v", validationMessages(errs))
	}
	badProblem := strings.Replace(problem, `"traceId":"0123456789abcdef0123456789abcdef",`, "", 1)
	if ok, _ := v.ValidateHttpResponse(read(), response(404, "application/problem+json", badProblem)); ok {
		t.Error("problem document without traceId accepted")
	}
	wrongCode := strings.Replace(problem, `"code":"resource.not_found"`, `"code":"precondition.failed"`, 1)
	if ok, _ := v.ValidateHttpResponse(read(), response(404, "application/problem+json", wrongCode)); ok {
		t.Error("404 problem with a 412 code accepted")
	}
	badEnvelope := strings.Replace(envelope, `"revisionIdentifier":"1"`, `"revisionIdentifier":"0"`, 1)
	if ok, _ := v.ValidateHttpResponse(read(), response(200, "application/json", badEnvelope)); ok {
		t.Error("envelope with revision 0 accepted")
	}
}

func validationMessages(errs []*liberrors.ValidationError) []string {
	var out []string
	for _, e := range errs {
		s := e.Error()
		for _, se := range e.SchemaValidationErrors {
			s += "; " + se.FieldPath + ": " + se.Reason
		}
		out = append(out, s)
	}
	return out
}
