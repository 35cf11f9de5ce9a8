package verifier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// VerifyFile runs v on the bytes of a file, as the record service would on
// an uploaded attachment: the size and sha256 are computed from the file
// and the bytes are then streamed to v. It is what operators and authors use
// to try a verifier. A file that cannot be read is an error; every other
// failure is v's Retry.
func VerifyFile(ctx context.Context, v Verifier, slotID, mediaType, path string) (Verdict, error) {
	f, err := os.Open(path)
	if err != nil {
		return Verdict{}, fmt.Errorf("verifier: content file: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return Verdict{}, fmt.Errorf("verifier: content file %s: %w", path, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Verdict{}, fmt.Errorf("verifier: content file %s: %w", path, err)
	}
	att := Attachment{SlotID: slotID, MediaType: mediaType, DeclaredSize: n, SHA256: hex.EncodeToString(h.Sum(nil))}
	if err := att.Validate(MaxContentBytes); err != nil {
		return Verdict{}, fmt.Errorf("verifier: content file %s: %w", path, err)
	}
	return v.Verify(ctx, att, f)
}
