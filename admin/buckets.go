package admin

// bucketOf returns id's token buckets in m, made by create on first use.
// Where m holds most entries already, those at rest (idle says which:
// full buckets are the same as new ones) are forgotten first, so that m
// stays bounded by the IDs active recently. The caller holds the lock
// that guards m.
func bucketOf[B any](m map[string]B, id string, most int, idle func(B) bool, create func() B) B {
	b, ok := m[id]
	if !ok {
		if len(m) >= most {
			for k, v := range m {
				if idle(v) {
					delete(m, k)
				}
			}
		}
		b = create()
		m[id] = b
	}
	return b
}
