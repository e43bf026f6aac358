package dispatch

import (
	"runtime"
	"sync"
	"weak"
)

// interner hands out one shared, immutable value per key, so that the
// resident jobs whose specs agree on it (their schedule and zone, their
// policies) hold a pointer to one copy instead of a copy each. A value
// lives as long as some job holds it: the interner keeps only a weak
// pointer, and forgets the key once the value is collected, so it holds
// no more keys than there are distinct values in use. The zero interner
// is ready to use; it is safe for concurrent use. Values must never be
// modified once handed out.
type interner[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]weak.Pointer[V]
}

// get returns the value for k, made by mk if no live one is held.
func (in *interner[K, V]) get(k K, mk func() *V) *V {
	in.mu.Lock()
	defer in.mu.Unlock()
	if wp, ok := in.m[k]; ok {
		if v := wp.Value(); v != nil {
			return v
		}
	}
	v := mk()
	if in.m == nil {
		in.m = map[K]weak.Pointer[V]{}
	}
	wp := weak.Make(v)
	in.m[k] = wp
	runtime.AddCleanup(v, in.forget, internedKey[K, V]{k, wp})
	return v
}

// internedKey is what an interner's cleanup gets: the key and the weak
// pointer it held for it (a later value for the key is not forgotten).
type internedKey[K comparable, V any] struct {
	k  K
	wp weak.Pointer[V]
}

// forget drops the key of a collected value, unless the key already holds
// a newer one.
func (in *interner[K, V]) forget(ik internedKey[K, V]) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.m[ik.k] == ik.wp {
		delete(in.m, ik.k)
	}
}

// len returns the number of keys held (collected values not forgotten yet
// included).
func (in *interner[K, V]) len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.m)
}
