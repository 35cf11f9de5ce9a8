package audit

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Report is the result of [Verify]. It holds counts, sequence numbers, the
// chain head MAC and the first defect; never a key, a pseudonym or record
// content.
type Report struct {
	// Segments is the number of segment files read (sealed and active).
	Segments int
	// Records is the number of records that verified.
	Records uint64
	// Sealed lists the sealed segment sequence numbers present, ascending.
	Sealed []uint32
	// Archived is the count of sequence numbers below the first present
	// sealed segment (1..Archived): history the operator moved away.
	Archived uint32
	// Missing lists sequence numbers absent between present segments.
	Missing []uint32
	// ActiveVerified is true when the active segment was verified (no writer
	// held the lock). ActiveNote explains why it was not.
	ActiveVerified bool
	// ActiveNote explains an unverified active segment.
	ActiveNote string
	// Head is the MAC of the last verified record, or empty.
	Head string
	// Broken names the first record that failed, nil if none.
	Broken *Defect
}

// Defect names one broken record.
type Defect struct {
	// Segment is the eight-digit sequence of a sealed segment, or "active".
	Segment string
	// Line is the 1-based line number in that segment.
	Line uint64
	// Reason says what failed, without quoting the line.
	Reason string
}

func (d *Defect) String() string {
	return fmt.Sprintf("segment %s line %d: %s", d.Segment, d.Line, d.Reason)
}

// OK reports whether every segment that was read verified and no sequence
// number is missing. An active segment left unverified because a writer
// holds it does not make the report fail.
func (r *Report) OK() bool { return r.Broken == nil && len(r.Missing) == 0 }

// WriteTo writes the report as "name: value" lines, one fact per line.
func (r *Report) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "segments: %d\n", r.Segments)
	fmt.Fprintf(&b, "records: %d\n", r.Records)
	if len(r.Sealed) == 0 {
		b.WriteString("sealed-sequence: none\n")
	} else {
		fmt.Fprintf(&b, "sealed-sequence: %08d-%08d\n", r.Sealed[0], r.Sealed[len(r.Sealed)-1])
	}
	if r.Archived > 0 {
		fmt.Fprintf(&b, "archived: %08d-%08d (not present; verification starts after them)\n", 1, r.Archived)
	}
	for _, m := range r.Missing {
		fmt.Fprintf(&b, "segment %08d: missing\n", m)
	}
	if r.Head == "" {
		b.WriteString("head: none\n")
	} else {
		fmt.Fprintf(&b, "head: %s\n", r.Head)
	}
	if r.ActiveVerified {
		b.WriteString("active-segment: verified\n")
	} else {
		fmt.Fprintf(&b, "active-segment: not verified: %s\n", r.ActiveNote)
	}
	if r.Broken != nil {
		fmt.Fprintf(&b, "broken: %s\n", r.Broken)
	}
	if r.OK() {
		b.WriteString("result: ok\n")
	} else {
		b.WriteString("result: failed\n")
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// Verify checks a chain without writing to it: every sealed segment oldest
// first, missing sequence numbers, and the active segment when no writer
// holds the lock (it takes the lock only for the time of the check, and
// never creates the lock file). Chain defects are reported in the Report;
// the error is for a bad Config or a chain that cannot be read.
func Verify(cfg Config) (*Report, error) {
	k, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	path := filepath.Clean(cfg.Path)
	rep := &Report{}
	seqs, err := listSealed(path)
	if err != nil {
		return nil, err
	}
	rep.Sealed = seqs
	b := boundary{}
	next := uint32(1)
	if len(seqs) > 0 {
		rep.Archived = seqs[0] - 1
		next = seqs[0]
	}
	for _, seq := range seqs {
		for ; next < seq; next++ {
			rep.Missing = append(rep.Missing, next)
			b = boundary{} // the link across a gap cannot be checked
		}
		b.segment = seq
		res, err := scanFile(k.chain, sealedName(path, seq), b)
		if err != nil {
			return nil, err
		}
		rep.add(res, fmt.Sprintf("%08d", seq))
		if rep.Broken == nil && res.records == 0 {
			rep.Broken = &Defect{Segment: fmt.Sprintf("%08d", seq), Line: 1, Reason: "sealed segment is empty"}
		}
		if rep.Broken != nil {
			rep.ActiveNote = "verification stopped at the broken record"
			return rep, nil
		}
		b = boundary{head: res.head, known: true}
		next = seq + 1
	}

	unlock, note, err := lockForVerify(path)
	if err != nil {
		return nil, err
	}
	if note != "" {
		rep.ActiveNote = note
		return rep, nil
	}
	defer unlock()
	if len(seqs) > 0 {
		b.segment = next
		// Records of the active segment claiming a later sequence mean the
		// sealed segments in between are missing; report them as such and
		// verify the active segment on its own.
		if p, perr := firstRecord(k.chain, path); perr == nil && p.segment > next && p.line == 1 {
			for s := next; s < p.segment; s++ {
				rep.Missing = append(rep.Missing, s)
			}
			b = boundary{segment: p.segment}
		}
	}
	res, err := scanFile(k.chain, path, b)
	if errors.Is(err, fs.ErrNotExist) {
		rep.ActiveVerified = true
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	if len(seqs) == 0 && res.records > 0 && res.segment > 1 {
		rep.Archived = res.segment - 1
	}
	rep.add(res, "active")
	rep.ActiveVerified = true
	return rep, nil
}

// add folds a segment scan into the report.
func (r *Report) add(res scanResult, segment string) {
	r.Segments++
	r.Records += res.records
	if res.records > 0 {
		r.Head = hex.EncodeToString(res.head[:])
	}
	if res.reason != nil && r.Broken == nil {
		r.Broken = &Defect{Segment: segment, Line: res.badLine, Reason: res.reason.Error()}
	}
}

// scanFile scans the segment file name.
func scanFile(chainKey []byte, name string, b boundary) (scanResult, error) {
	f, err := os.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return scanResult{}, err
		}
		return scanResult{}, fmt.Errorf("audit: open segment: %w", err)
	}
	defer f.Close()
	res, err := scanSegment(chainKey, f, b)
	if err != nil {
		return res, fmt.Errorf("audit: %s: %w", name, err)
	}
	return res, nil
}

// firstRecord parses the first line of the segment at name.
func firstRecord(chainKey []byte, name string) (parsedLine, error) {
	f, err := os.Open(name)
	if err != nil {
		return parsedLine{}, err
	}
	defer f.Close()
	buf := make([]byte, MaxLineBytes)
	n, _ := io.ReadFull(f, buf)
	line, _, ok := strings.Cut(string(buf[:n]), "\n")
	if !ok {
		return parsedLine{}, errTruncated
	}
	return parseLine(chainKey, []byte(line))
}

// lockForVerify tries the writer lock without creating the lock file. It
// returns a note when a writer holds it, else a function releasing it.
func lockForVerify(path string) (func(), string, error) {
	f, err := os.OpenFile(lockName(path), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return func() {}, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("audit: open lock file: %w", err)
	}
	if err := tryLock(f); err != nil {
		_ = f.Close()
		if errors.Is(err, ErrLocked) {
			return nil, "a running writer holds the lock, so only sealed history was verified", nil
		}
		return nil, "", err
	}
	return func() { _ = f.Close() }, "", nil
}
