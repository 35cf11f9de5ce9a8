// Package interrupt rewrites a WebAssembly module so that a call into it can
// be stopped at its wall-time limit without slowing it down.
//
// wazero can stop a call when its context is done
// (RuntimeConfig.WithCloseOnContextDone), but it does so by calling from the
// compiled code back into Go at every loop header. A Go guest branches
// through a dispatch loop on nearly every jump, so that check makes a Go
// guest two to three times slower.
//
// Instead, the host rewrites each module when it loads it. It adds two
// globals: a flag, exported as [Export], and a countdown. At the start
// of every function body and of every loop body it inserts
//
//	countdown -= 1
//	if countdown == 0 {
//	  countdown = checkInterval
//	  memory.grow 0     (a no-op that passes through the host's Go code)
//	  if flag { unreachable }
//	}
//
// Compiled, that is a load, a subtraction, a store and a branch that is
// almost never taken. To stop a call the host sets the flag (from a timer);
// the guest traps within checkInterval loop iterations or function calls,
// and the host discards the instance. Every cycle of execution passes a loop
// header or a function entry, so a guest cannot run on without meeting the
// check: straight-line code between two checks is bounded by the size of a
// function body. Host functions the guest can import (WASI) do not block.
//
// The no-op memory.grow matters: compiled guest code never gives the Go
// scheduler a chance to stop its goroutine, so a garbage collection that
// must stop every goroutine would wait for the guest, and the timer that
// sets the flag could not run until it did: a guest's endless loop would
// hang the host. memory.grow leaves compiled code for wazero's Go code,
// where the goroutine can be stopped. A module without memory gets no such
// call; the host refuses it before it runs (its ABI needs a memory).
//
// The rewrite copies every instruction as it is, walking the code only to
// find loop headers: an opcode the walker does not know refuses the module
// rather than risk a wrong rewrite. The module's digest is checked on the
// original bytes before the rewrite.
//
// [AddChecks] does the rewrite; the host instantiates the result, reads the
// mutable i32 global exported as [Export] and sets it to 1 to stop a call.
package interrupt

import (
	"bytes"
	"errors"
	"fmt"
)

// checkInterval is how many loop iterations and function calls a guest runs
// between two looks at its interrupt flag. A Go guest passes a loop header
// every few nanoseconds, so this is tens of microseconds of guest time.
const checkInterval = 4096

// Export is the name under which a rewritten module exports its interrupt
// flag, a mutable i32 global: setting it to 1 makes the guest trap
// (unreachable) at its next check. A module that already exports this name
// is refused.
const Export = "registrum:interrupt"

// Section ids of the WebAssembly binary format.
const (
	sectionCustom = 0
	sectionImport = 2
	sectionMemory = 5
	sectionGlobal = 6
	sectionExport = 7
	sectionStart  = 8
	sectionCode   = 10
)

// sectionOrder gives each known section's place in a module: sections must
// appear in this order (custom sections anywhere).
var sectionOrder = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8, 9: 9, 12: 10, 10: 11, 11: 12}

type section struct {
	id      byte
	content []byte
}

