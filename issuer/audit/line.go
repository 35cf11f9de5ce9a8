package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/registrum/registrum/internal/canonjson"
)

// lineVersion is the "v" member of every line this package writes.
const lineVersion = 1

// MaxLineBytes bounds one chain line, newline included. Lines the writer
// produces are far shorter; the verifier refuses longer ones.
const MaxLineBytes = 64 << 10

// macDomain prefixes the MAC input so chain MACs cannot be confused with any
// other use of the derived key.
const macDomain = "registrum/issuer-audit/line/v1\x00"

// genesis is the "prev" of the first record of a chain.
var genesis = [32]byte{}

// envelope is one chain line. Its RFC 8785 member order is line, mac, prev,
// record, segment, time, v.
type envelope struct {
	Version int    `json:"v"`
	Segment uint32 `json:"segment"`
	Line    uint64 `json:"line"`
	Time    int64  `json:"time"`
	Prev    string `json:"prev"`
	Record  record `json:"record"`
	MAC     string `json:"mac,omitempty"`
}

// canonicalRecord returns the RFC 8785 form of rec.
func canonicalRecord(rec record) ([]byte, error) {
	b, err := canonjson.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("audit: encode record: %w", err)
	}
	return b, nil
}

// encodeLine builds the newline-terminated line for the canonical record
// rec at (segment, line) after prev, and returns it with its MAC.
//
// The envelope around the record holds only integers and hex strings, whose
// RFC 8785 forms are their plain decimal and quoted spellings, so it is
// assembled directly in canonical member order around the record that
// internal/canonjson produced (TestLineIsCanonical holds the two equal).
// The MAC covers the line without its "mac" member.
func encodeLine(chainKey []byte, segment uint32, line uint64, timeMillis int64, prev [32]byte, rec []byte) ([]byte, [32]byte) {
	lineMember := `{"line":` + strconv.FormatUint(line, 10) + `,`
	var rest []byte
	rest = append(rest, `"prev":"`...)
	rest = hex.AppendEncode(rest, prev[:])
	rest = append(rest, `","record":`...)
	rest = append(rest, rec...)
	rest = append(rest, `,"segment":`...)
	rest = strconv.AppendUint(rest, uint64(segment), 10)
	rest = append(rest, `,"time":`...)
	rest = strconv.AppendInt(rest, timeMillis, 10)
	rest = append(rest, `,"v":`...)
	rest = strconv.AppendInt(rest, lineVersion, 10)
	rest = append(rest, '}')

	mac := lineMAC(chainKey, []byte(lineMember), rest)
	out := make([]byte, 0, len(lineMember)+len(`"mac":"",`)+64+len(rest)+1)
	out = append(out, lineMember...)
	out = append(out, `"mac":"`...)
	out = hex.AppendEncode(out, mac[:])
	out = append(out, `",`...)
	out = append(out, rest...)
	return append(out, '\n'), mac
}

func lineMAC(chainKey, head, rest []byte) [32]byte {
	m := hmac.New(sha256.New, chainKey)
	m.Write([]byte(macDomain))
	m.Write(head)
	m.Write(rest)
	var out [32]byte
	m.Sum(out[:0])
	return out
}

// parsedLine is a line whose MAC verified.
type parsedLine struct {
	segment uint32
	line    uint64
	prev    [32]byte
	mac     [32]byte
}

// Reasons a line fails; they never quote line content.
var (
	errNotLine = errors.New("not a chain line (it must start with the line number and MAC)")
	errBadMAC  = errors.New("MAC does not verify (tampered record or wrong hash key)")
	errContent = errors.New("authenticated line does not decode as a chain line of this version")
)

// parseLine verifies one line (without its newline): it splits off the
// leading `{"line":N,"mac":"<hex>",`, checks the MAC over the rest, and only
// then decodes the authenticated bytes.
func parseLine(chainKey, b []byte) (parsedLine, error) {
	const linePrefix, macPrefix = `{"line":`, `"mac":"`
	rest, ok := bytes.CutPrefix(b, []byte(linePrefix))
	if !ok {
		return parsedLine{}, errNotLine
	}
	comma := bytes.IndexByte(rest, ',')
	if comma < 1 || comma > 20 {
		return parsedLine{}, errNotLine
	}
	head := b[:len(linePrefix)+comma+1]
	rest, ok = bytes.CutPrefix(rest[comma+1:], []byte(macPrefix))
	if !ok || len(rest) < 66 || rest[64] != '"' || rest[65] != ',' || !isLowerHex(string(rest[:64]), 64) {
		return parsedLine{}, errNotLine
	}
	var p parsedLine
	_, _ = hex.Decode(p.mac[:], rest[:64])
	want := lineMAC(chainKey, head, rest[66:])
	if !hmac.Equal(want[:], p.mac[:]) {
		return parsedLine{}, errBadMAC
	}
	var env envelope
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return parsedLine{}, errContent
	}
	if _, err := dec.Token(); err != io.EOF {
		return parsedLine{}, errContent
	}
	if env.Version != lineVersion || !isLowerHex(env.Prev, 64) {
		return parsedLine{}, errContent
	}
	_, _ = hex.Decode(p.prev[:], []byte(env.Prev))
	p.segment, p.line = env.Segment, env.Line
	return p, nil
}
