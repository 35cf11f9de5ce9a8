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

// envelope is one chain line. Members serialise in RFC 8785 order.
type envelope struct {
	Version int    `json:"v"`
	Segment uint32 `json:"segment"`
	Line    uint64 `json:"line"`
	Time    int64  `json:"time"`
	Prev    string `json:"prev"`
	Record  record `json:"record"`
	MAC     string `json:"mac,omitempty"`
}

// encodeLine builds the canonical line (newline-terminated) for rec at
// (segment, line) after prev, and returns it with its MAC.
func encodeLine(chainKey []byte, segment uint32, line uint64, timeMillis int64, prev [32]byte, rec record) ([]byte, [32]byte, error) {
	env := envelope{Version: lineVersion, Segment: segment, Line: line, Time: timeMillis, Prev: hex.EncodeToString(prev[:]), Record: rec}
	body, err := canonjson.Marshal(env)
	if err != nil {
		return nil, [32]byte{}, fmt.Errorf("audit: encode record: %w", err)
	}
	mac := lineMAC(chainKey, body)
	env.MAC = hex.EncodeToString(mac[:])
	out, err := canonjson.Marshal(env)
	if err != nil {
		return nil, [32]byte{}, fmt.Errorf("audit: encode record: %w", err)
	}
	return append(out, '\n'), mac, nil
}

func lineMAC(chainKey, body []byte) [32]byte {
	m := hmac.New(sha256.New, chainKey)
	m.Write([]byte(macDomain))
	m.Write(body)
	var out [32]byte
	m.Sum(out[:0])
	return out
}

// parsedLine is a line that decoded, is canonical and whose MAC verified.
type parsedLine struct {
	segment uint32
	line    uint64
	prev    [32]byte
	mac     [32]byte
}

// Reasons a line fails; they never quote line content.
var (
	errNotJSON      = errors.New("not a JSON object of the chain line format")
	errNotCanonical = errors.New("not in canonical form")
	errVersion      = errors.New("unknown line version")
	errBadMAC       = errors.New("MAC does not verify (tampered record or wrong hash key)")
)

// parseLine decodes one line (without its newline), requires it to be the
// exact canonical encoding of a chain line, and verifies its MAC.
func parseLine(chainKey, b []byte) (parsedLine, error) {
	var env envelope
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return parsedLine{}, errNotJSON
	}
	if _, err := dec.Token(); err != io.EOF {
		return parsedLine{}, errNotJSON
	}
	if env.Version != lineVersion {
		return parsedLine{}, errVersion
	}
	var p parsedLine
	if !isLowerHex(env.MAC, 64) || !isLowerHex(env.Prev, 64) {
		return parsedLine{}, errNotJSON
	}
	_, _ = hex.Decode(p.mac[:], []byte(env.MAC))
	_, _ = hex.Decode(p.prev[:], []byte(env.Prev))
	again, err := canonjson.Marshal(env)
	if err != nil || !bytes.Equal(again, b) {
		return parsedLine{}, errNotCanonical
	}
	env.MAC = ""
	body, err := canonjson.Marshal(env)
	if err != nil {
		return parsedLine{}, errNotCanonical
	}
	want := lineMAC(chainKey, body)
	if !hmac.Equal(want[:], p.mac[:]) {
		return parsedLine{}, errBadMAC
	}
	p.segment, p.line = env.Segment, env.Line
	return p, nil
}
