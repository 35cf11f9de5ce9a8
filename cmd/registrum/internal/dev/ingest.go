package dev

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/registrum/registrum/model"
)

// IngestStep is the bulk import part of the walkthrough: a JSONL file of
// the project (ingest/<route>.jsonl) imported with `registrum ingest`
// through a profile the standard demo client satisfies.
type IngestStep struct {
	Entity  *model.Entity
	Profile string
	// File is the source as the user reaches it from where dev started.
	File  string
	Items int
	// Unique names the fields of unique constraints: a second import of
	// the file is refused.
	Unique []string
}

// planIngest picks the first ingest/<route>.jsonl of the project whose
// entity has batch bounds and whose items the standard demo client can
// create through one of its profiles (usable) within its claims.
func planIngest(p *model.Package, projectDir string, usable []string, claims map[string]string) *IngestStep {
	files, _ := filepath.Glob(filepath.Join(projectDir, "ingest", "*.jsonl"))
	slices.Sort(files)
	for _, file := range files {
		e := p.EntityByRoute(strings.TrimSuffix(filepath.Base(file), ".jsonl"))
		if e == nil || e.Batch == nil || e.IsRequestEntity() {
			continue
		}
		for _, pr := range p.Profiles {
			g := pr.Grant(e.ID)
			if pr.Anonymous || !slices.Contains(usable, pr.ID) || g == nil || !allowsAll(g, model.OpBatch, model.OpCreate) {
				continue
			}
			n, ok := itemsWithin(file, e, g, claims)
			if !ok {
				continue
			}
			step := &IngestStep{Entity: e, Profile: pr.ID, File: file, Items: n}
			for _, c := range e.Constraints {
				if c.Kind == model.ConstraintUnique {
					for _, f := range c.Fields {
						step.Unique = append(step.Unique, e.Field(f).APIName)
					}
				}
			}
			return step
		}
	}
	return nil
}

// itemsWithin counts the create items of file when every one of them
// writes only fields g lets the profile write and lies within the row
// boundaries the demo client's claims allow.
func itemsWithin(file string, e *model.Entity, g *model.Grant, claims map[string]string) (int, bool) {
	f, err := os.Open(file)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), int(e.Batch.MaximumBytes))
	n := 0
	for sc.Scan() {
		var item struct {
			Operation string         `json:"operation"`
			Data      map[string]any `json:"data"`
		}
		if json.Unmarshal(sc.Bytes(), &item) != nil || item.Operation != model.OpCreate {
			return 0, false
		}
		for name := range item.Data {
			if fl := e.FieldByAPIName(name); fl == nil || !g.CanWrite(fl.ID) {
				return 0, false
			}
		}
		if !g.RowBoundaries.Unrestricted {
			for _, r := range g.RowBoundaries.Rules {
				fl := e.Field(r.Field)
				if fl == nil {
					return 0, false
				}
				v, claim := fmt.Sprint(item.Data[fl.APIName]), claims[r.Claim]
				if r.Operator == model.BoundaryIn && !slices.Contains(strings.Fields(claim), v) || r.Operator != model.BoundaryIn && claim != v {
					return 0, false
				}
			}
		}
		n++
	}
	return n, sc.Err() == nil && n > 0
}
