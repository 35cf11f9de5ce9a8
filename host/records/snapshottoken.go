package records

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strings"

	"github.com/registrum/registrum/host/problem"
	"github.com/registrum/registrum/store"
)

// Snapshot tokens: what every write returns and :snapshot reads accept
// (docs/history.md, docs/decisions/snapshot-reads.md).

// MaxSnapshotTokenBytes bounds a snapshot token.
const MaxSnapshotTokenBytes = store.MaxSnapshotTokenBytes

// snapshotPrefix starts every snapshot token.
const snapshotPrefix = store.SnapshotTokenPrefix

// SnapshotToken encodes snap of the history tagged tag as a snapshot token
// (store.SnapshotToken, which the store also uses for the tokens of the
// writes it answers and replays).
var SnapshotToken = store.SnapshotToken

// errSnapshotTooLong means a state has too many transactions in progress
// to be named by a token of at most MaxSnapshotTokenBytes.
var errSnapshotTooLong = store.ErrSnapshotTokenTooLong

// ParseSnapshotToken reads a snapshot token strictly: the prefix, base64url
// without padding, the encoding SnapshotToken writes (minimal varints,
// ascending in-progress ids within [xmin, xmax)) and nothing after it. It
// returns the tag and the snapshot.
func ParseSnapshotToken(tok string) ([8]byte, store.Snapshot, error) {
	var tag [8]byte
	bad := func() ([8]byte, store.Snapshot, error) {
		return tag, store.Snapshot{}, problem.New(problem.QueryInvalid, "snapshot must be a snapshot token of this service")
	}
	enc, ok := strings.CutPrefix(tok, snapshotPrefix)
	if len(tok) > MaxSnapshotTokenBytes || !ok {
		return bad()
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil || len(raw) < 8 {
		return bad()
	}
	copy(tag[:], raw)
	rest := raw[8:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return 0, false
		}
		rest = rest[n:]
		return v, true
	}
	var snap store.Snapshot
	xmin, ok1 := next()
	span, ok2 := next()
	count, ok3 := next()
	if !ok1 || !ok2 || !ok3 || span > math.MaxUint64-xmin || count > uint64(len(rest)) {
		return bad()
	}
	snap.Xmin, snap.Xmax = xmin, xmin+span
	prev := xmin
	for i := uint64(0); i < count; i++ {
		d, ok := next()
		if !ok {
			return bad()
		}
		if i > 0 {
			if d == math.MaxUint64 {
				return bad()
			}
			d++
		}
		if d > snap.Xmax-prev {
			return bad()
		}
		prev += d
		snap.Xip = append(snap.Xip, prev)
	}
	if len(rest) != 0 || !snap.Valid() {
		return bad()
	}
	if again, err := SnapshotToken(tag, snap); err != nil || again != tok {
		return bad()
	}
	return tag, snap, nil
}

// SourceUnavailable is the refusal of a read whose history is unavailable
// (503 source.unavailable), err its cause for the log.
func SourceUnavailable(err error) error {
	return &problem.Error{Code: problem.SourceUnavailable, Detail: "The history of this snapshot is unavailable.", Cause: err}
}
