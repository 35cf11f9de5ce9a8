package query

import (
	"strings"
	"unicode/utf8"

	"github.com/registrum/registrum/model"
)

// Bounds of a $filter expression.
const (
	// MaxFilterBytes bounds the length of $filter, in bytes.
	MaxFilterBytes = 4096
	// MaxFilterNodes bounds the number of comparisons, functions and
	// and/or/not operators.
	MaxFilterNodes = 64
	// MaxFilterDepth bounds the nesting of parentheses and not.
	MaxFilterDepth = 8
	// MaxInList bounds the number of literals in one in (...) list.
	MaxInList = 100
	// MaxLiteralBytes bounds one literal, in bytes: the content of a string
	// after unescaping '', or a bare literal as written.
	MaxLiteralBytes = 512
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tWord
	tString
	tBare
	tLParen
	tRParen
	tComma
)

type token struct {
	kind tokKind
	text string // word or bare text; unescaped string content
	pos  int    // byte offset, for messages
}

// lexer splits a filter into tokens.
type lexer struct {
	src string
	pos int
}

func isWordStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }
func isWordByte(c byte) bool  { return isWordStart(c) || c >= '0' && c <= '9' }
func isBareByte(c byte) bool {
	return isWordByte(c) || c == '-' || c == '+' || c == ':' || c == '.'
}

func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) && (l.src[l.pos] == ' ' || l.src[l.pos] == '\t') {
		l.pos++
	}
	start := l.pos
	if l.pos >= len(l.src) {
		return token{kind: tEOF, pos: start}, nil
	}
	c := l.src[l.pos]
	switch {
	case c == '(':
		l.pos++
		return token{kind: tLParen, text: "(", pos: start}, nil
	case c == ')':
		l.pos++
		return token{kind: tRParen, text: ")", pos: start}, nil
	case c == ',':
		l.pos++
		return token{kind: tComma, text: ",", pos: start}, nil
	case c == '\'':
		var b strings.Builder
		l.pos++
		for {
			i := strings.IndexByte(l.src[l.pos:], '\'')
			if i < 0 {
				return token{}, invalid("%s: the string starting at byte %d is not closed with a single quote.", OptFilter, start)
			}
			b.WriteString(l.src[l.pos : l.pos+i])
			l.pos += i + 1
			if l.pos < len(l.src) && l.src[l.pos] == '\'' {
				b.WriteByte('\'')
				l.pos++
				continue
			}
			break
		}
		s := b.String()
		if len(s) > MaxLiteralBytes {
			return token{}, invalid("%s: the string starting at byte %d is longer than %d bytes.", OptFilter, start, MaxLiteralBytes)
		}
		if !utf8.ValidString(s) {
			return token{}, invalid("%s: the string starting at byte %d is not valid UTF-8.", OptFilter, start)
		}
		return token{kind: tString, text: s, pos: start}, nil
	case isWordStart(c):
		for l.pos < len(l.src) && isWordByte(l.src[l.pos]) {
			l.pos++
		}
		return token{kind: tWord, text: l.src[start:l.pos], pos: start}, nil
	case c >= '0' && c <= '9' || c == '-':
		for l.pos < len(l.src) && isBareByte(l.src[l.pos]) {
			l.pos++
		}
		if l.pos-start > MaxLiteralBytes {
			return token{}, invalid("%s: the literal at byte %d is longer than %d bytes.", OptFilter, start, MaxLiteralBytes)
		}
		return token{kind: tBare, text: l.src[start:l.pos], pos: start}, nil
	}
	return token{}, invalid("%s: unexpected character %s at byte %d.", OptFilter, echo(l.src[l.pos:l.pos+1]), start)
}

// NodeKind is the kind of a filter node.
type NodeKind uint8

// Kinds of filter node.
const (
	// And holds two or more operands, all of which must hold.
	And NodeKind = iota
	// Or holds two or more operands, one of which must hold.
	Or
	// Not holds one operand, negated.
	Not
	// Compare is field op literal; Op is one of eq, ne, gt, ge, lt, le.
	Compare
	// In is field in (literals); Op is "in".
	In
	// Function is startswith(field, text) or contains(field, text); Op is
	// the function name and Values holds the text.
	Function
)

// Node is one node of a parsed, type-checked filter.
type Node struct {
	Kind NodeKind
	// Operands are the operands of And, Or (two or more) and Not (one).
	Operands []*Node
	// Op is the comparison operator or function name (see NodeKind).
	Op string
	// Field is the field compared. For a pseudo field it is a synthetic
	// code field whose APIName is the pseudo name.
	Field *model.Field
	// Pseudo reports that Field is a pseudo field (Allowed.Pseudo).
	Pseudo bool
	// Values holds the literals in storage form (nil for null).
	Values []any
	// Literals holds the literals' canonical text as written.
	Literals []string
}

