package verifier_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/registrum/registrum/plugins/verifier"
)

// directScan is the baseline: the EICAR verifier's work as a plain Go
// function — check the declared digest, then search for the signature.
func directScan(att verifier.Attachment, content []byte, sig []byte) (verifier.Verdict, error) {
	sum := sha256.Sum256(content)
	if hex.EncodeToString(sum[:]) != att.SHA256 {
		return verifier.Verdict{}, errors.New("digest mismatch")
	}
	if bytes.Contains(content, sig) {
		return verifier.Verdict{Outcome: verifier.Rejected, Reason: verifier.ReasonMalware}, nil
	}
	return verifier.Verdict{Outcome: verifier.Approved}, nil
}

// BenchmarkVerify compares, in one run, the per-call cost of the EICAR
// verifier run out of process (warm process) and of an http scanner on
// loopback doing the same work, against the plain Go function.
func BenchmarkVerify(b *testing.B) {
	sig := eicar()
	srv := httptest.NewServer(&scanner{answer: verdictAnswer})
	defer srv.Close()
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "token"), []byte(testCredential), 0o600); err != nil {
		b.Fatal(err)
	}
	h, err := verifier.NewHTTP(verifier.HTTPConfig{ID: "s", Endpoint: srv.URL, SecretRoot: root, CredentialRef: "secret:file/token"})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	p := newProcess(b, "eicar-verifier")

	for _, size := range []struct {
		name string
		n    int
	}{{"2KiB", 2 << 10}, {"1MiB", 1 << 20}} {
		content := filler(size.n)
		att := attachment("evidence", content)
		run := func(b *testing.B, v verifier.Verifier) {
			ctx := context.Background()
			b.SetBytes(int64(len(content)))
			for b.Loop() {
				got, err := v.Verify(ctx, att, bytes.NewReader(content))
				if err != nil || got.Outcome != verifier.Approved {
					b.Fatalf("%+v, %v", got, err)
				}
			}
		}
		b.Run(size.name+"/direct", func(b *testing.B) {
			b.SetBytes(int64(len(content)))
			for b.Loop() {
				if got, err := directScan(att, content, sig); err != nil || got.Outcome != verifier.Approved {
					b.Fatal(got, err)
				}
			}
		})
		b.Run(size.name+"/go-plugin", func(b *testing.B) { run(b, p) })
		b.Run(size.name+"/http", func(b *testing.B) { run(b, h) })
	}
}

// BenchmarkProcessStart measures a cold call: start the verifier process,
// complete the handshake and verify 2 KiB.
func BenchmarkProcessStart(b *testing.B) {
	path, digest := binary(b, "eicar-verifier")
	content := filler(2 << 10)
	att := attachment("evidence", content)
	for b.Loop() {
		p, err := verifier.NewProcess(verifier.ProcessConfig{ID: "v", Path: path, SHA256: digest})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := p.Verify(ctx, att, bytes.NewReader(content)); err != nil {
			b.Fatal(err)
		}
		cancel()
		b.StopTimer()
		p.Close()
		b.StartTimer()
	}
}

// BenchmarkCheckBinary measures the digest check of the verifier binary that
// precedes every process start.
func BenchmarkCheckBinary(b *testing.B) {
	path, digest := binary(b, "eicar-verifier")
	info, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(info.Size())
	for b.Loop() {
		if err := verifier.CheckBinary(path, digest); err != nil {
			b.Fatal(err)
		}
	}
}
