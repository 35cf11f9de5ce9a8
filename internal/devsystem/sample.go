package devsystem

import (
	"encoding/json"
	"strings"

	"github.com/registrum/registrum/host/model"
)

// SampleCreate picks the first entity whose required fields can be given
// sample values without other records and returns a create body for it.
func SampleCreate(p *model.Package) (*model.Entity, string) {
	for _, e := range p.Entities {
		if e.IsRequestEntity() {
			continue
		}
		data := map[string]any{}
		ok := true
		for _, f := range e.Fields {
			if !f.Required {
				continue
			}
			v, can := sampleValue(f)
			if !can {
				ok = false
				break
			}
			data[f.APIName] = v
		}
		if !ok {
			continue
		}
		b, _ := json.Marshal(map[string]any{"data": data})
		return e, string(b)
	}
	return nil, ""
}

func sampleValue(f *model.Field) (any, bool) {
	switch f.Type {
	case model.TypeString, model.TypeText:
		if f.Pattern != "" {
			return nil, false
		}
		s := "example"
		if f.MinLength != nil && len(s) < *f.MinLength {
			s += strings.Repeat("x", *f.MinLength-len(s))
		}
		if f.MaxLength != nil && len(s) > *f.MaxLength {
			s = s[:*f.MaxLength]
		}
		return s, true
	case model.TypeInteger:
		v := int64(1)
		if f.Minimum != nil && v < *f.Minimum {
			v = *f.Minimum
		}
		if f.Maximum != nil && v > *f.Maximum {
			v = *f.Maximum
		}
		return v, true
	case model.TypeDecimal:
		if f.Scale != nil && *f.Scale > 0 {
			return "1." + strings.Repeat("0", *f.Scale), true
		}
		return "1", true
	case model.TypeBoolean:
		return true, true
	case model.TypeDate:
		return "2026-01-01", true
	case model.TypeTimestamp:
		return "2026-01-01T00:00:00Z", true
	case model.TypeUUID:
		return "00000000-0000-4000-8000-000000000001", true
	case model.TypeCode:
		if len(f.Values) > 0 {
			return f.Values[0], true
		}
	case model.TypeCRS84Point:
		return map[string]any{"type": "Point", "coordinates": []float64{24.94, 60.17}}, true
	}
	return nil, false
}