// AddChecks returns src rewritten with an interrupt flag, exported as
// [Export], and its checks (see the package documentation). src is not
// modified. It refuses a module it cannot rewrite safely: one with a start
// function, one that already exports [Export], or one using an instruction
// outside WebAssembly 2.0 without SIMD.
func AddChecks(src []byte) ([]byte, error) {
	if len(src) < 8 || !bytes.Equal(src[:8], []byte{0, 'a', 's', 'm', 1, 0, 0, 0}) {
		return nil, errors.New("not a WebAssembly 1.0 binary module")
	}
	var sections []section
	r := reader{b: src, pos: 8}
	for r.pos < len(r.b) {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		content, err := r.sized()
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		if _, known := sectionOrder[id]; !known && id != sectionCustom {
			return nil, fmt.Errorf("unknown section id %d", id)
		}
		if id == sectionStart {
			// A start function runs inside instantiation, before the host
			// could arm the interrupt. Go reactors have none.
			return nil, errors.New("the module has a start function; build it as a reactor (-buildmode=c-shared)")
		}
		sections = append(sections, section{id: id, content: content})
	}

	importedGlobals, definedGlobals := 0, 0
	hasMemory := false
	for _, s := range sections {
		var err error
		var n uint32
		switch s.id {
		case sectionImport:
			var memories int
			importedGlobals, memories, err = countImports(s.content)
			hasMemory = hasMemory || memories > 0
		case sectionMemory:
			n, err = (&reader{b: s.content}).u32()
			hasMemory = hasMemory || n > 0
		case sectionGlobal:
			n, err = (&reader{b: s.content}).u32()
			definedGlobals = int(n)
		}
		if err != nil {
			return nil, err
		}
	}
	// The flag and the countdown take the next two global indices.
	flag := uint32(importedGlobals + definedGlobals)
	countdown := flag + 1

	// The new globals: mutable i32s, the flag clear and the countdown full.
	newGlobal := []byte{0x7F, 0x01, 0x41, 0x00, 0x0B, 0x7F, 0x01, 0x41}
	newGlobal = appendS32(newGlobal, checkInterval)
	newGlobal = append(newGlobal, 0x0B)
	// The new export: the flag under the reserved name.
	newExport := appendName(nil, Export)
	newExport = append(newExport, 0x03)
	newExport = appendU32(newExport, flag)

	out := append(make([]byte, 0, len(src)+len(src)/8), src[:8]...)
	var haveGlobal, haveExport bool
	for _, s := range sections {
		// Add the global and export sections in their place if the module
		// has none.
		if !haveGlobal && s.id != sectionCustom && sectionOrder[s.id] > sectionOrder[sectionGlobal] {
			out = appendSection(out, sectionGlobal, appendU32(nil, 2), newGlobal)
			haveGlobal = true
		}
		if !haveExport && s.id != sectionCustom && sectionOrder[s.id] > sectionOrder[sectionExport] {
			out = appendSection(out, sectionExport, appendU32(nil, 1), newExport)
			haveExport = true
		}
		switch s.id {
		case sectionGlobal:
			content, err := appendToVector(s.content, 2, newGlobal)
			if err != nil {
				return nil, fmt.Errorf("global section: %w", err)
			}
			out = appendSection(out, s.id, content)
			haveGlobal = true
		case sectionExport:
			if err := checkExports(s.content, flag); err != nil {
				return nil, err
			}
			content, err := appendToVector(s.content, 1, newExport)
			if err != nil {
				return nil, fmt.Errorf("export section: %w", err)
			}
			out = appendSection(out, s.id, content)
			haveExport = true
		case sectionCode:
			content, err := rewriteCode(s.content, interruptCheck(flag, countdown, hasMemory), flag)
			if err != nil {
				return nil, fmt.Errorf("code section: %w", err)
			}
			out = appendSection(out, s.id, content)
		default:
			out = appendSection(out, s.id, s.content)
		}
	}
	if !haveGlobal {
		out = appendSection(out, sectionGlobal, appendU32(nil, 2), newGlobal)
	}
	if !haveExport {
		out = appendSection(out, sectionExport, appendU32(nil, 1), newExport)
	}
	return out, nil
}