// IsCompareOp reports whether op is a comparison operator of $filter (eq,
// ne, gt, ge, lt, le).
func IsCompareOp(op string) bool {
	switch op {
	case "eq", "ne", "gt", "ge", "lt", "le":
		return true
	}
	return false
}

// keywords cannot start a field name in a filter.
var keywords = map[string]bool{"and": true, "or": true, "not": true, "in": true,
	"eq": true, "ne": true, "gt": true, "ge": true, "lt": true, "le": true,
	"true": true, "false": true, "null": true}

type parser struct {
	lex   lexer
	tok   token
	e     *model.Entity
	a     Allowed
	nodes int
}

// parseFilter parses and type-checks a $filter expression.
func parseFilter(e *model.Entity, a Allowed, src string) (*Node, error) {
	if len(src) > MaxFilterBytes {
		return nil, invalid("%s is longer than %d bytes.", OptFilter, MaxFilterBytes)
	}
	p := &parser{lex: lexer{src: src}, e: e, a: a}
	if err := p.advance(); err != nil {
		return nil, err
	}
	n, err := p.parseOr(0)
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.unexpected("and, or or the end of the filter")
	}
	return n, nil
}

func (p *parser) advance() error {
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) unexpected(want string) error {
	if p.tok.kind == tEOF {
		return invalid("%s: the filter ends where %s was expected.", OptFilter, want)
	}
	text := p.tok.text
	if p.tok.kind == tString {
		text = "'" + text + "'"
	}
	return invalid("%s: expected %s at byte %d, found %s.", OptFilter, want, p.tok.pos, echo(text))
}

func (p *parser) count() error {
	p.nodes++
	if p.nodes > MaxFilterNodes {
		return invalid("%s has more than %d comparisons and operators.", OptFilter, MaxFilterNodes)
	}
	return nil
}

func (p *parser) isWord(w string) bool { return p.tok.kind == tWord && p.tok.text == w }

func (p *parser) parseOr(depth int) (*Node, error) {
	return p.parseChain(depth, "or", Or, p.parseAnd)
}

func (p *parser) parseAnd(depth int) (*Node, error) {
	return p.parseChain(depth, "and", And, p.parseUnary)
}

// parseChain parses operand { word operand } into one flat node.
func (p *parser) parseChain(depth int, word string, kind NodeKind, operand func(int) (*Node, error)) (*Node, error) {
	first, err := operand(depth)
	if err != nil {
		return nil, err
	}
	if !p.isWord(word) {
		return first, nil
	}
	n := &Node{Kind: kind, Operands: []*Node{first}}
	for p.isWord(word) {
		if err := p.count(); err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		k, err := operand(depth)
		if err != nil {
			return nil, err
		}
		n.Operands = append(n.Operands, k)
	}
	return n, nil
}

func (p *parser) deeper(depth int) (int, error) {
	if depth+1 > MaxFilterDepth {
		return 0, invalid("%s nests parentheses and not deeper than %d levels.", OptFilter, MaxFilterDepth)
	}
	return depth + 1, nil
}

func (p *parser) parseUnary(depth int) (*Node, error) {
	if p.isWord("not") {
		d, err := p.deeper(depth)
		if err != nil {
			return nil, err
		}
		if err := p.count(); err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		k, err := p.parseUnary(d)
		if err != nil {
			return nil, err
		}
		return &Node{Kind: Not, Operands: []*Node{k}}, nil
	}
	return p.parsePrimary(depth)
}

func (p *parser) expect(kind tokKind, want string) error {
	if p.tok.kind != kind {
		return p.unexpected(want)
	}
	return p.advance()
}

func (p *parser) parsePrimary(depth int) (*Node, error) {
	switch {
	case p.tok.kind == tLParen:
		d, err := p.deeper(depth)
		if err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := p.parseOr(d)
		if err != nil {
			return nil, err
		}
		return n, p.expect(tRParen, "and, or or a closing parenthesis")
	case p.isWord("startswith") || p.isWord("contains"):
		return p.parseFunction()
	case p.tok.kind == tWord && !keywords[p.tok.text]:
		return p.parseComparison()
	}
	return nil, p.unexpected("a field name, not, startswith, contains or an opening parenthesis")
}

// fieldRef resolves a field name to an entity field or a pseudo field
// (reported by its bool); unknown and withheld fields get the same answer.
func (p *parser) fieldRef() (*model.Field, bool, error) {
	if p.tok.kind != tWord || keywords[p.tok.text] {
		return nil, false, p.unexpected("a field name")
	}
	name := p.tok.text
	for _, ps := range p.a.Pseudo {
		if ps.Name == name {
			f := &model.Field{APIName: name, Type: model.TypeCode, Required: true, Values: ps.Values}
			return f, true, p.advance()
		}
	}
	f := p.e.FieldByAPIName(name)
	if f == nil || !has(p.a.Filterable, f.ID) {
		return nil, false, invalid("%s: %s is not a filterable field of this entity for this access profile.", OptFilter, echo(name))
	}
	return f, false, p.advance()
}

