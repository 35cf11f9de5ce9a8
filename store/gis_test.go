package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/registrum/registrum/model/query"
	"github.com/registrum/registrum/store"
	"github.com/registrum/registrum/store/layout"
	"github.com/registrum/registrum/store/querysql"
)

// TestBBoxReadsUseTheSpatialIndexAndMatchEveryPointInTheBox fills an
// entity served on the spatial adapter with 20,000 points (and some records
// without one), then checks, for ordinary and antimeridian-crossing boxes,
// that a page read returns exactly the live points inside the box (edges
// included) in record id order, and that PostgreSQL answers the read
// through the GiST index on the point expression (EXPLAIN), without PostGIS.
func TestBBoxReadsUseTheSpatialIndexAndMatchEveryPointInTheBox(t *testing.T) {
	ctx := context.Background()
	s, pool := openStore(t)
	child := s.Package().EntityByID("child")
	where := layout.Column(child.Field("where"))
	nid := layout.Column(child.Field("national-id"))
	// Random points on a 0.001-degree grid (so some lie exactly on box
	// edges), a few hundred without a point, and a few tombstoned.
	_, err := pool.Exec(ctx, `INSERT INTO `+layout.Table(child)+` (record_id, revision, lifecycle, created_at, updated_at, package_revision, `+nid+`, `+where+`)
		SELECT gen_random_uuid(), 1, CASE WHEN i % 97 = 0 THEN 'tombstoned' ELSE 'active' END, now(), now(), 'x', 'N-' || i,
		       CASE WHEN i % 50 = 0 THEN NULL ELSE jsonb_build_object('type', 'Point', 'coordinates',
		            jsonb_build_array(round((random() * 360 - 180)::numeric, 3), round((random() * 180 - 90)::numeric, 3))) END
		FROM generate_series(1, 20000) AS i`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE `+layout.Table(child)); err != nil {
		t.Fatal(err)
	}
	type point struct {
		id       string
		lon, lat float64
	}
	var all []point
	rows, err := pool.Query(ctx, `SELECT record_id::text, (`+where+`->'coordinates'->>0)::float8, (`+where+`->'coordinates'->>1)::float8
		FROM `+layout.Table(child)+` WHERE lifecycle = 'active' AND `+where+` IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p point
		if err := rows.Scan(&p.id, &p.lon, &p.lat); err != nil {
			t.Fatal(err)
		}
		all = append(all, p)
	}
	rows.Close()
	allowed := query.Allowed{Readable: []string{"national-id", "where"}, MaxTop: 10000}
	scope, err := store.Scope(child, nil)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	boxes := []string{"-10,-10,10,10", "170,-20,-170,20", "179.5,-90,-179.5,90", "0,0,0,0", "-180,-90,180,90"}
	// Boxes whose edges lie on the grid of the points.
	for range 5 {
		w := float64(rng.IntN(340000)-170000) / 1000
		s := float64(rng.IntN(160000)-80000) / 1000
		boxes = append(boxes, fmt.Sprintf("%g,%g,%g,%g", w, s, w+5, s+5))
	}
	for _, bb := range boxes {
		q, err := query.Build(child, allowed, query.Canonical{Top: 10000, BBox: bb})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, p := range all {
			in := p.lat >= q.BBox.South && p.lat <= q.BBox.North
			if q.BBox.CrossesAntimeridian() {
				in = in && (p.lon >= q.BBox.West || p.lon <= q.BBox.East)
			} else {
				in = in && p.lon >= q.BBox.West && p.lon <= q.BBox.East
			}
			if in {
				want = append(want, p.id)
			}
		}
		slices.Sort(want)
		var got []string
		for q != nil {
			recs, err := s.Page(ctx, q, scope)
			if err != nil {
				t.Fatal(err)
			}
			more := len(recs) > q.Top
			if more {
				recs = recs[:q.Top]
			}
			for _, r := range recs {
				got = append(got, r.ID)
			}
			if !more {
				break
			}
			next := *q
			next.Position = &query.Row{ID: recs[len(recs)-1].ID}
			q = &next
		}
		if !slices.Equal(got, want) {
			t.Errorf("bbox %s: %d records, want %d", bb, len(got), len(want))
		}
		if bb == "-180,-90,180,90" || bb == "179.5,-90,-179.5,90" {
			continue // the whole world, or a strip: a scan may be cheaper
		}
		q, _ = query.Build(child, allowed, query.Canonical{Top: 1000, BBox: bb})
		stmt := querysql.Compiler{}.PageStatement(q, layout.ColRecordID, scope)
		var plan []map[string]any
		var raw []byte
		if err := pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+stmt.SQL, stmt.Args...).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &plan); err != nil {
			t.Fatal(err)
		}
		index := "g_e_child__where"
		if !strings.Contains(string(raw), `"Index Name": "`+index+`"`) {
			t.Errorf("bbox %s is not answered through the spatial index %s:\n%s\nplan: %s", bb, index, stmt.SQL, raw)
		}
	}
}