// appendSection appends a section made of the concatenated parts.
func appendSection(out []byte, id byte, parts ...[]byte) []byte {
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	out = append(out, id)
	out = appendU32(out, uint32(size))
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// appendToVector returns a vector's encoding (count, items) with the count
// more items encoded in items added.
func appendToVector(vec []byte, count uint32, items []byte) ([]byte, error) {
	r := reader{b: vec}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendU32(make([]byte, 0, len(vec)+len(items)+5), n+count)
	out = append(out, vec[r.pos:]...)
	return append(out, items...), nil
}

// countImports returns how many globals and memories an import section
// imports.
func countImports(content []byte) (globals, memories int, err error) {
	r := reader{b: content}
	n, err := r.u32()
	if err != nil {
		return 0, 0, fmt.Errorf("import section: %w", err)
	}
	for i := uint32(0); i < n; i++ {
		if err := r.skipName(); err != nil {
			return 0, 0, fmt.Errorf("import %d: %w", i, err)
		}
		if err := r.skipName(); err != nil {
			return 0, 0, fmt.Errorf("import %d: %w", i, err)
		}
		kind, err := r.byte()
		if err != nil {
			return 0, 0, fmt.Errorf("import %d: %w", i, err)
		}
		switch kind {
		case 0x00: // function: type index
			_, err = r.u32()
		case 0x01: // table: reference type, limits
			if _, err = r.byte(); err == nil {
				err = r.skipLimits()
			}
		case 0x02: // memory: limits
			memories++
			err = r.skipLimits()
		case 0x03: // global: value type, mutability
			globals++
			_, err = r.bytes(2)
		default:
			err = fmt.Errorf("unknown import kind %#x", kind)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("import %d: %w", i, err)
		}
	}
	return globals, memories, nil
}

// checkExports refuses an export section that already uses the reserved
// name or exports the global index the flag will take.
func checkExports(content []byte, flag uint32) error {
	r := reader{b: content}
	n, err := r.u32()
	if err != nil {
		return fmt.Errorf("export section: %w", err)
	}
	for i := uint32(0); i < n; i++ {
		name, err := r.sized()
		if err != nil {
			return fmt.Errorf("export %d: %w", i, err)
		}
		if string(name) == Export {
			return fmt.Errorf("the module exports %q, a name reserved for the host", Export)
		}
		kind, err := r.byte()
		if err != nil {
			return fmt.Errorf("export %d: %w", i, err)
		}
		index, err := r.u32()
		if err != nil {
			return fmt.Errorf("export %d: %w", i, err)
		}
		if kind == 0x03 && index >= flag {
			return fmt.Errorf("export %q names global %d, which the module does not define", name, index)
		}
	}
	return nil
}

// interruptCheck returns the instructions inserted at each function entry
// and loop header (see the top of this file).
func interruptCheck(flag, countdown uint32, hasMemory bool) []byte {
	c := appendU32([]byte{0x23}, countdown) // global.get countdown
	c = append(c, 0x41, 0x01, 0x6B, 0x24)   // i32.const 1; i32.sub; global.set
	c = appendU32(c, countdown)
	c = append(c, 0x23) // global.get countdown
	c = appendU32(c, countdown)
	c = append(c, 0x45, 0x04, 0x40, 0x41) // i32.eqz; if; i32.const
	c = appendS32(c, checkInterval)
	c = append(c, 0x24) // global.set countdown
	c = appendU32(c, countdown)
	if hasMemory {
		c = append(c, 0x41, 0x00, 0x40, 0x00, 0x1A) // i32.const 0; memory.grow; drop
	}
	c = append(c, 0x23) // global.get flag
	c = appendU32(c, flag)
	return append(c, 0x04, 0x40, 0x00, 0x0B, 0x0B) // if; unreachable; end; end
}

// rewriteCode returns a code section with check inserted in every function
// body. Instructions may not use the globals from index flag on.
func rewriteCode(content, check []byte, flag uint32) ([]byte, error) {
	r := reader{b: content}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}

	out := appendU32(make([]byte, 0, len(content)+len(content)/4), n)
	var body []byte
	for i := uint32(0); i < n; i++ {
		code, err := r.sized()
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		body, err = rewriteBody(body[:0], code, check, flag)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.pos != len(r.b) {
		return nil, fmt.Errorf("%d bytes after the last function body", len(r.b)-r.pos)
	}
	return out, nil
}

// rewriteBody appends to out the function body code with check inserted
// after its locals and at the start of each loop.
func rewriteBody(out, code, check []byte, flag uint32) ([]byte, error) {
	r := reader{b: code}
	groups, err := r.u32()
	if err != nil {
		return nil, err
	}
	for g := uint32(0); g < groups; g++ {
		if _, err := r.u32(); err != nil {
			return nil, err
		}
		if err := r.skipValueType(); err != nil {
			return nil, fmt.Errorf("locals: %w", err)
		}
	}
	out = append(out, code[:r.pos]...)
	out = append(out, check...)
	copied := r.pos
	for r.pos < len(r.b) {
		at := r.pos
		op, _ := r.byte()
		var err error
		switch {
		case op == 0x03: // loop blocktype: check at the top of each iteration
			if err = r.skipBlockType(); err == nil {
				out = append(out, code[copied:r.pos]...)
				out = append(out, check...)
				copied = r.pos
			}
		case op == 0x23 || op == 0x24: // global.get, global.set
			var index uint32
			if index, err = r.u32(); err == nil && index >= flag {
				err = fmt.Errorf("instruction at %d uses global %d, which the module does not define", at, index)
			}
		default:
			err = r.skipImmediates(op)
		}
		if err != nil {
			return nil, err
		}
	}
	return append(out, code[copied:]...), nil
}

// skipImmediates reads the immediates of an instruction with opcode op
// (other than loop and global.get/set), from the WebAssembly 2.0 core
// instruction set without SIMD: MVP, sign extension, saturating conversions,
// bulk memory and reference types. Anything else is an error.
func (r *reader) skipImmediates(op byte) error {
	var err error
	switch {
	case op == 0x00, op == 0x01, op == 0x05, op == 0x0B, op == 0x0F, // unreachable nop else end return
		op == 0x1A, op == 0x1B, // drop select
		op == 0xD1,               // ref.is_null
		op >= 0x45 && op <= 0xC4: // numeric, sign extension
		return nil
	case op == 0x02, op == 0x04: // block, if
		return r.skipBlockType()
	case op == 0x0C, op == 0x0D, // br, br_if
		op == 0x10,               // call
		op >= 0x20 && op <= 0x22, // local.get/set/tee
		op == 0x25, op == 0x26,   // table.get/set
		op == 0xD2: // ref.func
		_, err = r.u32()
	case op == 0x0E: // br_table: vector of labels, default label
		var n uint32
		if n, err = r.u32(); err == nil {
			for i := uint32(0); i <= n && err == nil; i++ {
				_, err = r.u32()
			}
		}
	case op == 0x11: // call_indirect: type index, table index
		if _, err = r.u32(); err == nil {
			_, err = r.u32()
		}
	case op == 0x1C: // select with types
		var n uint32
		if n, err = r.u32(); err == nil {
			for i := uint32(0); i < n && err == nil; i++ {
				err = r.skipValueType()
			}
		}
	case op >= 0x28 && op <= 0x3E: // loads and stores: align, offset
		if _, err = r.u32(); err == nil {
			_, err = r.u32()
		}
	case op == 0x3F, op == 0x40: // memory.size, memory.grow
		err = r.zero()
	case op == 0x41: // i32.const
		err = r.skipLEB(5)
	case op == 0x42: // i64.const
		err = r.skipLEB(10)
	case op == 0x43: // f32.const
		_, err = r.bytes(4)
	case op == 0x44: // f64.const
		_, err = r.bytes(8)
	case op == 0xD0: // ref.null reftype
		_, err = r.byte()
	case op == 0xFC:
		return r.skipPrefixed()
	default:
		return fmt.Errorf("opcode %#x at %d is not supported", op, r.pos-1)
	}
	return err
}

// skipPrefixed reads a 0xFC-prefixed instruction after its prefix.
func (r *reader) skipPrefixed() error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 7: // saturating truncations
		return nil
	case sub == 8: // memory.init data, memory 0
		if _, err = r.u32(); err == nil {
			err = r.zero()
		}
	case sub == 9, sub == 13, sub == 15, sub == 16, sub == 17: // data.drop, elem.drop, table.grow/size/fill
		_, err = r.u32()
	case sub == 10: // memory.copy 0 0
		if err = r.zero(); err == nil {
			err = r.zero()
		}
	case sub == 11: // memory.fill 0
		err = r.zero()
	case sub == 12, sub == 14: // table.init elem table, table.copy table table
		if _, err = r.u32(); err == nil {
			_, err = r.u32()
		}
	default:
		return fmt.Errorf("opcode 0xfc %d at %d is not supported", sub, r.pos)
	}
	return err
}

