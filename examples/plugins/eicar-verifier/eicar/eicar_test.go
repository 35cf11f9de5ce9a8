package eicar

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"
	"testing/iotest"

	"github.com/registrum/registrum/sdk/verifier"
)

func attachmentOf(b []byte) verifier.Attachment {
	sum := sha256.Sum256(b)
	return verifier.Attachment{SlotID: "evidence", MediaType: "application/octet-stream", DeclaredSize: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
}

func TestScannerFindsSignatureAnywhere(t *testing.T) {
	sig := Signature()
	if len(sig) != 68 || sha256.Sum256(sig) != [32]byte{0x27, 0x5a, 0x02, 0x1b, 0xbf, 0xb6, 0x48, 0x9e, 0x54, 0xd4, 0x71, 0x89, 0x9f, 0x7d, 0xb9, 0xd1, 0x66, 0x3f, 0xc6, 0x95, 0xec, 0x2f, 0xe2, 0xa2, 0xc4, 0x53, 0x8a, 0xab, 0xf6, 0x51, 0xfd, 0x0f} {
		t.Fatalf("Signature() is not the EICAR test string")
	}
	filler := bytes.Repeat([]byte("registrum "), 20000) // 200 kB, several blocks
	cases := map[string]struct {
		content []byte
		want    verifier.Outcome
	}{
		"clean":              {filler, verifier.Approved},
		"signature alone":    {sig, verifier.Rejected},
		"at the start":       {append(append([]byte{}, sig...), filler...), verifier.Rejected},
		"at the end":         {append(append([]byte{}, filler...), sig...), verifier.Rejected},
		"across a block":     {append(append(append([]byte{}, filler[:64<<10-30]...), sig...), filler...), verifier.Rejected},
		"truncated by 1":     {append(append([]byte{}, filler...), sig[:67]...), verifier.Approved},
		"one byte different": {append(append([]byte{}, sig[:10]...), append([]byte{'#'}, sig[11:]...)...), verifier.Approved},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// One byte per read makes every position a block boundary.
			for _, r := range []io.Reader{bytes.NewReader(tc.content), iotest.OneByteReader(bytes.NewReader(tc.content))} {
				v, err := Scanner{sig: sig}.Verify(context.Background(), attachmentOf(tc.content), r)
				if err != nil {
					t.Fatal(err)
				}
				if v.Outcome != tc.want {
					t.Fatalf("outcome %q, want %q", v.Outcome, tc.want)
				}
				if tc.want == verifier.Rejected && v.Reason != verifier.ReasonMalware {
					t.Fatalf("reason %q, want malware", v.Reason)
				}
			}
		})
	}
}

func TestScannerReportsReadErrors(t *testing.T) {
	r := iotest.ErrReader(io.ErrClosedPipe)
	if _, err := (Scanner{sig: Signature()}).Verify(context.Background(), attachmentOf([]byte("x")), r); err == nil {
		t.Fatal("a failing reader gave no error")
	}
}
