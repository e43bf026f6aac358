package api

import (
	"reflect"
	"strings"
	"sync"
)

// structInfo is what the walker needs of a struct type: its JSON names,
// as encoding/json decodes them (exported fields, tag names, embedded
// structs inlined), with their types and tag options.
type structInfo struct {
	byName map[string]fieldInfo
	names  []string // in declaration order, for suggestions
}

type fieldInfo struct {
	typ  reflect.Type
	opts string // "string" for `json:",string"`, else ""
}

var structCache sync.Map // reflect.Type -> *structInfo

func structFields(t reflect.Type) *structInfo {
	if info, ok := structCache.Load(t); ok {
		return info.(*structInfo)
	}
	info := &structInfo{byName: map[string]fieldInfo{}}
	addStructFields(info, t, 0)
	structCache.Store(t, info)
	return info
}

func addStructFields(info *structInfo, t reflect.Type, depth int) {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct && depth < 8 {
				addStructFields(info, et, depth+1)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := info.byName[name]; dup {
			continue // the shallower field wins, as in encoding/json
		}
		fi := fieldInfo{typ: f.Type}
		if strings.Contains(","+opts+",", ",string,") {
			fi.opts = "string"
		}
		info.byName[name] = fi
		info.names = append(info.names, name)
	}
}
