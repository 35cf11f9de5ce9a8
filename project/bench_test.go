package project

import (
	"os"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// BenchmarkCompileExample compiles the child support example and, in the
// same iteration, runs the baseline: decoding the same document with the
// YAML library into plain values, which any reader of the project pays. The
// reported ratio is the cost of everything the compiler adds (locations,
// format validation, every rule, generated artifacts, layout fingerprint,
// digests) relative to merely reading the file.
func BenchmarkCompileExample(b *testing.B) {
	const dir = "../examples/childsupport"
	raw, err := os.ReadFile(dir + "/registry.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var base, comp time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		var v any
		if err := yaml.Unmarshal(raw, &v); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := Compile(dir, opts(true)); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		base += t1.Sub(t0)
		comp += t2.Sub(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(base.Nanoseconds())/n, "baseline-ns/op")
	b.ReportMetric(float64(comp.Nanoseconds())/n, "compile-ns/op")
	b.ReportMetric(float64(comp)/float64(base), "compile/baseline")
}
