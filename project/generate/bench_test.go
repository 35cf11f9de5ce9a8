package generate

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkAllInterleaved generates every artifact of the test package
// (three entities of every field type, slots, two events, an action, the
// seed 002 form) and, in the same iteration, runs the baseline: encoding the
// same model once as indented JSON, the least any generator must do.
// Interleaving keeps the ratio meaningful on a busy machine.
func BenchmarkAllInterleaved(b *testing.B) {
	p := testPackage()
	p.Forms = append(p.Forms, applicationForm())
	var gen, base time.Duration
	var outBytes, modelBytes int
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		out, err := All(p)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		m, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			b.Fatal(err)
		}
		gen += t1.Sub(t0)
		base += time.Since(t1)
		outBytes, modelBytes = 0, len(m)
		for _, f := range out {
			outBytes += len(f)
		}
	}
	b.ReportMetric(float64(outBytes), "out-bytes")
	b.ReportMetric(float64(modelBytes), "model-bytes")
	b.ReportMetric(float64(gen.Nanoseconds())/float64(b.N), "all-ns/op")
	b.ReportMetric(float64(base.Nanoseconds())/float64(b.N), "baseline-ns/op")
	b.ReportMetric(float64(gen)/float64(base), "all/baseline")
}