func (p *parser) parseFunction() (*Node, error) {
	fn := p.tok.text
	if err := p.count(); err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if err := p.expect(tLParen, "an opening parenthesis after "+fn); err != nil {
		return nil, err
	}
	f, pseudo, err := p.fieldRef()
	if err != nil {
		return nil, err
	}
	if pseudo {
		return nil, invalid("%s: %s compares only with eq and in.", OptFilter, echo(f.APIName))
	}
	if err := p.expect(tComma, "a comma after the field of "+fn); err != nil {
		return nil, err
	}
	if p.tok.kind != tString {
		return nil, p.unexpected("a single-quoted string as the second argument of " + fn)
	}
	text := p.tok.text
	if err := p.advance(); err != nil {
		return nil, err
	}
	if err := p.expect(tRParen, "a closing parenthesis after the arguments of "+fn); err != nil {
		return nil, err
	}
	if err := checkFunction(f, fn, text); err != nil {
		return nil, err
	}
	return &Node{Kind: Function, Op: fn, Field: f, Values: []any{text}, Literals: []string{quote(text)}}, nil
}

func (p *parser) parseComparison() (*Node, error) {
	if err := p.count(); err != nil {
		return nil, err
	}
	f, pseudo, err := p.fieldRef()
	if err != nil {
		return nil, err
	}
	if p.isWord("in") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		if err := p.expect(tLParen, "an opening parenthesis after in"); err != nil {
			return nil, err
		}
		n := &Node{Kind: In, Op: "in", Field: f, Pseudo: pseudo}
		for {
			if len(n.Values) == MaxInList {
				return nil, invalid("%s: the in list of %s has more than %d members.", OptFilter, echo(f.APIName), MaxInList)
			}
			v, lit, err := p.literal(f, "in")
			if err != nil {
				return nil, err
			}
			n.Values, n.Literals = append(n.Values, v), append(n.Literals, lit)
			if p.tok.kind == tComma {
				if err := p.advance(); err != nil {
					return nil, err
				}
				continue
			}
			return n, p.expect(tRParen, "a comma or a closing parenthesis in the in list")
		}
	}
	if p.tok.kind != tWord || !IsCompareOp(p.tok.text) {
		return nil, p.unexpected("a comparison operator (eq, ne, gt, ge, lt, le) or in")
	}
	op := p.tok.text
	if pseudo && op != "eq" {
		return nil, invalid("%s: %s compares only with eq and in.", OptFilter, echo(f.APIName))
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	v, lit, err := p.literal(f, op)
	if err != nil {
		return nil, err
	}
	if pseudo && v == nil {
		return nil, invalid("%s: %s compares only with its codes, never with null.", OptFilter, echo(f.APIName))
	}
	return &Node{Kind: Compare, Op: op, Field: f, Pseudo: pseudo, Values: []any{v}, Literals: []string{lit}}, nil
}

// literal reads one literal for a comparison of f with op and returns its
// storage form and canonical text.
func (p *parser) literal(f *model.Field, op string) (any, string, error) {
	t := p.tok
	switch t.kind {
	case tString, tBare, tWord:
	default:
		return nil, "", p.unexpected("a literal")
	}
	if t.kind == tWord && !(t.text == "true" || t.text == "false" || t.text == "null") {
		return nil, "", p.unexpected("a literal (strings are single-quoted)")
	}
	v, err := checkLiteral(f, op, t)
	if err != nil {
		return nil, "", err
	}
	if err := p.advance(); err != nil {
		return nil, "", err
	}
	if t.kind == tString {
		return v, quote(t.text), nil
	}
	return v, t.text, nil
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// String renders the canonical form of the filter: every and, or and not
// operand parenthesised, literals as written; "" for a nil node.
func (n *Node) String() string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	n.write(&b)
	return b.String()
}

func (n *Node) write(b *strings.Builder) {
	switch n.Kind {
	case And, Or:
		word := " and "
		if n.Kind == Or {
			word = " or "
		}
		for i, k := range n.Operands {
			if i > 0 {
				b.WriteString(word)
			}
			b.WriteByte('(')
			k.write(b)
			b.WriteByte(')')
		}
	case Not:
		b.WriteString("not (")
		n.Operands[0].write(b)
		b.WriteByte(')')
	case Compare:
		b.WriteString(n.Field.APIName + " " + n.Op + " " + n.Literals[0])
	case In:
		b.WriteString(n.Field.APIName + " in (" + strings.Join(n.Literals, ",") + ")")
	case Function:
		b.WriteString(n.Op + "(" + n.Field.APIName + "," + n.Literals[0] + ")")
	}
}
