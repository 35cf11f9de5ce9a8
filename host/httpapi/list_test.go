package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
)

type page struct {
	Items []struct {
		RecordIdentifier   string         `json:"recordIdentifier"`
		RevisionIdentifier string         `json:"revisionIdentifier"`
		DomainData         map[string]any `json:"domainData"`
	} `json:"items"`
	PageInfo struct {
		NextCursor *string `json:"nextCursor"`
	} `json:"pageInfo"`
	Meta  map[string]any `json:"meta"`
	Count *int           `json:"count"`
}

func (e *env) list(t *testing.T, q url.Values) (int, page, []byte) {
	t.Helper()
	resp, b := e.do(t, "GET", "/v1/records/children?"+q.Encode(), "", "")
	var p page
	json.Unmarshal(b, &p)
	return resp.StatusCode, p, b
}

func TestListFiltersSortsCountsAndPagesWithCursors(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 7; i++ {
		e.create(t, fmt.Sprintf(`{"data":{"nationalId":"L-%d","age":%d,"active":%v}}`, i, i%3, i%2 == 0))
	}
	gone, tag := e.create(t, `{"data":{"nationalId":"GONE","age":1}}`)
	if resp, b := e.do(t, "DELETE", "/v1/records/children/"+gone, "", "", "If-Match", tag); resp.StatusCode != 200 {
		t.Fatalf("tombstone: %d %s", resp.StatusCode, b)
	}

	status, p, b := e.list(t, url.Values{"$filter": {"age ge 1 and active eq true"}, "$orderby": {"age desc,nationalId"}, "$count": {"true"}, "$select": {"nationalId,age"}})
	if status != 200 {
		t.Fatalf("list: %d %s", status, b)
	}
	var got []string
	for _, it := range p.Items {
		got = append(got, fmt.Sprint(it.DomainData["nationalId"], ":", it.DomainData["age"]))
		if _, has := it.DomainData["active"]; has {
			t.Errorf("$select did not narrow domainData: %v", it.DomainData)
		}
	}
	// ages: L-0 0, L-1 1, L-2 2, L-3 0, L-4 1, L-5 2, L-6 0; active: even i.
	want := []string{"L-2:2", "L-4:1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("items %v, want %v (%s)", got, want, b)
	}
	if p.Count == nil || *p.Count != 2 || p.PageInfo.NextCursor != nil {
		t.Fatalf("count %v next %v", p.Count, p.PageInfo.NextCursor)
	}
	if p.Meta["entityTypeIdentifier"] != "child" {
		t.Errorf("meta = %v", p.Meta)
	}

	// Page through everything, three at a time: every live record once, the tombstoned one never.
	seen := map[string]bool{}
	q := url.Values{"$top": {"3"}, "$orderby": {"nationalId"}}
	pages := 0
	for {
		status, p, b := e.list(t, q)
		if status != 200 {
			t.Fatalf("page %d: %d %s", pages, status, b)
		}
		pages++
		for _, it := range p.Items {
			id := fmt.Sprint(it.DomainData["nationalId"])
			if seen[id] {
				t.Fatalf("%s seen twice", id)
			}
			seen[id] = true
		}
		if p.PageInfo.NextCursor == nil {
			break
		}
		q = url.Values{"$skiptoken": {*p.PageInfo.NextCursor}}
	}
	if len(seen) != 7 || seen["GONE"] || pages != 3 {
		t.Fatalf("paged %d records in %d pages: %v", len(seen), pages, seen)
	}
}

func TestListRefusesQueriesOutsideTheGrantAndBadCursors(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 3; i++ {
		e.create(t, fmt.Sprintf(`{"data":{"nationalId":"Q-%d"}}`, i))
	}
	for _, q := range []url.Values{
		{"$filter": {"colour eq 'red'"}},
		{"$filter": {"age eq 'old'"}},
		{"$filter": {"age eq"}},
		{"$orderby": {"nope"}},
		{"$select": {"nope"}},
		{"$top": {"0"}},
		{"$unknown": {"1"}},
	} {
		resp, b := e.do(t, "GET", "/v1/records/children?"+q.Encode(), "", "")
		problemOf(t, resp, b, 400, "query.invalid")
	}
	_, p, _ := e.list(t, url.Values{"$top": {"1"}})
	if p.PageInfo.NextCursor == nil {
		t.Fatal("no cursor on a first page of one")
	}
	cur := *p.PageInfo.NextCursor
	resp, b := e.do(t, "GET", "/v1/records/children?"+url.Values{"$skiptoken": {cur}, "$filter": {"age eq 1"}}.Encode(), "", "")
	problemOf(t, resp, b, 400, "query.invalid")
	tampered := []byte(cur)
	tampered[len(tampered)/2] ^= 1
	if tampered[len(tampered)/2] == '+' || tampered[len(tampered)/2] == '/' {
		tampered[len(tampered)/2] = 'A'
	}
	resp, b = e.do(t, "GET", "/v1/records/children?"+url.Values{"$skiptoken": {string(tampered)}}.Encode(), "", "")
	problemOf(t, resp, b, 400, "query.cursor_invalid")
}