// reader decodes a WebAssembly binary.
type reader struct {
	b   []byte
	pos int
}

var errTruncated = errors.New("truncated module")

func (r *reader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, errTruncated
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *reader) bytes(n int) ([]byte, error) {
	if n < 0 || n > len(r.b)-r.pos {
		return nil, errTruncated
	}
	b := r.b[r.pos : r.pos+n]
	r.pos += n
	return b, nil
}

// u32 reads an unsigned LEB128 number of at most 32 bits.
func (r *reader) u32() (uint32, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if i == 4 && c > 0x0F {
			return 0, fmt.Errorf("LEB128 at %d overflows 32 bits", r.pos-1)
		}
		v |= uint32(c&0x7F) << (7 * i)
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("LEB128 at %d is too long", r.pos)
}

// skipLEB reads a LEB128 number of at most max bytes.
func (r *reader) skipLEB(max int) error {
	for i := 0; i < max; i++ {
		c, err := r.byte()
		if err != nil {
			return err
		}
		if c&0x80 == 0 {
			return nil
		}
	}
	return fmt.Errorf("LEB128 at %d is too long", r.pos)
}

// zero reads a reserved zero byte (a memory index in the MVP).
func (r *reader) zero() error {
	c, err := r.byte()
	if err == nil && c != 0 {
		err = fmt.Errorf("byte at %d is %#x, want 0 (one memory only)", r.pos-1, c)
	}
	return err
}

// sized reads a byte vector: its length, then its bytes.
func (r *reader) sized() ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	return r.bytes(int(n))
}

func (r *reader) skipName() error {
	_, err := r.sized()
	return err
}

func (r *reader) skipLimits() error {
	flags, err := r.byte()
	if err != nil {
		return err
	}
	if flags > 0x03 {
		return fmt.Errorf("limits flags %#x are not supported", flags)
	}
	if _, err := r.u32(); err != nil {
		return err
	}
	if flags&1 != 0 {
		_, err = r.u32()
	}
	return err
}

func (r *reader) skipValueType() error {
	t, err := r.byte()
	if err != nil {
		return err
	}
	if !isValueType(t) {
		return fmt.Errorf("value type %#x at %d is not supported", t, r.pos-1)
	}
	return nil
}

// skipBlockType reads a block type: empty, a value type, or a type index.
func (r *reader) skipBlockType() error {
	if r.pos >= len(r.b) {
		return errTruncated
	}
	if t := r.b[r.pos]; t == 0x40 || isValueType(t) {
		r.pos++
		return nil
	}
	return r.skipLEB(5) // s33 type index
}

func isValueType(t byte) bool {
	switch t {
	case 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F: // i32 i64 f32 f64 v128 funcref externref
		return true
	}
	return false
}

// appendU32 appends v as unsigned LEB128.
func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// appendS32 appends v as signed LEB128.
func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	return append(appendU32(b, uint32(len(s))), s...)
}
