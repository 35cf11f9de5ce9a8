package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// boundary is what the first record of a segment must bind to.
type boundary struct {
	// segment is the sequence the segment's records must claim; 0 means
	// "whatever the first record claims".
	segment uint32
	// head is the MAC the first record's prev must equal, when known is true.
	head  [32]byte
	known bool
}

// scanResult is the outcome of reading one segment.
type scanResult struct {
	records uint64   // records that verified
	head    [32]byte // MAC of the last verified record
	segment uint32   // segment number the records claim (0 if none)
	size    int64    // bytes of the verified lines
	// firstPrev is the first record's prev (meaningful when records > 0).
	firstPrev [32]byte
	// badLine is the 1-based line that failed, 0 if none; reason says why.
	badLine uint64
	reason  error
}

var (
	errTruncated   = errors.New("truncated: the last line has no terminating newline")
	errTooLong     = fmt.Errorf("line longer than %d bytes", MaxLineBytes)
	errLineNumber  = errors.New("line number does not match its position (a line was deleted, inserted or moved)")
	errSegmentNum  = errors.New("segment number does not match the segment holding the record")
	errPrev        = errors.New("prev does not match the previous record's MAC (chain broken)")
	errGenesisPrev = errors.New("the first record of the chain does not start from the genesis value")
)

// scanSegment verifies every line read from r against b and returns how far
// the chain verified. It stops at the first bad line. Only I/O errors are
// returned as err; chain defects are reported in the result.
func scanSegment(chainKey []byte, r io.Reader, b boundary) (scanResult, error) {
	res := scanResult{segment: b.segment, head: b.head}
	known := b.known
	br := bufio.NewReaderSize(r, MaxLineBytes)
	for n := uint64(1); ; n++ {
		raw, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			res.badLine, res.reason = n, errTooLong
			return res, nil
		}
		if err == io.EOF {
			if len(raw) > 0 {
				res.badLine, res.reason = n, errTruncated
			}
			return res, nil
		}
		if err != nil {
			return res, fmt.Errorf("audit: read segment: %w", err)
		}
		p, perr := parseLine(chainKey, raw[:len(raw)-1])
		if perr == nil {
			perr = bindRecord(p, n, &res, known)
		}
		if perr != nil {
			res.badLine, res.reason = n, perr
			return res, nil
		}
		if res.records == 0 {
			res.firstPrev = p.prev
		}
		res.records++
		res.head = p.mac
		res.size += int64(len(raw))
		known = true
	}
}

// bindRecord checks that p sits at line n of the segment res describes and
// follows the head (when known).
func bindRecord(p parsedLine, n uint64, res *scanResult, known bool) error {
	if p.line != n {
		return errLineNumber
	}
	if res.segment == 0 {
		res.segment = p.segment
	}
	if p.segment != res.segment {
		return errSegmentNum
	}
	if known {
		if p.prev != res.head {
			return errPrev
		}
		return nil
	}
	if p.segment == 1 && p.line == 1 && p.prev != genesis {
		return errGenesisPrev
	}
	return nil
}

// lastRecord reads the final line of the sealed segment at name and verifies
// it alone: its MAC and its segment number. It is how a writer finds the
// chain head without reading a whole sealed segment.
func lastRecord(chainKey []byte, name string, seq uint32) (parsedLine, error) {
	f, err := os.Open(name)
	if err != nil {
		return parsedLine{}, fmt.Errorf("audit: open sealed segment: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return parsedLine{}, fmt.Errorf("audit: stat sealed segment %s: %w", name, err)
	}
	size := fi.Size()
	if size == 0 {
		return parsedLine{}, fmt.Errorf("audit: sealed segment %s is empty", name)
	}
	window := min(size, int64(MaxLineBytes)+1)
	buf := make([]byte, window)
	if _, err := f.ReadAt(buf, size-window); err != nil {
		return parsedLine{}, fmt.Errorf("audit: read sealed segment %s: %w", name, err)
	}
	if buf[len(buf)-1] != '\n' {
		return parsedLine{}, fmt.Errorf("audit: sealed segment %s: last record: %w", name, errTruncated)
	}
	body := buf[:len(buf)-1]
	i := bytes.LastIndexByte(body, '\n')
	if i < 0 && window < size {
		return parsedLine{}, fmt.Errorf("audit: sealed segment %s: last record: %w", name, errTooLong)
	}
	body = body[i+1:]
	p, err := parseLine(chainKey, body)
	if err != nil {
		return parsedLine{}, fmt.Errorf("audit: sealed segment %s: last record: %w", name, err)
	}
	if p.segment != seq {
		return parsedLine{}, fmt.Errorf("audit: sealed segment %s: last record: %w", name, errSegmentNum)
	}
	return p, nil
}
