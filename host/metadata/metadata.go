// Package metadata serves what a package publishes about itself: the
// OpenAPI document, the entity JSON Schemas and the form schemas, read once
// from the package folder (whose digests model.Load has checked).
package metadata

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/model"
)

// Documents holds the published documents of one package.
type Documents struct {
	openapi  []byte
	entities map[string][]byte // by entity id
	forms    map[string][]byte // by route path
}

// Load reads the published documents of p from its package folder dir.
func Load(p *model.Package, dir string) (*Documents, error) {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		dir = filepath.Dir(dir)
	}
	d := &Documents{entities: map[string][]byte{}, forms: map[string][]byte{}}
	read := func(rel string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return nil, fmt.Errorf("metadata: %w", err)
		}
		return b, nil
	}
	listed := map[string]bool{}
	for _, f := range p.Files {
		listed[f.Path] = true
	}
	need := func(rel string) ([]byte, error) {
		if !listed[rel] {
			return nil, fmt.Errorf("metadata: the package does not list %s: recompile it with this release", rel)
		}
		return read(rel)
	}
	var err error
	if d.openapi, err = need(model.OpenAPIPath); err != nil {
		return nil, err
	}
	for _, e := range p.Entities {
		if d.entities[e.ID], err = need(model.EntitySchemaPath(e.ID)); err != nil {
			return nil, err
		}
	}
	for _, f := range p.Forms {
		if d.forms[model.FormRoutePath(p, f.ID)], err = need(model.FormSchemaPath(f.ID)); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// OpenAPI returns the OpenAPI document of the package.
func (d *Documents) OpenAPI() []byte { return d.openapi }

// EntitySchema returns the JSON Schema of an entity, or the concealed not-found.
func (d *Documents) EntitySchema(entityID string) ([]byte, error) {
	if b, ok := d.entities[entityID]; ok {
		return b, nil
	}
	return nil, problem.NotFound()
}

// Forms returns the form schemas by the path they are published at: the
// path of {metadata_base}, then /forms/<form-id>/schema.json.
func (d *Documents) Forms() map[string][]byte { return d.forms }
