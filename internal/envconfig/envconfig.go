// Package envconfig overrides the keys of a decoded configuration document
// from environment variables, the way container platforms configure a
// service without rewriting its file.
//
// A key's variable is a prefix followed by its key path, each key written in
// upper snake case and the keys joined by underscores: under the prefix
// REGISTRUM_CONFIG_, listener.port is REGISTRUM_CONFIG_LISTENER_PORT and
// authentication.jwksUrl is REGISTRUM_CONFIG_AUTHENTICATION_JWKS_URL. An
// entry of a map the file declares is named by its key, upper-cased with
// every other character than a letter or a digit as an underscore
// (reviewAuthorities.desk-1.endpoint is
// REGISTRUM_CONFIG_REVIEW_AUTHORITIES_DESK_1_ENDPOINT); entries the file does
// not declare cannot be added from the environment. A list of strings is
// written comma-separated.
//
// A variable under the prefix that names no key is refused: a misspelled
// name must not silently leave a setting at the file's value.
package envconfig

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Override is one key set from the environment.
type Override struct {
	// Variable is the environment variable's name.
	Variable string
	// Path is the key path it set, as the configuration's refusals name it
	// ("listener.port", "reviewAuthorities.desk.endpoint").
	Path string
}

// Apply sets in v (a pointer to the decoded configuration: structs whose
// fields carry yaml tags) every key that a variable of environ ("NAME=value"
// strings, as os.Environ returns) under prefix names, and returns what it set
// in variable order. A variable that names no key, or whose value does not
// parse as the key's type, is an error naming the variable; nothing is set
// then.
func Apply(v any, prefix string, environ []string) ([]Override, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("envconfig: Apply needs a pointer to a struct, got %T", v)
	}
	keys := map[string]key{}
	collect(keys, rv.Elem(), prefix, "", nil)
	var vars []string
	values := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, prefix) {
			continue
		}
		vars = append(vars, name)
		values[name] = value
	}
	slices.Sort(vars)
	var errs []error
	for _, name := range vars {
		if _, ok := keys[name]; !ok {
			errs = append(errs, fmt.Errorf("environment variable %s names no configuration key (docs: the keys and their variables)", name))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Parse every value before setting any, so a refusal changes nothing.
	parsed := make([]reflect.Value, len(vars))
	for i, name := range vars {
		k := keys[name]
		p, err := parse(k.typ, values[name])
		if err != nil {
			return nil, fmt.Errorf("environment variable %s (%s): %w", name, k.path, err)
		}
		parsed[i] = p
	}
	out := make([]Override, 0, len(vars))
	for i, name := range vars {
		k := keys[name]
		set(rv.Elem(), k.index, parsed[i])
		out = append(out, Override{Variable: name, Path: k.path})
	}
	return out, nil
}

// key is one overridable leaf: its path, type and how to reach it.
type key struct {
	path  string
	typ   reflect.Type
	index []step
}

// step reaches a struct field (field >= 0) or a map entry (mapKey).
type step struct {
	field  int
	mapKey string
}

// collect records every overridable leaf under the struct value sv.
func collect(keys map[string]key, sv reflect.Value, name, path string, index []step) {
	st := sv.Type()
	for i := 0; i < st.NumField(); i++ {
		f := st.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || tag == "" || tag == "-" {
			continue
		}
		fname := joinName(name, snake(tag))
		fpath := joinPath(path, tag)
		fidx := append(slices.Clone(index), step{field: i})
		ft := f.Type
		fv := sv.Field(i)
		if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
			// A section the file leaves out can still be set from the
			// environment: walk its type on a zero value.
			inner := reflect.New(ft.Elem()).Elem()
			if !fv.IsNil() {
				inner = fv.Elem()
			}
			collect(keys, inner, fname, fpath, fidx)
			continue
		}
		switch {
		case ft.Kind() == reflect.Struct:
			collect(keys, fv, fname, fpath, fidx)
		case ft.Kind() == reflect.Map && ft.Key().Kind() == reflect.String:
			for _, mk := range fv.MapKeys() {
				entry := fv.MapIndex(mk)
				et := ft.Elem()
				if et.Kind() == reflect.Pointer {
					if entry.IsNil() {
						continue
					}
					entry, et = entry.Elem(), et.Elem()
				}
				if et.Kind() != reflect.Struct {
					continue
				}
				// A map entry is not addressable: walk a copy; set
				// replaces the entry with an updated copy.
				cp := reflect.New(et).Elem()
				cp.Set(entry)
				collect(keys, cp, joinName(fname, entryName(mk.String())), fpath+"."+mk.String(), append(slices.Clone(fidx), step{field: -1, mapKey: mk.String()}))
			}
		case scalar(ft):
			keys[fname] = key{path: fpath, typ: ft, index: fidx}
		}
	}
}

// scalar reports whether values of t can be written in one variable.
func scalar(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	case reflect.Slice:
		return t.Elem().Kind() == reflect.String
	}
	return false
}

// parse reads s as a value of t.
func parse(t reflect.Type, s string) (reflect.Value, error) {
	if t.Kind() == reflect.Pointer {
		inner, err := parse(t.Elem(), s)
		if err != nil {
			return reflect.Value{}, err
		}
		p := reflect.New(t.Elem())
		p.Elem().Set(inner)
		return p, nil
	}
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return v, errors.New("must be true or false")
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, t.Bits())
		if err != nil {
			return v, fmt.Errorf("must be an integer of %d bits", t.Bits())
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, t.Bits())
		if err != nil {
			return v, fmt.Errorf("must be a non-negative integer of %d bits", t.Bits())
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, t.Bits())
		if err != nil {
			return v, errors.New("must be a number")
		}
		v.SetFloat(f)
	case reflect.Slice:
		items := []string{}
		if strings.TrimSpace(s) != "" {
			for _, it := range strings.Split(s, ",") {
				items = append(items, strings.TrimSpace(it))
			}
		}
		v = reflect.ValueOf(items).Convert(t)
	}
	return v, nil
}

// set stores val at the leaf index reaches from sv, allocating absent
// sections on the way and writing map entries back.
func set(sv reflect.Value, index []step, val reflect.Value) {
	s := index[0]
	fv := sv.Field(s.field)
	if len(index) == 1 {
		fv.Set(val)
		return
	}
	if fv.Kind() == reflect.Pointer {
		if fv.IsNil() {
			fv.Set(reflect.New(fv.Type().Elem()))
		}
		fv = fv.Elem()
	}
	next := index[1:]
	if fv.Kind() == reflect.Map {
		mk := reflect.ValueOf(next[0].mapKey)
		entry := fv.MapIndex(mk)
		if entry.Kind() == reflect.Pointer {
			set(entry.Elem(), next[1:], val)
			return
		}
		cp := reflect.New(entry.Type()).Elem()
		cp.Set(entry)
		set(cp, next[1:], val)
		fv.SetMapIndex(mk, cp)
		return
	}
	set(fv, next, val)
}

// snake writes a camelCase key in upper snake case: jwksUrl → JWKS_URL,
// maximumRequestBytes → MAXIMUM_REQUEST_BYTES, hashKeyRef → HASH_KEY_REF.
func snake(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// entryName writes a map key as a variable name part.
func entryName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(unicode.ToUpper(r))
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func joinName(prefix, part string) string {
	if prefix == "" || strings.HasSuffix(prefix, "_") {
		return prefix + part
	}
	return prefix + "_" + part
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
