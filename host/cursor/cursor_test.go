package cursor_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/registrum/registrum/host/cursor"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store/querysql"
)

var testSecret = bytes.Repeat([]byte{7}, 32)

func newSealer(t testing.TB) *cursor.Sealer {
	t.Helper()
	s, err := cursor.NewSealer(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var staff = cursor.Caller{Principal: "client-1", Profile: "staff", PackageRevision: "sha256:aaaa"}

func TestNewSealerNeedsA32ByteSecret(t *testing.T) {
	if _, err := cursor.NewSealer(make([]byte, 31)); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Fatalf("31 bytes: %v", err)
	}
	if _, err := cursor.NewSealer(make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
}

// sealOne seals a cursor after a fixed row for a query with every kind of
// sort key.
func sealOne(t *testing.T, s *cursor.Sealer, e *model.Entity, now time.Time) (string, *query.Query) {
	t.Helper()
	q, err := query.Parse(e, fullAllowed(), opts("$filter", "age ne 2 and startswith(name,'A')", "$orderby", "age desc,seen,amount,born desc,flag,name,ext desc",
		"$select", "name,age", "$count", "true", "$top", "7"))
	if err != nil {
		t.Fatal(err)
	}
	last := query.Row{ID: uuidA, Values: map[string]any{"age": int64(-4), "seen": ts("2024-01-01T10:00:00Z").Add(123456 * time.Microsecond),
		"amount": "-1.25", "born": nil, "flag": true, "name": "Ann", "ext": uuidB}}
	tok, err := s.Seal(q, staff, last, now)
	if err != nil {
		t.Fatal(err)
	}
	return tok, q
}

func TestCursorRoundTrip(t *testing.T) {
	s := newSealer(t)
	e := personEntity()
	now := time.Unix(1_800_000_000, 0)
	tok, q := sealOne(t, s, e, now)
	got, err := s.Parse(e, fullAllowed(), opts("$skiptoken", tok, "accessProfile", "staff"), staff, now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got.Filter() != q.Filter() || sql.OrderBy(got) != sql.OrderBy(q) || got.Top != 7 || !got.Count || len(got.Select) != 2 || got.Digest() != q.Digest() {
		t.Fatalf("reopened query differs: %+v", got)
	}
	want := map[string]any{"age": int64(-4), "seen": ts("2024-01-01T10:00:00Z").Add(123456 * time.Microsecond),
		"amount": "-1.25", "born": nil, "flag": true, "name": "Ann", "ext": uuidB}
	if got.Position == nil || got.Position.ID != uuidA {
		t.Fatalf("position %+v", got.Position)
	}
	for k, v := range want {
		if g := got.Position.Values[k]; fmt.Sprint(g) != fmt.Sprint(v) || fmt.Sprintf("%T", g) != fmt.Sprintf("%T", v) {
			t.Errorf("position %s: %#v, want %#v", k, g, v)
		}
	}
	// The cursor is opaque: neither the query nor the caller shows through
	// its bytes. (Its base64 text is random letters: a three-letter word
	// turns up in it by chance about once in a thousand cursors, so the
	// text is searched only for the longer words.)
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	for _, leak := range []string{"age", "startswith", "client-1", "staff", "Ann"} {
		if bytes.Contains(raw, []byte(leak)) || len(leak) >= 8 && strings.Contains(tok, leak) {
			t.Errorf("cursor shows %q", leak)
		}
	}
	// Two cursors of the same position differ (fresh nonce).
	tok2, _ := sealOne(t, s, e, now)
	if tok2 == tok {
		t.Fatal("two cursors are identical")
	}
}

func TestCursorRefusals(t *testing.T) {
	s := newSealer(t)
	e := personEntity()
	now := time.Unix(1_800_000_000, 0)
	tok, _ := sealOne(t, s, e, now)
	open := func(tok string, e *model.Entity, a query.Allowed, c cursor.Caller, at time.Time) error {
		_, err := s.Open(tok, e, a, c, at)
		return err
	}
	later := now.Add(time.Minute)
	if err := open(tok, e, fullAllowed(), staff, later); err != nil {
		t.Fatalf("control: %v", err)
	}

	// Every single flipped bit of the sealed bytes is detected.
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	for i := range raw {
		bad := bytes.Clone(raw)
		bad[i] ^= 0x01
		err := open(base64.RawURLEncoding.EncodeToString(bad), e, fullAllowed(), staff, later)
		wantProblem(t, err, query.CursorInvalid, "not a valid cursor")
	}
	// Truncated, extended, re-encoded and foreign tokens.
	for _, bad := range []string{tok[:len(tok)-1], tok + "A", tok[:20], "", "!!!!", strings.ReplaceAll(tok, "-", "+"),
		base64.StdEncoding.EncodeToString(raw), strings.Repeat("A", cursor.MaxCursorBytes+1)} {
		wantProblem(t, open(bad, e, fullAllowed(), staff, later), query.CursorInvalid)
	}
	// Another host secret.
	other, _ := cursor.NewSealer(bytes.Repeat([]byte{8}, 32))
	_, err := other.Open(tok, e, fullAllowed(), staff, later)
	wantProblem(t, err, query.CursorInvalid, "not a valid cursor")

	// Binding: caller, profile, package revision, entity and route.
	bound := "issued to another caller, access profile, route or package revision"
	for name, c := range map[string]cursor.Caller{
		"other caller":           {Principal: "client-2", Profile: "staff", PackageRevision: staff.PackageRevision},
		"anonymous":              {Principal: "", Profile: "staff", PackageRevision: staff.PackageRevision},
		"other profile":          {Principal: "client-1", Profile: "public", PackageRevision: staff.PackageRevision},
		"other package revision": {Principal: "client-1", Profile: "staff", PackageRevision: "sha256:bbbb"},
	} {
		t.Run(name, func(t *testing.T) {
			wantProblem(t, open(tok, e, fullAllowed(), c, later), query.CursorInvalid, bound)
		})
	}
	moved := personEntity()
	moved.Route = "persons"
	wantProblem(t, open(tok, moved, fullAllowed(), staff, later), query.CursorInvalid, bound)
	renamed := personEntity()
	renamed.ID = "human"
	wantProblem(t, open(tok, renamed, fullAllowed(), staff, later), query.CursorInvalid, bound)

	// A grant that no longer allows the carried query.
	narrowed := fullAllowed()
	narrowed.Filterable = []string{"age"}
	wantProblem(t, open(tok, e, narrowed, staff, later), query.CursorInvalid, "no longer allowed")
	narrowed = fullAllowed()
	narrowed.AllowCount = false
	wantProblem(t, open(tok, e, narrowed, staff, later), query.CursorInvalid, "no longer allowed")

	// A cursor combined with any other option than accessProfile.
	_, err = s.Parse(e, fullAllowed(), opts("$skiptoken", tok, "$filter", "age eq 1"), staff, later)
	wantProblem(t, err, query.Invalid, "$skiptoken", "$filter")
	_, err = s.Parse(e, fullAllowed(), opts("$skiptoken", tok, "$top", "5"), staff, later)
	wantProblem(t, err, query.Invalid, "$skiptoken", "$top")
}

func TestCursorAge(t *testing.T) {
	s := newSealer(t)
	e := personEntity() // MaxAgeSeconds 0: the default
	now := time.Unix(1_800_000_000, 0)
	tok, _ := sealOne(t, s, e, now)
	open := func(e *model.Entity, at time.Time) error {
		_, err := s.Open(tok, e, fullAllowed(), staff, at)
		return err
	}
	if err := open(e, now.Add(cursor.DefaultCursorMaxAge*time.Second-time.Second)); err != nil {
		t.Fatalf("one second before the default age: %v", err)
	}
	wantProblem(t, open(e, now.Add(cursor.DefaultCursorMaxAge*time.Second)), query.CursorInvalid, "expired", "3600 seconds")

	// A tightened maxAgeSeconds applies to cursors already issued.
	short := personEntity()
	short.Cursor.MaxAgeSeconds = 60
	if err := open(short, now.Add(59*time.Second)); err != nil {
		t.Fatalf("59 s: %v", err)
	}
	wantProblem(t, open(short, now.Add(60*time.Second)), query.CursorInvalid, "expired", "60 seconds")

	// An entity's own maxAgeSeconds bounds the cursors it issues.
	tok2, _ := sealOne(t, s, short, now)
	if _, err := s.Open(tok2, short, fullAllowed(), staff, now.Add(59*time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Open(tok2, short, fullAllowed(), staff, now.Add(61*time.Second))
	wantProblem(t, err, query.CursorInvalid, "expired")

	// Issued in the future, beyond the clock skew allowance.
	if err := open(e, now.Add(-cursor.CursorClockSkew)); err != nil {
		t.Fatalf("within the skew: %v", err)
	}
	wantProblem(t, open(e, now.Add(-cursor.CursorClockSkew-time.Second)), query.CursorInvalid, "future")
}

// pagingRows builds rows with few distinct values, nulls in every sort
// field, and many duplicates.
func pagingRows(n int) ([]string, []map[string]any) {
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(vals ...any) any { return vals[r.IntN(len(vals))] }
	ids := make([]string, n)
	rows := make([]map[string]any, n)
	for i := range rows {
		ids[i] = uuid.NewString()
		rows[i] = map[string]any{
			"name":   pick(nil, "a", "b", "B", "ab"),
			"status": pick(nil, "active", "paused", "closed"),
			"age":    pick(nil, int64(1), int64(2), int64(-3)),
			"amount": pick(nil, "1.00", "2.50", "-3.00"),
			"born":   pick(nil, "2020-01-01", "2021-06-30"),
			"seen":   pick(nil, ts("2024-01-01T00:00:00Z"), ts("2024-01-01T00:00:00Z").Add(time.Microsecond), ts("2023-12-31T23:59:59Z")),
			"flag":   pick(nil, true, false),
			"ext":    pick(nil, uuidA, uuidB),
		}
	}
	return ids, rows
}

const pageColumns = `record_id::text, "f_name", "f_status", "f_age", "f_amount"::text, "f_born"::text, "f_seen", "f_flag", "f_ext"::text`

var pageFields = []string{"name", "status", "age", "amount", "born", "seen", "flag", "ext"}

// fetch runs one page statement and returns its rows as keyset positions.
func fetch(t *testing.T, pool *pgxpool.Pool, stmt querysql.Fragment) []query.Row {
	t.Helper()
	rows, err := pool.Query(context.Background(), stmt.SQL, stmt.Args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stmt.SQL)
	}
	defer rows.Close()
	var out []query.Row
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		row := query.Row{ID: vals[0].(string), Values: map[string]any{}}
		for i, f := range pageFields {
			if v, ok := vals[i+1].(time.Time); ok {
				vals[i+1] = v.UTC()
			}
			row.Values[f] = vals[i+1]
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// compareValues orders two non-null storage values of the same field.
func compareValues(a, b any) int {
	switch x := a.(type) {
	case string:
		return strings.Compare(x, b.(string))
	case int64:
		return cmpInt(x, b.(int64))
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case time.Time:
		return x.Compare(b.(time.Time))
	}
	panic(fmt.Sprintf("no order for %T", a))
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// expectedOrder sorts the rows as the spec's keyset order says: ascending
// with nulls last, descending with nulls first, then the record id in the
// direction of the last key.
func expectedOrder(q *query.Query, ids []string, rows []map[string]any, keep func(map[string]any) bool) []string {
	idx := make([]int, 0, len(rows))
	for i := range rows {
		if keep(rows[i]) {
			idx = append(idx, i)
		}
	}
	idDesc := len(q.Sort) > 0 && q.Sort[len(q.Sort)-1].Desc
	slices.SortFunc(idx, func(i, j int) int {
		for _, k := range q.Sort {
			a, b := rows[i][k.Field.ID], rows[j][k.Field.ID]
			var c int
			switch {
			case a == nil && b == nil:
			case a == nil: // null is the greatest: last ascending, first descending
				c = 1
			case b == nil:
				c = -1
			case k.Field.Type == model.TypeDecimal:
				ra, _ := new(big.Rat).SetString(a.(string))
				rb, _ := new(big.Rat).SetString(b.(string))
				c = ra.Cmp(rb)
			default:
				c = compareValues(a, b)
			}
			if k.Desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		c := strings.Compare(ids[i], ids[j])
		if idDesc {
			c = -c
		}
		return c
	})
	out := make([]string, len(idx))
	for n, i := range idx {
		out[n] = ids[i]
	}
	return out
}

// TestKeysetPagingEveryOrder pages through rows with duplicates and nulls
// in every sort field, following sealed cursors, and gets every row exactly
// once in the order of the spec, for mixed directions and with a filter.
func TestKeysetPagingEveryOrder(t *testing.T) {
	e := personEntity()
	pool := openDB(t, e)
	ids, rows := pagingRows(300)
	insertRows(t, pool, e, ids, rows)
	s := newSealer(t)
	now := time.Unix(1_800_000_000, 0)
	orders := []string{"", "age", "age desc", "age,status desc", "status desc,born", "flag desc,amount,seen desc",
		"seen", "seen desc", "name desc,ext", "amount desc,flag,age desc,born desc", "ext desc", "born,name,status,flag,seen,age,amount,ext"}
	filters := map[string]func(map[string]any) bool{
		"":                               func(map[string]any) bool { return true },
		"age ne 2":                       func(r map[string]any) bool { return r["age"] != int64(2) },
		"flag eq true or status eq null": func(r map[string]any) bool { return r["flag"] == true || r["status"] == nil },
	}
	for _, order := range orders {
		for filter, keep := range filters {
			o := opts("$top", "20")
			if order != "" {
				o[query.OptOrderBy] = []string{order}
			}
			if filter != "" {
				o[query.OptFilter] = []string{filter}
			}
			q, err := s.Parse(e, fullAllowed(), o, staff, now)
			if err != nil {
				t.Fatal(err)
			}
			want := expectedOrder(q, ids, rows, keep)
			// The database's own order agrees with the spec's.
			whole := *q
			whole.Top = len(rows)
			var dbOrder []string
			for _, r := range fetch(t, pool, sql.PageStatement(&whole, pageColumns, querysql.Fragment{})) {
				dbOrder = append(dbOrder, r.ID)
			}
			if !slices.Equal(dbOrder, want) {
				t.Fatalf("$orderby=%q $filter=%q: ORDER BY disagrees with the expected order", order, filter)
			}
			var got []string
			pages := 0
			for {
				page := fetch(t, pool, sql.PageStatement(q, pageColumns, querysql.Fragment{}))
				pages++
				if len(page) > q.Top {
					page = page[:q.Top]
					for _, r := range page {
						got = append(got, r.ID)
					}
					tok, err := s.Seal(q, staff, page[len(page)-1], now)
					if err != nil {
						t.Fatal(err)
					}
					if q, err = s.Parse(e, fullAllowed(), opts("$skiptoken", tok, "accessProfile", "staff"), staff, now); err != nil {
						t.Fatal(err)
					}
					continue
				}
				for _, r := range page {
					got = append(got, r.ID)
				}
				break
			}
			if !slices.Equal(got, want) {
				t.Fatalf("$orderby=%q $filter=%q: paging gave %d rows (want %d), first difference at %d", order, filter, len(got), len(want), firstDiff(got, want))
			}
			if wantPages := max(1, (len(want)+19)/20); pages != wantPages {
				t.Fatalf("$orderby=%q $filter=%q: %d pages, want %d", order, filter, pages, wantPages)
			}
		}
	}
}

func firstDiff(a, b []string) int {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

func TestSealRefusesWhatItCannotCarry(t *testing.T) {
	s := newSealer(t)
	e := personEntity()
	now := time.Unix(1_800_000_000, 0)
	q, err := query.Parse(e, fullAllowed(), opts("$orderby", "note,age"))
	if err != nil {
		t.Fatal(err)
	}
	// A sort value that would make the cursor longer than MaxCursorBytes.
	_, err = s.Seal(q, staff, query.Row{ID: uuidA, Values: map[string]any{"note": strings.Repeat("x", cursor.MaxCursorBytes)}}, now)
	if err == nil || !strings.Contains(err.Error(), "more than 16384") {
		t.Fatalf("oversized cursor: %v", err)
	}
	// A long but fitting sort value round-trips.
	long := strings.Repeat("é", 4000)
	tok, err := s.Seal(q, staff, query.Row{ID: uuidA, Values: map[string]any{"note": long, "age": int64(3)}}, now)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Open(tok, e, fullAllowed(), staff, now)
	if err != nil || got.Position.Values["note"] != long || got.Position.Values["age"] != int64(3) {
		t.Fatalf("long sort value: %v", err)
	}
	// A value of the wrong storage form for its field.
	_, err = s.Seal(q, staff, query.Row{ID: uuidA, Values: map[string]any{"age": "3"}}, now)
	if err == nil || !strings.Contains(err.Error(), "sort key age") {
		t.Fatalf("wrong form: %v", err)
	}
	// An unopened cursor cannot be sealed again.
	pending, _ := query.Parse(e, fullAllowed(), opts("$skiptoken", tok))
	if _, err := s.Seal(pending, staff, query.Row{ID: uuidA}, now); err == nil {
		t.Fatal("sealed an unopened cursor")
	}
}
