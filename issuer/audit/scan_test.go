package audit

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/registrum/registrum/internal/canonjson"
)

var fuzzKey = []byte("0123456789abcdef0123456789abcdef")

// segmentLines builds n valid lines of segment 1 from genesis, deterministically.
func segmentLines(t testing.TB, key []byte, n int) [][]byte {
	t.Helper()
	var out [][]byte
	prev := genesis
	for i := range n {
		e := Entry{OperationID: "op-" + string(rune('a'+i)), Outcome: OutcomeDenied, Category: "invalid_client"}
		rec, err := e.encode(1)
		if err != nil {
			t.Fatal(err)
		}
		line, mac := encodeLine(key, 1, uint64(i+1), 1_700_000_000_000+int64(i), prev, rec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, line)
		prev = mac
	}
	return out
}

func TestScanGenesisRequired(t *testing.T) {
	rec, err := (Entry{OperationID: "op", Outcome: OutcomeDenied, Category: "x"}).encode(1)
	must(t, err)
	notGenesis := [32]byte{1}
	line, _ := encodeLine(fuzzKey, 1, 1, 1, notGenesis, rec)
	must(t, err)
	res, err := scanSegment(fuzzKey, bytes.NewReader(line), boundary{})
	must(t, err)
	if !errors.Is(res.reason, errGenesisPrev) || res.badLine != 1 {
		t.Fatalf("first record of segment 1 with a non-genesis prev: %+v", res)
	}
	// The same record in a later segment is an archived boundary and is accepted.
	line, _ = encodeLine(fuzzKey, 4, 1, 1, notGenesis, rec)
	must(t, err)
	res, err = scanSegment(fuzzKey, bytes.NewReader(line), boundary{})
	must(t, err)
	if res.reason != nil || res.records != 1 || res.segment != 4 {
		t.Fatalf("archived boundary: %+v", res)
	}
}

func TestScanLineTooLong(t *testing.T) {
	long := append(bytes.Repeat([]byte("x"), MaxLineBytes), '\n')
	res, err := scanSegment(fuzzKey, bytes.NewReader(long), boundary{})
	must(t, err)
	if !errors.Is(res.reason, errTooLong) || res.badLine != 1 {
		t.Fatalf("over-long line: %+v", res)
	}
}

// FuzzScanSegment feeds arbitrary segment bytes to the verifier: it must
// never panic, and the only inputs that verify are whole-line prefixes of the
// genuine segment (dropping trailing lines of the active segment is the one
// change a MAC chain cannot see by itself; see docs/issuer-audit.md).
func FuzzScanSegment(f *testing.F) {
	ls := segmentLines(f, fuzzKey, 5)
	genuine := bytes.Join(ls, nil)
	f.Add(genuine)
	f.Add(bytes.Join(ls[:3], nil))
	f.Add(bytes.Join([][]byte{ls[0], ls[2], ls[1]}, nil))
	f.Add(bytes.Join([][]byte{ls[0], ls[2]}, nil))
	f.Add(genuine[:len(genuine)-1])
	f.Add(bytes.Replace(genuine, []byte(`"line":2`), []byte(`"line":3`), 1))
	f.Add(bytes.Replace(genuine, []byte(`invalid_client`), []byte(`invalid_clienu`), 1))
	f.Add(bytes.Replace(genuine, []byte(`{"category"`), []byte(`{ "category"`), 1))
	f.Add(bytes.Replace(genuine, []byte(`"v":1`), []byte(`"v":1,"v":1`), 1))
	f.Add([]byte("{}\n"))
	f.Add([]byte("\n\n"))
	f.Add([]byte(`{"line":1,"mac":"` + string(bytes.Repeat([]byte("0"), 64)) + `"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := scanSegment(fuzzKey, bytes.NewReader(data), boundary{segment: 1, head: genesis, known: true})
		if err != nil {
			t.Fatalf("reading from memory failed: %v", err)
		}
		if res.reason != nil {
			if res.badLine != res.records+1 {
				t.Fatalf("bad line %d after %d good records", res.badLine, res.records)
			}
			return
		}
		if res.records > uint64(len(ls)) || !bytes.Equal(data, bytes.Join(ls[:res.records], nil)) {
			t.Fatalf("input that is not a prefix of the genuine segment verified (%d records)", res.records)
		}
	})
}

// FuzzParseLine: a single line parses only if it is byte for byte a line the
// writer produced under the key.
func FuzzParseLine(f *testing.F) {
	ls := segmentLines(f, fuzzKey, 3)
	valid := map[string]bool{}
	for _, l := range ls {
		l = bytes.TrimSuffix(l, []byte("\n"))
		valid[string(l)] = true
		f.Add(l)
		f.Add(bytes.ToUpper(l))
		f.Add(append([]byte(" "), l...))
		f.Add(append(l[:len(l):len(l)], ' '))
		f.Add(bytes.Replace(l, []byte(`"segment":1`), []byte(`"segment":1.0`), 1))
		f.Add(bytes.Replace(l, []byte(`"line"`), []byte(`"Line"`), 1))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := parseLine(fuzzKey, data); err == nil && !valid[string(data)] {
			t.Fatalf("a line the writer never produced parsed")
		}
	})
}

// TestLineIsCanonical holds the assembled line equal to the RFC 8785 form
// internal/canonjson gives the same envelope, for every kind of record.
func TestLineIsCanonical(t *testing.T) {
	w := &Writer{keys: keys{pseudonym: fuzzKey, version: 7}}
	entries := []Entry{
		denied(),
		issued(w, 1),
		{OperationID: "op-x", Outcome: OutcomeIssued, TokenID: "a~b.c_d:e-f", KeyID: "K", ExpiresAt: time.Unix(1, 0), Delegated: true,
			Pseudonyms: map[string]string{LabelSubject: w.Pseudonym(LabelSubject, "s"), LabelActor: w.Pseudonym(LabelActor, "a"),
				LabelClient: w.Pseudonym(LabelClient, "c"), LabelAuthority: w.Pseudonym(LabelAuthority, "x"), LabelPrincipal: w.Pseudonym(LabelPrincipal, "p")}},
	}
	for i, e := range entries {
		r, err := e.toRecord(7)
		must(t, err)
		rb, err := canonicalRecord(r)
		must(t, err)
		prev := [32]byte{byte(i), 0xab}
		line, mac := encodeLine(fuzzKey, uint32(i+1)*1000, uint64(i)*12345+1, 1_795_000_000_123, prev, rb)
		want, err := canonjson.Marshal(envelope{Version: 1, Segment: uint32(i+1) * 1000, Line: uint64(i)*12345 + 1, Time: 1_795_000_000_123,
			Prev: hex.EncodeToString(prev[:]), Record: r, MAC: hex.EncodeToString(mac[:])})
		must(t, err)
		if string(line) != string(want)+"\n" {
			t.Fatalf("entry %d:\n got %s\nwant %s", i, line, want)
		}
		p, err := parseLine(fuzzKey, bytes.TrimSuffix(line, []byte("\n")))
		if err != nil || p.mac != mac || p.prev != prev || p.line != uint64(i)*12345+1 || p.segment != uint32(i+1)*1000 {
			t.Fatalf("entry %d does not parse back: %+v %v", i, p, err)
		}
	}
}
