// Package generate derives the published artifacts of a compiled registry
// package from its model: the JSON Schema of every entity, the OpenAPI 3.1
// document exact for the package, the schema of every event's data member
// (and the dataschema URN that names it), and the JSON Schema of every form.
//
// Every function is pure and deterministic: the same model gives the same
// bytes. The compiler writes the artifacts into the package folder, lists them
// with their digests, and the package revision covers them; the record host
// serves them from there. docs/generated-artifacts.md describes each artifact
// and the encoding decisions the specification leaves open.
package generate
